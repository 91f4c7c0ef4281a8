"""Lesson 07's tile choice (kernels/matmul/hopper/tiles.py): the wave-quantisation rule, on any
machine; on a Hopper GPU, the registered auto kernel against float64 with each chosen tile."""

import pytest
import torch

import kernels
from kernels.matmul.hopper import tiles, wgmma


def test_waves_count_full_rounds_of_a_persistent_grid():
    assert [tiles.waves(t, 132) for t in (1, 132, 133, 264, 265)] == [1, 1, 2, 2, 3]


@pytest.mark.parametrize(("m", "n", "tile"), [
    (8192, 8192, "128x256"),  # many tiles: the largest, fastest per SM
    (2048, 2048, "128x256"),  # 128 tiles fill 132 SMs in one wave
    (8192, 1024, "128x256"),  # 256 tiles: two full waves either way
    (1024, 1024, "64x128"),  # 32 large tiles would leave 100 SMs idle
    (16, 4096, "64x128"),  # decoding: as many small tiles as there are
    (64, 14336, "64x128"),
])
def test_the_rule_picks_what_the_h100_sweep_measured_best_or_within_noise(m, n, tile):
    assert tiles.choose(m, n, 132).name == tile


def test_the_estimate_is_waves_times_area_over_rate_and_explain_marks_the_choice():
    big, small = tiles.CANDIDATES[0], tiles.CANDIDATES[-1]
    assert big.step is wgmma.BEST and big.rate == 1.0
    assert big.estimate(1024, 1024, 132) == 1 * 128 * 256  # 32 tiles: one (mostly idle) wave
    assert small.estimate(1024, 1024, 132) == pytest.approx(64 * 128 / small.rate)
    rows = tiles.explain(1024, 1024, 132)
    assert [r["tile"] for r in rows if r["chosen"]] == ["64x128"]
    assert rows[0]["busy in last wave"] == "32/132"


def test_every_candidate_fits_shared_memory_and_is_step_4s_kernel():
    for c in tiles.CANDIDATES:
        assert c.step.kernel == "wgmma_specialized" and c.step.persistent
        assert c.step.shared_bytes <= 227 * 1024, c.name
        assert c.step.bm == 64 * c.step.consumers


def test_bad_sizes_are_refused_naming_them():
    with pytest.raises(ValueError, match="m, n and sms >= 1, got m=0"):
        tiles.choose(0, 8, 132)


def test_auto_kernels_are_registered_with_their_candidates():
    k = kernels.get_kernel("matmul", "wgmma", "auto_bf16")
    assert k.meta["tiles"] == ["128x256", "128x128", "64x256", "64x128"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["bf16", "fp8_e4m3"])
def test_auto_matches_float64_with_every_tile_it_chooses(name):
    if reason := wgmma.reason_here():
        pytest.skip(reason)
    v = wgmma.variant(name)
    k = kernels.get_kernel("matmul", "wgmma", f"auto_{name}")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    chosen = set()
    for m, n, kk in ((16, 4096, 256), (1000, 1000, 384), (2048, 2048, 128), (4096, 4096, 64)):
        chosen.add(tiles.choose(m, n, sms).name)
        a = (torch.randn(m, kk, device="cuda") / kk**0.25).to(v.a)
        b = (torch.randn(n, kk, device="cuda") / kk**0.25).to(v.b).t()
        expected = a.double() @ b.double()
        scale = expected.abs().max().item()
        torch.testing.assert_close(k(a, b).double(), expected, atol=3e-2 * scale, rtol=3e-2)
    assert len(chosen) >= 2, chosen


def test_size_verdicts_count_the_shapes_that_meet_each_target():
    from course_utils import results
    from kernels.matmul.hopper import bench_sizes

    def rec(shape, mode, ratio):
        return results.Record(bench_sizes.LESSON, f"bf16 auto {shape} {mode} (tile 128x256)",
                              ratio * 700, "TFLOP/s", peer=700, peer_what="cuBLAS")

    records = [rec("2048^3", "back to back", 0.97), rec("4096^3", "back to back", 0.90),
               rec("1024^3", "one call between events", 0.85)]
    lines = bench_sizes.verdicts(records)
    assert len(lines) == 2
    assert "1 of 2 shapes; lowest 0.90× at 4096^3" in lines[0] and "not" in lines[0].lower()
    assert "1 of 1 shapes" in lines[1]
    assert bench_sizes.shapes()[:5] == [(s, s, s) for s in bench_sizes.SQUARES]
    assert bench_sizes.moved_bytes(wgmma.variant("bf16"), 16, 4096, 4096) == 2 * (
        16 * 4096 + 4096 * 4096 + 16 * 4096)
