"""Lesson 11's launch-overhead benchmark (kernels/bench_overhead.py) on a GPU: every layer runs and
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
    if overhead._hopper():  # lesson 16's kernel: its launch, its registered call, a graph
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


def test_a_missed_target_names_what_the_registry_adds_above_the_direct_call():
    """(any machine) The verdict's reason comes from the group's rows: the registry's path
    above the op's own function when that is what costs; a slow host only when the function
    itself is as slow."""
    from kernels.bench_overhead import Row, verdict

    peer = "SDPA (PyTorch's call), same run"
    group = "attention bf16 1x2x128x64 causal"

    def rows(direct_us: float) -> list[Row]:
        return [Row(group, "F.scaled_dot_product_attention", 18.0, 18.0, peer),
                Row(group, "triton_fwd.forward (the launch plan per problem)", direct_us,
                    18.0, peer),
                Row(group, "registry get_kernel(...)(q, k, v, True)", 29.7, 18.0, peer)]

    said = verdict(rows(18.9))
    assert "NOT here" in said and "the registry's path adds 10.8 µs to triton_fwd.forward" in said
    assert "the host is busy" in verdict(rows(29.5))
    assert "as expected" in verdict([*rows(18.9)[:2], Row(group, "registry call", 21.0, 18.0,
                                                            peer)])
