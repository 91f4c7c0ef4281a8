"""Lesson 17's tile choice (kernels/matmul/hopper/tiles.py): the wave-quantisation rule, on any
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


@pytest.mark.parametrize(("m", "n", "k_tiles", "splits"), [
    (16, 4096, 64, 4),  # decoding, bf16 K = 4096: 32 tiles; 8 splits would take two waves
    (64, 4096, 64, 4),
    (64, 4096, 32, 4),  # fp8 K = 4096: 32 K tiles of 128 bytes
    (100, 4096, 64, 2),  # 64 tiles: 128 units fill one wave, 256 would take two
    (1, 520, 64, 8),  # 5 tiles: as many splits as the rule allows
    (16, 14336, 64, 1),  # 112 tiles: 224 units take two waves, no faster than one
    (64, 14336, 32, 1),
    (8192, 8192, 128, 1),  # big squares fill every SM: no split
    (1024, 1024, 16, 1),  # 128 tiles: nearly one full wave already
    (64, 4096, 2, 1),  # K = 96 bf16: too short to split
    (64, 4096, 7, 1),  # 2 splits would leave the last one 3 K tiles
    (64, 4096, 0, 1),  # K = 0 (or not given to chosen_step): nothing to split
])
def test_split_rule_fills_idle_sms_only_when_it_pays(m, n, k_tiles, splits):
    assert tiles.choose_splits(m, n, k_tiles, 132) == splits


def test_every_split_the_rule_picks_keeps_min_k_tiles():
    for k_tiles in range(1, 300):
        for m, n in ((1, 520), (16, 4096), (100, 4096), (64, 2048)):
            s = tiles.choose_splits(m, n, k_tiles, 132)
            per, runs = wgmma.split_k(k_tiles, s)
            assert runs == s, (m, n, k_tiles, s)  # no split left without K tiles
            assert s == 1 or k_tiles - (s - 1) * per >= tiles.MIN_K_TILES, (m, n, k_tiles, s)
            assert s in (1, 2, 4, 8)


def test_split_estimate_is_waves_of_units_plus_partials_and_explain_marks_the_choice():
    small = tiles.CANDIDATES[-1]
    assert small.name == "64x128" and small.step.can_split_k
    assert tiles.partial_cost(small) == pytest.approx(64 * 128 * 4 / ((64 + 128) * 128))
    rows = tiles.explain_splits(64, 4096, 64, 132)  # the module docstring's example
    assert [(r["splits"], r["units"], r["waves"], r["K tiles per unit"], r["estimate"])
            for r in rows] == [(1, 32, 1, 64, 64.0), (2, 64, 1, 32, 36.0),
                               (4, 128, 1, 16, 22.7), (8, 256, 2, 8, 28.0)]
    assert [r["splits"] for r in rows if r["chosen"]] == [4]
    assert wgmma.split_k(9, 8) == (2, 5)  # 5 splits get K tiles; the kernel runs those
    assert wgmma.split_k(64, 4) == (16, 4)
    assert wgmma.k_tiles(4064, 2) == 64 and wgmma.k_tiles(96, 2) == 2


def test_tiles_that_cannot_split_are_never_split():
    big = tiles.CANDIDATES[0]  # 128 x 256: its kernel has no split-K (SPLIT_K in wgmma.cu)
    assert not big.step.can_split_k
    assert tiles.split_candidates(big, 4, 64, 132) == [1]


def test_chosen_step_carries_the_split_and_stays_step_4s_kernel(monkeypatch):
    monkeypatch.setattr(wgmma, "sm_count", lambda device: 132)
    tiles.chosen_step.cache_clear()
    try:
        split = tiles.chosen_step(64, 4096, 0, 64)
        whole = tiles.chosen_step(64, 4096, 0)  # no K given: K is not split
        assert (split.splits, whole.splits) == (4, 1)
        assert split.template == whole.template == tiles.CANDIDATES[-1].step.template
        assert tiles.chosen_step(8192, 8192, 0, 128) is wgmma.BEST
    finally:
        tiles.chosen_step.cache_clear()  # the GPU tests must see the real SM count


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


def test_an_empty_output_needs_no_tile_choice():
    # the supports() edge test found auto_* saying yes to M = 0 and then raising in choose()
    for m, n in ((0, 16), (16, 0), (0, 0)):
        assert tiles.chosen_step(m, n, 0) is tiles.CANDIDATES[0].step
