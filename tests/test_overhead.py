"""Lesson 09's launch-overhead benchmark (kernels/bench_overhead.py) on a GPU: every layer runs and
is measured beside its PyTorch peer, and the records say what they measured. Times are printed,
never asserted."""

import pytest

from course_utils import results


@pytest.mark.gpu
def test_every_layer_is_measured_beside_its_peer(capsys):
    from kernels import bench_overhead as overhead

    records = overhead.run(quick=True)
    out = capsys.readouterr().out
    groups = ["mma bf16 256³", "add float32 65,536", "fp64 GEMM 256³"]
    if overhead._hopper():  # lesson 07's kernel: its launch, its registered call, a graph
        groups += ["wgmma bf16 256³", "wgmma fp8_e4m3 256³"]
    # the Triton kernels: attention beside SDPA, RMSNorm beside F.rms_norm (and f+b)
    groups += ["attention bf16 1x2x128x64 causal", "rmsnorm bf16 64x256 forward",
               "rmsnorm bf16 64x256 forward + backward"]
    assert all(isinstance(r, results.Record) and r.unit == "µs" and r.value > 0 for r in records)
    for group in groups:
        mine = [r for r in records if group in r.what]
        assert len(mine) >= 3, f"{group}: {[r.what for r in mine]}"
        assert any("registry" in r.what for r in mine) and mine[0].value == mine[0].peer
    assert "host time per call" in out and "registered mma bf16" in out
    assert "registered attention bf16" in out  # issue 34's target: within 5 µs of SDPA
    assert any("CUDA graph" in r.what for r in records) == overhead._hopper()
