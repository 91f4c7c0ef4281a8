"""Lesson 13's stopwatch figure (kernels/softmax/figures.py): its loops are the two stopwatches'
(course_utils.timing.benchmark and triton.testing.do_bench), and it measures what section 2 says
each measures."""

import inspect

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import triton.testing  # noqa: E402
from test_matmul_figures import _overlapping_labels  # noqa: E402

from course_utils import timing  # noqa: E402
from kernels.softmax import figures  # noqa: E402


def _in_order(source: str, *lines: str) -> bool:
    at = [source.find(line) for line in lines]
    return -1 not in at and at == sorted(at)


def test_the_loops_are_the_stopwatches_loops():
    do_bench = inspect.getsource(triton.testing.do_bench)
    loop = do_bench[do_bench.index("for i in range(n_repeat):"):]
    assert _in_order(loop, "clear_cache(cache)", "start_event[i].record()", "fn()",
                     "end_event[i].record()")
    ours = inspect.getsource(timing.benchmark)
    assert _in_order(ours[ours.index("for begin, end in events"):], "begin.record()",
                     "_call(fn,", "end.record()")


def test_a_host_bound_call_times_the_launch_in_benchmark_and_the_kernel_in_do_bench():
    d = figures.Durations()
    assert d.launch > d.kernel_warm  # the small problem of section 2
    for timer, expected in (("benchmark", d.launch), ("do_bench", d.kernel_cold)):
        _, _, measured = figures.stopwatch_schedule(timer, 4, d)
        assert all(end - begin == pytest.approx(expected) for begin, end in measured[1:])


def test_a_long_kernel_is_timed_alike_but_for_the_l2():
    d = figures.Durations(launch=0.2, kernel_warm=3.0, kernel_cold=3.5)
    for timer, expected in (("benchmark", d.kernel_warm), ("do_bench", d.kernel_cold)):
        _, _, measured = figures.stopwatch_schedule(timer, 3, d)
        assert all(end - begin == pytest.approx(expected) for begin, end in measured[1:])
    with pytest.raises(ValueError, match="timer expected"):
        figures.stopwatch_schedule("perf_counter")


def test_stopwatch_figure_draws_without_overlapping_labels():
    fig = figures.stopwatches()
    try:
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)
