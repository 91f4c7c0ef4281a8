"""Lesson 07's figures (kernels/matmul/figures.py): they draw, their labels do not collide, and
the layouts they show (swizzle, fragments, pipeline) have the properties the lesson claims."""

import itertools
import types
from unittest import mock

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from course_utils import env  # noqa: E402
from kernels.matmul import figures  # noqa: E402

CONFIGS = [figures.TileConfig(),  # 128x128, 64-byte K slices, 64x64 warps, 3 stages
           figures.TileConfig(bm=128, bn=256, bk_bytes=128, wm=64, wn=64, stages=4),
           figures.TileConfig(bm=64, bn=64, bk_bytes=64, wm=32, wn=32, stages=2),
           figures.TileConfig(bm=256, bn=128, bk_bytes=128, wm=64, wn=32, stages=5)]
IDS = [f"{c.bm}x{c.bn}-bk{c.bk_bytes}B-w{c.wm}x{c.wn}-s{c.stages}" for c in CONFIGS]
DRAW = {"tiles": figures.tile_hierarchy, "swizzle": figures.swizzle_banks,
        "pipeline": figures.pipeline}


def _overlapping_labels(fig) -> list[tuple[str, str]]:
    """Pairs of non-empty text labels, among those actually drawn, whose boxes intersect.
    (Texts of hidden axes still exist and report themselves visible: record the drawn ones.)"""
    drawn, draw = [], Text.draw

    def record(text, renderer):
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        return draw(text, renderer)

    with mock.patch.object(Text, "draw", record):
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in drawn]
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
            if box_a.overlaps(box_b)
            and min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0) > 1  # more than touching
            and min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0) > 1]


@pytest.mark.parametrize("name", list(DRAW))
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_figure_draws_without_overlapping_labels(name, config):
    fig = DRAW[name](config)
    try:
        assert fig.findobj(Text), "a figure without labels teaches nothing"
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_fragment_figure_draws_without_overlapping_labels():
    fig = figures.fragments()  # fixed by the instruction: no config
    try:
        assert len(fig.findobj(Text)) > 16 * 16 + 16 * 8 * 2  # a lane number in every cell
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_the_overlap_check_sees_overlapping_labels():
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "warp 0 holds this")
    ax.text(0.52, 0.5, "and this")
    try:
        assert _overlapping_labels(fig) == [("warp 0 holds this", "and this")]
    finally:
        plt.close(fig)


def test_any_object_with_the_fields_is_a_config():
    config = types.SimpleNamespace(bm=64, bn=128, bk_bytes=64, wm=32, wn=64, stages=3)
    plt.close(figures.tile_hierarchy(config))


@pytest.mark.parametrize(("change", "field"), [({"wm": 48}, "config.wm"),
                                              ({"wn": 12}, "config.wn"),
                                              ({"bk_bytes": 48}, "config.bk_bytes"),
                                              ({"stages": 1}, "config.stages"),
                                              ({"bm": 0}, "config.bm")])
def test_bad_config_names_the_field(change, field):
    fields = {f: getattr(figures.TileConfig(), f) for f in figures.FIELDS}
    with pytest.raises(ValueError, match=field):
        figures.check_config(types.SimpleNamespace(**{**fields, **change}))
    with pytest.raises(ValueError, match="without stages"):
        figures.check_config(types.SimpleNamespace(bm=1, bn=1, bk_bytes=16, wm=16, wn=8))


# -- the swizzle --------------------------------------------------------------------------------


@pytest.mark.parametrize("chunks", [2, 4, 8])
def test_swizzle_permutes_each_row_and_makes_ldmatrix_conflict_free(chunks):
    for row in range(64):
        assert sorted(figures.swizzle(row, c, chunks) for c in range(chunks)) == list(
            range(chunks))
    for chunk in range(chunks):
        for first in range(0, 64, 8):  # every ldmatrix phase reads 8 consecutive rows
            assert figures.conflict_ways(chunk, chunks, swizzled=True, first_row=first) == 1
        assert figures.conflict_ways(chunk, chunks, swizzled=False) == 8 // (8 // chunks)


def test_swizzle_rejects_what_the_kernel_cannot_lay_out():
    with pytest.raises(ValueError, match="chunks_per_row expected"):
        figures.swizzle(0, 0, 3)
    with pytest.raises(ValueError, match=r"\(row, chunk\) expected"):
        figures.swizzle(0, 4, 4)


# -- the fragments --------------------------------------------------------------------------------


@pytest.mark.parametrize(("layout", "shape", "per_lane"),
                         [(figures.fragment_a, (16, 16), 8), (figures.fragment_b, (16, 8), 4),
                          (figures.fragment_c, (16, 8), 4)])
def test_fragments_cover_each_element_exactly_once(layout, shape, per_lane):
    held = [(r, c) for lane in range(32) for r, c, _ in layout(lane)]
    assert all(len(layout(lane)) == per_lane for lane in range(32))
    assert sorted(held) == [(r, c) for r in range(shape[0]) for c in range(shape[1])]


def test_fragment_a_of_lane_0_is_what_the_ptx_isa_lists():
    # a0,a1: row 0 cols 0-1; a2,a3: row 8; a4,a5: row 0 cols 8-9; a6,a7: row 8 cols 8-9
    assert [(r, c) for r, c, _ in figures.fragment_a(0)] == [
        (0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert [(k, n) for k, n, _ in figures.fragment_b(5)] == [(2, 1), (3, 1), (10, 1), (11, 1)]


# -- the pipeline -----------------------------------------------------------------------------


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
def test_pipeline_schedule_reuses_a_buffer_only_after_its_mma(stages):
    events = figures.pipeline_schedule(stages, k_tiles=12)
    loads = {t: (b, s, e) for b, kind, t, s, e in events if kind == "load"}
    mmas = {t: (b, s, e) for b, kind, t, s, e in events if kind == "mma"}
    for t in range(12):
        assert loads[t][2] <= mmas[t][1], "a tile is computed only once it has arrived"
        assert loads[t][0] == mmas[t][0] == t % stages
        if t >= stages:  # the buffer's previous tile must be consumed before it is refilled
            assert mmas[t - stages][2] <= loads[t][1]
        if t:  # after the prologue the tensor cores never wait
            assert mmas[t][1] == mmas[t - 1][2]
    with pytest.raises(ValueError, match="stages expected"):
        figures.pipeline_schedule(1, 4)


def test_save_all_writes_stamped_pngs(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "VAR", tmp_path)
    paths = figures.save_all(figures.TileConfig())
    assert [p.name for p in paths] == ["05_tiles.png", "05_fragments.png", "05_swizzle.png",
                                       "05_pipeline.png"]
    assert all(p.parent == tmp_path / "figures" and p.stat().st_size > 10_000 for p in paths)
