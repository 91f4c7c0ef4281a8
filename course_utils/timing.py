"""The course's one timing helper.

GPU work is asynchronous: a kernel launch returns to Python long before the kernel finishes, so
timing it with a wall clock measures the launch, not the work. :func:`benchmark` therefore

1. warms up (the first calls pay for compilation, autotuning, cache misses, allocator growth),
2. on a GPU, times each call with CUDA events recorded on the stream around it and synchronises
   before reading them; on the CPU, uses ``time.perf_counter``,
3. repeats until it has enough samples and reports the median (robust to the odd slow run)
   together with the spread, so you can see the variance instead of trusting one number.

:func:`one_call` times a call as the caller's own timer sees it (the host's work included), and
:func:`graph_replay_ms` the GPU's work alone, the calls replayed from a CUDA graph
(:func:`capture_graph`).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from course_utils import env, requirements


@dataclass(frozen=True)
class Timing:
    """Per-call times of one benchmarked function, in milliseconds."""

    name: str
    times_ms: tuple[float, ...]
    device: str

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times_ms)

    @property
    def min(self) -> float:
        return min(self.times_ms)

    @property
    def max(self) -> float:
        return max(self.times_ms)

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.times_ms) if len(self.times_ms) > 1 else 0.0

    @property
    def n(self) -> int:
        return len(self.times_ms)

    def as_dict(self) -> dict[str, float | int | str]:
        return {"name": self.name, "device": self.device, "median_ms": self.median,
                "mean_ms": self.mean, "min_ms": self.min, "max_ms": self.max,
                "stdev_ms": self.stdev, "n": self.n}

    def __repr__(self) -> str:
        return (f"{self.name}: median {format_ms(self.median)} "
                f"(mean {format_ms(self.mean)} ± {format_ms(self.stdev)}, "
                f"min {format_ms(self.min)}, max {format_ms(self.max)}, "
                f"n={self.n}, {self.device})")


def format_ms(ms: float) -> str:
    """A duration with a unit that keeps three significant digits readable."""
    if ms < 1e-3:
        return f"{ms * 1e6:.0f} ns"
    if ms < 1:
        return f"{ms * 1e3:.1f} µs"
    if ms < 1e3:
        return f"{ms:.3g} ms"
    return f"{ms / 1e3:.3g} s"


def _describe(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _pick_device(device: str | torch.device | None, args: Iterable[object]) -> str:
    if device is not None:
        try:
            kind = torch.device(device).type
        except (RuntimeError, TypeError):
            kind = None
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"benchmark(device=...) expected 'cpu' or 'cuda', got {device!r}")
        if kind == "cuda" and not env.HAS_CUDA:
            raise ValueError("benchmark(device='cuda') but this machine has no CUDA GPU")
        return kind
    for arg in args:
        if isinstance(arg, torch.Tensor):
            return arg.device.type
    return env.DEFAULT_DEVICE


def _call(fn: Callable, args: Sequence, kwargs: dict, name: str, phase: str,
          who: str = "benchmark"):
    """Call ``fn``; if it raises, say which function failed, when, and why."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:
        raise RuntimeError(
            f"{who}: {name} raised {type(err).__name__} during {phase}: {err}") from err


def benchmark(fn: Callable, *args, name: str | None = None, warmup: int = 3,
              reps: int | None = None, min_time_s: float = 0.2, max_reps: int = 1000,
              device: str | None = None, setup: Callable[[], tuple] | None = None,
              **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``; returns a :class:`Timing` (median, mean, min, max, stdev).

    ``reps`` fixes the number of timed calls; by default it is chosen so that timing takes about
    ``min_time_s`` (at least 5 and at most ``max_reps`` calls). ``device`` is inferred from the
    first tensor argument, else the default device; pass it when ``fn`` takes no tensors.
    ``setup``, when given, runs before every call, untimed, and returns the arguments of that
    call in place of ``args``: what a call uses up, made fresh each time (a forward's autograd
    graph, for timing its backward alone; on a GPU the setup's kernels run before the call's
    first event).
    """
    if not callable(fn):
        raise TypeError(f"benchmark(fn=...) expected a callable, got {type(fn).__name__}: "
                        f"{fn!r:.60}")
    if warmup < 0 or (reps is not None and reps < 1):
        raise ValueError(f"benchmark expected warmup >= 0 and reps >= 1, got warmup={warmup}, "
                         f"reps={reps}")
    if setup is not None and not callable(setup):
        raise TypeError(f"benchmark(setup=...) expected a callable returning fn's arguments, "
                        f"got {type(setup).__name__}")
    name = name or _describe(fn)
    kind = _pick_device(device, [*args, *kwargs.values()])
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)

    def arguments(phase: str) -> Sequence:
        return args if setup is None else _call(setup, (), {}, f"{name}'s setup", phase)

    # warm-up, and a first estimate of the cost of one call
    start = time.perf_counter()
    for i in range(max(warmup, 1)):
        phase = "warm-up" if i < warmup else "the first call"
        _call(fn, arguments(phase), kwargs, name, phase)
    sync()
    per_call = (time.perf_counter() - start) / max(warmup, 1)
    if reps is None:
        reps = int(min(max_reps, max(5, min_time_s / max(per_call, 1e-7))))

    times: list[float] = []
    if kind == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
        for begin, end in events:
            call_args = arguments("timing")
            begin.record()
            _call(fn, call_args, kwargs, name, "timing")
            end.record()
        torch.cuda.synchronize()
        times = [begin.elapsed_time(end) for begin, end in events]
    else:
        for _ in range(reps):
            call_args = arguments("timing")
            t0 = time.perf_counter()
            _call(fn, call_args, kwargs, name, "timing")
            times.append((time.perf_counter() - t0) * 1e3)
    return Timing(name=name, times_ms=tuple(times), device=kind)


def one_call(fn: Callable, *args, name: str | None = None, warmup: int = 3, reps: int = 20,
             device: str | None = None, **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)`` as a caller's own timer sees one call: the GPU idle, two
    CUDA events around one call, then a sync; ``reps`` such calls. Unlike :func:`benchmark`,
    whose back-to-back calls let the host queue the next launch while the GPU works, this
    includes whatever the host does before the kernel starts (checks, allocation, the launch
    itself): the number a student gets when timing one call of a kernel. On the CPU it is
    :func:`benchmark` with ``reps`` calls."""
    if not callable(fn):
        raise TypeError(f"one_call(fn=...) expected a callable, got {type(fn).__name__}")
    if warmup < 0 or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"one_call expected warmup >= 0 and reps >= 1, got warmup={warmup}, "
                         f"reps={reps!r}")
    name = name or _describe(fn)
    kind = _pick_device(device, [*args, *kwargs.values()])
    if kind != "cuda":
        return benchmark(fn, *args, name=name, warmup=warmup, reps=reps, device=kind, **kwargs)
    for _ in range(warmup):
        _call(fn, args, kwargs, name, "warm-up", "one_call")
    times = []
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        torch.cuda.synchronize()
        begin.record()
        _call(fn, args, kwargs, name, "timing", "one_call")
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return Timing(name=name, times_ms=tuple(times), device=kind)


class GraphCaptureError(RuntimeError):
    """``fn`` could not be run on a side stream or captured in a CUDA graph (a host sync, an
    ``.item()``, a library call that refuses capture); the original error is the cause."""


def capture_graph(fn: Callable[[], object], *, calls: int = 1, warmup: int = 1,
                  name: str | None = None) -> Callable[[], None]:
    """``calls`` back-to-back calls of ``fn()`` captured once in one CUDA graph; returns the
    graph's ``replay``, which submits all of them with one host call.

    As PyTorch's guide asks, ``fn`` first runs ``warmup`` times on a side stream (compiles,
    per-problem plans, the allocator's blocks: nothing new may happen during capture), and the
    capture is made on that stream. A replay does the captured work on the captured addresses:
    the same inputs are read and the same outputs overwritten every time, and a new shape needs a
    new capture. Raises :class:`GraphCaptureError` where ``fn`` fails to warm up or to be
    captured (the device is synchronised first, so the caller can carry on without a graph), and
    ValueError without a CUDA GPU.
    """
    _check_graph_args("capture_graph", fn, calls=calls, warmup=warmup)
    name = name or _describe(fn)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    phase = "the warm-up on a side stream"
    try:
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
            phase = "capture"
            with torch.cuda.graph(graph, stream=side):
                for _ in range(calls):
                    fn()
    except Exception as err:  # noqa: BLE001  (whatever refuses capture: the caller decides)
        torch.cuda.synchronize()
        raise GraphCaptureError(f"capture_graph: {name} raised {type(err).__name__} during "
                                f"{phase}: {err}") from err
    torch.cuda.current_stream().wait_stream(side)
    return graph.replay


def graph_replay_ms(fn: Callable[[], object], *, calls: int = 1, reps: int = 10,
                    warmup: int = 2, ready: Callable[[], object] | None = None,
                    name: str | None = None) -> float:
    """Median GPU time (ms) of one call of ``fn()`` when replayed from a CUDA graph.

    ``calls`` calls of ``fn`` are captured once in one graph (:func:`capture_graph`); then
    ``ready()`` runs, if given (a barrier, so that every rank of a collective starts timing
    together); then the graph is replayed ``warmup`` times untimed and ``reps`` times between
    CUDA events (:func:`benchmark`), and the median replay is divided by ``calls``.

    What it measures: the GPU's time for the captured kernels, back to back as the graph submits
    them. What it leaves out: the host. No Python, argument checks, allocation or launch call of
    ``fn`` is in it (a replay is one host call for all of them); time the eager call with
    :func:`benchmark` for that, and the replay's own host cost with a wall clock around
    ``capture_graph(fn)()`` calls. A CUDA graph needs a CUDA GPU: on a CPU this raises
    ValueError; where ``fn`` cannot be captured, :class:`GraphCaptureError`.
    """
    if ready is not None and not callable(ready):
        raise TypeError(f"graph_replay_ms(ready=...) expected a callable or None, got "
                        f"{type(ready).__name__}")
    _check_graph_args("graph_replay_ms", fn, calls=calls, warmup=warmup, reps=reps)
    name = name or _describe(fn)
    replay = capture_graph(fn, calls=calls, name=name)
    if ready is not None:
        ready()
    return benchmark(replay, warmup=warmup, reps=reps, device="cuda",
                     name=f"{name} (graph of {calls})").median / calls


def _check_graph_args(who: str, fn: object, **counts: int) -> None:
    """The arguments of the graph helpers, checked before anything touches a GPU."""
    if not callable(fn):
        raise TypeError(f"{who}(fn=...) expected a callable, got {type(fn).__name__}: "
                        f"{fn!r:.60}")
    for arg, value in counts.items():
        least = 0 if arg == "warmup" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{who}({arg}=...) expected an int >= {least}, got {value!r}")
    if not env.HAS_CUDA:
        why = "; ".join(requirements.unmet("cuda")) or "env.HAS_CUDA is False"
        raise ValueError(f"{who} needs a CUDA GPU, as a CUDA graph records GPU work: {why}")


def sweep(fn: Callable, params: Iterable, desc: str = "sweep", **bench_kwargs) -> list:
    """Run ``fn(param)`` for each parameter, with a progress bar; collect the results.

    ``fn`` usually builds inputs for one size and returns :func:`benchmark` of the kernel on
    them, or a dict of numbers for a table row.
    """
    if not callable(fn):
        raise TypeError(f"sweep(fn=...) expected a callable, got {type(fn).__name__}")
    params = list(params)
    results = []
    for param in progress(params, desc):
        results.append(fn(param, **bench_kwargs) if bench_kwargs else fn(param))
    return results


def progress(items: list, desc: str):
    """Iterate ``items`` with a progress bar: tqdm's (a widget in Jupyter when ipywidgets is
    installed, text otherwise), or a plain counter on stderr where tqdm is missing (a bare GPU
    box)."""
    try:
        try:
            import ipywidgets  # noqa: F401
            from tqdm.auto import tqdm
        except ImportError:
            from tqdm import tqdm
    except ImportError:
        def counter():
            for i, item in enumerate(items):
                print(f"\r{desc}: {i}/{len(items)}", end="", file=sys.stderr, flush=True)
                yield item
            print(f"\r{desc}: {len(items)}/{len(items)}", file=sys.stderr, flush=True)

        return counter()
    return tqdm(items, desc=desc, leave=False)


def tflops(flop: float, ms: float) -> float:
    """Achieved TFLOP/s for ``flop`` floating-point operations done in ``ms`` milliseconds."""
    return flop / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    """Achieved GB/s (1e9 bytes per second) for ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


def matmul_flop(m: int, n: int, k: int) -> int:
    """FLOPs of an (m×k)·(k×n) matmul: one multiply and one add per inner-product term."""
    return 2 * m * n * k


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """Bytes the tensors occupy: what a memory-bound kernel must read or write at least."""
    return sum(t.numel() * t.element_size() for t in tensors)


def copy_bandwidth(nbytes: int = 1 << 28, device: str | None = None,
                   min_time_s: float = 0.2) -> float:
    """Measured device copy bandwidth in GB/s (read + write), the ceiling of elementwise kernels."""
    kind = _pick_device(device, [])
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=kind)
    dst = torch.empty_like(src)
    t = benchmark(dst.copy_, src, name="copy", device=kind, min_time_s=min_time_s)
    return gbps(2 * nbytes, t.median)


def geomean(values: Iterable[float]) -> float:
    values = list(values)
    return math.exp(statistics.fmean(math.log(v) for v in values))


def verdict(expected: str, measured: str, holds: bool, why: str) -> str:
    """One line about a claim on measured numbers, for a notebook to print instead of asserting.

    A timing is a measurement, not a test: on a busy laptop or a shared CI machine a claim that
    holds on a quiet GPU can miss, and a notebook must still run to the end. The line says what
    was expected, what was measured and, when it does not hold here, why it may differ.
    """
    for arg, value in (("expected", expected), ("measured", measured), ("why", why)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"verdict: {arg} expected a non-empty str, got {value!r}")
    outcome = "as expected" if holds else f"NOT here; it may differ because {why}"
    return f"expected {expected}; measured {measured}: {outcome}"
