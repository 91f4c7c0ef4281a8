"""Lesson 13's figures of section 3 (kernels/tiles/figures.py): they draw without overlapping
labels, the ragged tile shows what the course's edge_tile kernel loads, and the transpose's
tiles are the exercise's."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from test_matmul_figures import _overlapping_labels  # noqa: E402

from exercises.triton_tools import TRANSPOSE  # noqa: E402
from kernels.tiles import figures  # noqa: E402


def test_the_edge_tile_holds_the_matrix_then_the_padding():
    tiles = figures.loaded_edge_tiles(10, 13)
    for padding, tile in tiles.items():
        for r in range(8):
            for c in range(8):
                value = tile[r, c].item()
                if 8 + r < 10 and 8 + c < 13:
                    assert value == (8 + r) * 13 + 8 + c  # the element's own index
                elif padding == "zero":
                    assert value == 0
                else:
                    assert math.isnan(value)


@pytest.mark.parametrize(("m", "n", "block"), [(10, 13, (8, 8)), (16, 16, (8, 8)),
                                               (5, 20, (4, 8))])
def test_ragged_tile_draws_without_overlapping_labels(m, n, block):
    fig = figures.ragged_tile(m, n, block)
    try:
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_the_transpose_figure_uses_the_exercise_s_tiles():
    bm, bn = figures.EXERCISE_BLOCK
    assert f"BM = {bm}, BN = {bn}" in TRANSPOSE.does


@pytest.mark.parametrize("case", TRANSPOSE.cases, ids=lambda s: f"{s['M']}x{s['N']}")
def test_transpose_figure_draws_every_case_without_overlapping_labels(case):
    fig = figures.transpose_tiles(case["M"], case["N"], program=(0, 0))
    try:
        bm, bn = figures.EXERCISE_BLOCK
        programs = -(-case["M"] // bm) * -(-case["N"] // bn)
        labels = [t.get_text() for t in fig.findobj(Text) if t.get_text().startswith("(")]
        assert len(labels) == 2 * programs  # each program's tile, in x and in z
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="program expected"):
        figures.transpose_tiles(4, 4, program=(1, 0))
