"""Lesson 10's figures (kernels/rmsnorm/figures.py): they draw without overlapping labels, the
backward's programs are the launcher's, and the loop with PREFETCH keeps a load in flight while
a row is reduced, as rmsnorm_bwd_kernel's loop does."""

import inspect

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from test_matmul_figures import _overlapping_labels  # noqa: E402

from kernels.rmsnorm import figures, triton_rmsnorm  # noqa: E402


@pytest.mark.parametrize("rows", [1, 7, 33, 2000])
def test_the_programs_cover_the_rows_once_as_the_launcher_splits_them(rows):
    split = figures.backward_split(rows)
    assert [r for group in split for r in group] == list(range(rows))
    assert len(split) == triton_rmsnorm._split(rows, triton_rmsnorm.torch.device("cpu"))[0]
    assert all(len(group) for group in split), "no program without rows"
    assert len(split) <= triton_rmsnorm.INTERPRETER_PROGRAMS


def test_thirty_three_rows_are_four_programs_the_last_one_short():
    # the exercise's case "33 x 100 (rows the four programs share unevenly)"
    assert [len(g) for g in figures.backward_split(33)] == [9, 9, 9, 6]


@pytest.mark.parametrize(("rows", "cols"), [(33, 100), (1, 1), (7, 33), (16, 64), (3, 4289)])
def test_programs_figure_draws_without_overlapping_labels(rows, cols):
    fig = figures.rmsnorm_programs(rows, cols)
    try:
        texts = [t.get_text() for t in fig.findobj(Text)]
        assert sum(t.startswith("partial[") for t in texts) == len(figures.backward_split(rows))
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_the_kernel_loads_the_next_row_before_it_reduces():
    source = inspect.getsource(triton_rmsnorm.rmsnorm_bwd_kernel.fn)
    loop = source[source.index("for row in range(first, last):"):]
    assert loop.index("x_next = tl.load") < loop.index("tl.sum(")


@pytest.mark.parametrize("rows", [1, 2, 4, 9])
def test_the_loop_schedule_overlaps_loads_and_reductions_only_with_prefetch(rows):
    for prefetch in (False, True):
        events = figures.loop_schedule(rows, prefetch)
        loads = {r: (s, e) for what, r, s, e in events if what == "load"}
        reduces = {r: (s, e) for what, r, s, e in events if what == "reduce"}
        assert sorted(loads) == sorted(reduces) == list(range(rows))
        for r in range(rows):
            assert loads[r][1] <= reduces[r][0], "a row is reduced once its loads have landed"
            if r + 1 < rows:
                overlap = loads[r + 1][0] < reduces[r][1]
                assert overlap == prefetch, "row r + 1's loads in flight during row r's sum"
    slow, fast = (max(e[3] for e in figures.loop_schedule(rows, p)) for p in (False, True))
    assert fast < slow or rows == 1


def test_prefetch_figure_draws_without_overlapping_labels():
    fig = figures.prefetch_timeline()
    try:
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="rows expected"):
        figures.rmsnorm_programs(0, 10)
