"""course_utils.timing: the one stopwatch, its statistics, and clear errors."""

import time

import pytest
import torch

from course_utils import env, timing


def test_statistics_of_known_samples():
    t = timing.Timing(name="x", times_ms=(1.0, 2.0, 3.0, 10.0), device="cpu")
    assert (t.median, t.mean, t.min, t.max, t.n) == (2.5, 4.0, 1.0, 10.0, 4)
    assert t.stdev == pytest.approx(4.0825, rel=1e-4)
    assert timing.Timing("y", (5.0,), "cpu").stdev == 0.0
    text = repr(t)
    assert text.startswith("x: median 2.5 ms") and "n=4" in text and "cpu" in text
    assert t.as_dict()["median_ms"] == 2.5


def test_benchmark_measures_what_the_function_takes():
    def sleepy():
        time.sleep(0.002)

    t = timing.benchmark(sleepy, reps=5, warmup=1, device="cpu")
    assert t.n == 5 and t.name.endswith("sleepy") and t.device == "cpu"
    assert 2.0 <= t.min <= t.median <= t.max
    assert t.median < 100  # a 2 ms sleep, even on a busy CI machine


def test_benchmark_warms_up_before_timing():
    calls = []
    timing.benchmark(lambda: calls.append(1), warmup=4, reps=6, device="cpu")
    assert len(calls) == 10


def test_a_setup_makes_each_calls_arguments_and_is_not_timed():
    """benchmark(setup=...): before every call (warm-up too) the setup runs and hands the call
    its arguments; its own time is left out; a setup that is not callable or that raises says
    so."""
    made, got = [], []

    def setup():
        time.sleep(0.05)  # far longer than the call: left out of every timing
        made.append(len(made))
        return (made[-1],)

    t = timing.benchmark(got.append, warmup=2, reps=5, device="cpu", setup=setup)
    assert got == made == list(range(7)) and t.n == 5
    assert t.max < 40  # ms: the 50 ms setup is not in it, even on a busy machine
    with pytest.raises(TypeError, match="setup=...\\) expected a callable"):
        timing.benchmark(got.append, setup=(1,), device="cpu")

    def broken():
        raise KeyError("no graph")

    with pytest.raises(RuntimeError, match="setup raised KeyError during warm-up"):
        timing.benchmark(got.append, setup=broken, device="cpu")


def test_benchmark_picks_enough_reps_by_default():
    x = torch.ones(8)
    t = timing.benchmark(torch.neg, x, min_time_s=0.01)
    assert 5 <= t.n <= 1000
    assert t.device == x.device.type


def test_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match=r"benchmark\(fn=...\) expected a callable, got int"):
        timing.benchmark(42)
    with pytest.raises(TypeError, match="callable"):
        timing.sweep("not a function", [1, 2])


def test_function_that_raises_is_named_with_the_original_error():
    def broken(x):
        raise ZeroDivisionError("no dividing here")

    with pytest.raises(RuntimeError, match=r"broken raised ZeroDivisionError during warm-up: "
                                           r"no dividing here") as err:
        timing.benchmark(broken, torch.ones(1))
    assert isinstance(err.value.__cause__, ZeroDivisionError)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="reps"):
        timing.benchmark(torch.neg, torch.ones(1), reps=0)
    with pytest.raises(ValueError, match="expected 'cpu' or 'cuda', got 'tpu'"):
        timing.benchmark(torch.neg, torch.ones(1), device="tpu")
    if not env.HAS_CUDA:
        with pytest.raises(ValueError, match="no CUDA GPU"):
            timing.benchmark(torch.neg, torch.ones(1), device="cuda")


def test_sweep_runs_each_parameter_in_order():
    results = timing.sweep(lambda n: n * n, [1, 2, 3], desc="squares")
    assert results == [1, 4, 9]
    timings = timing.sweep(lambda n: timing.benchmark(torch.zeros, n, reps=3, device="cpu"),
                           [16, 32])
    assert [t.n for t in timings] == [3, 3]


def test_throughput_helpers():
    assert timing.matmul_flop(2, 3, 4) == 48
    assert timing.tflops(2e12, 1000.0) == pytest.approx(2.0)
    assert timing.gbps(3e9, 1000.0) == pytest.approx(3.0)
    assert timing.gbps(1e6, 1.0) == pytest.approx(1.0)  # 1 MB in 1 ms
    x = torch.ones(10, dtype=torch.float16)
    assert timing.tensor_bytes(x, x.float()) == 20 + 40
    assert timing.geomean([1, 100]) == pytest.approx(10.0)


def test_format_ms_picks_a_readable_unit():
    assert timing.format_ms(0.0005) == "500 ns"
    assert timing.format_ms(0.0123) == "12.3 µs"
    assert timing.format_ms(12.34) == "12.3 ms"
    assert timing.format_ms(2500) == "2.5 s"


def test_copy_bandwidth_is_positive():
    assert timing.copy_bandwidth(nbytes=1 << 20) > 0


def test_sweep_without_tqdm_still_shows_progress(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)  # importing tqdm now raises ImportError
    assert timing.sweep(lambda n: -n, [1, 2], desc="bare box") == [-1, -2]
    assert "bare box: 2/2" in capsys.readouterr().err


def test_verdict_says_what_was_expected_measured_and_why_it_may_differ():
    line = timing.verdict("A > 2x B", "A = 3.0x B", True, "a busy machine")
    assert line == "expected A > 2x B; measured A = 3.0x B: as expected"
    line = timing.verdict("A > 2x B", "A = 1.1x B", False, "a busy machine")
    assert line.endswith("NOT here; it may differ because a busy machine")
    with pytest.raises(ValueError, match="verdict: why expected a non-empty str, got ''"):
        timing.verdict("A", "B", True, "")


def test_one_call_times_each_call_on_its_own_and_refuses_bad_input():
    calls = []
    t = timing.one_call(lambda: calls.append(1), reps=7, warmup=2, device="cpu")
    assert t.n == 7 and len(calls) == 9 and t.device == "cpu"
    with pytest.raises(ValueError, match="reps >= 1"):
        timing.one_call(lambda: None, reps=0, device="cpu")
    with pytest.raises(TypeError, match="expected a callable, got int"):
        timing.one_call(3)


def test_graph_helpers_check_their_arguments_before_touching_a_gpu():
    """(any machine) Bad arguments are a TypeError or a ValueError naming the argument; on a
    machine without CUDA, good ones are a ValueError saying a CUDA graph needs a GPU."""
    for helper in (timing.graph_replay_ms, timing.capture_graph):
        who = helper.__name__
        with pytest.raises(TypeError, match=rf"{who}\(fn=...\) expected a callable, got int"):
            helper(3)
        with pytest.raises(ValueError, match=rf"{who}\(calls=...\) expected an int >= 1"):
            helper(lambda: None, calls=0)
        with pytest.raises(ValueError, match=rf"{who}\(warmup=...\) expected an int >= 0"):
            helper(lambda: None, warmup=-1)
        with pytest.raises(ValueError, match=r"expected an int >= 1, got 2.5"):
            helper(lambda: None, calls=2.5)
    with pytest.raises(ValueError, match=r"ms\(reps=...\) expected an int >= 1, got 0"):
        timing.graph_replay_ms(lambda: None, reps=0)
    with pytest.raises(TypeError, match=r"graph_replay_ms\(ready=...\) expected a callable"):
        timing.graph_replay_ms(lambda: None, ready="barrier")
    if not env.HAS_CUDA:
        for helper in (timing.graph_replay_ms, timing.capture_graph):
            with pytest.raises(ValueError, match=f"{helper.__name__} needs a CUDA GPU, as a "
                                                 "CUDA graph records GPU work: no CUDA GPU"):
                helper(lambda: None)


@pytest.mark.gpu
def test_a_small_kernel_replayed_from_a_graph_is_timed_per_call():
    """One warm-up call runs eagerly, the capture runs nothing, and every replay (2 untimed, 5
    timed) does the 4 captured calls: the tensor counts them. The time is the GPU's per call."""
    x = torch.zeros(1 << 20, device="cuda")
    ready = []
    ms = timing.graph_replay_ms(lambda: x.add_(1), calls=4, reps=5, warmup=2,
                                ready=lambda: ready.append(x.clone()))
    torch.cuda.synchronize()
    assert 0 < ms < 100
    assert ready[0].eq(1).all()  # ready() ran after the capture, before any replay
    assert x.eq(1 + 4 * (2 + 5)).all()
    replay = timing.capture_graph(lambda: x.mul_(2))
    replay()
    torch.cuda.synchronize()
    assert x.eq((1 + 28) * 4).all()  # the eager warm-up doubled it, the replay once more


@pytest.mark.gpu
def test_a_call_that_cannot_be_captured_is_a_graph_capture_error():
    """A call that refuses capture (as a host sync would, here in Python so that the CUDA
    context stays clean) is a GraphCaptureError naming the phase; its warm-up ran, the GPU
    carries on."""
    x = torch.ones(4, device="cuda")

    def refuses():
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("operation not permitted when stream is capturing")
        x.add_(1)

    with pytest.raises(timing.GraphCaptureError, match="refuses raised RuntimeError during "
                                                       "capture: operation not permitted"):
        timing.graph_replay_ms(refuses, name="refuses")
    assert isinstance(timing.GraphCaptureError("x"), RuntimeError)
    assert (x + 1).sum().item() == 12  # the warm-up's call ran once: 2 + 1 each
