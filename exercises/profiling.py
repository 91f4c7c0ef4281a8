"""Exercises of lesson 01: benchmarking and profiling."""

from __future__ import annotations

import random
import time
from unittest import mock

import torch

from course_utils import env
from exercises import Mismatch, exercise, expect

# --------------------------------------------------------------------------------------------
SYNC_STUB = '''
import time

import torch


def time_ms(fn, *args, reps=20):
    """Milliseconds per call of fn(*args) on a GPU. It has a bug (maybe two): fix it."""
    fn(*args)                                   # warm-up: the first call pays for set-up
    start = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    return (time.perf_counter() - start) * 1e3 / reps
'''


class _FakeGPU:
    """A stand-in for a GPU stream: a 'launch' returns at once and queues work; synchronize()
    waits until the queued work is done (here: sleeps for it). It lets the CPU check what a
    timer does with asynchronous work. Its set-up and per-call times are drawn at random for
    each check, so only a timer that measures can match them, never a number typed in."""

    def __init__(self, setup_s: float, call_s: float):
        self.SETUP_S, self.CALL_S = setup_s, call_s
        self.queued = 0.0
        self.calls = 0

    def launch(self, *args) -> None:
        self.queued += self.SETUP_S if self.calls == 0 else self.CALL_S
        self.calls += 1

    def synchronize(self, device=None) -> None:
        time.sleep(self.queued)
        self.queued = 0.0


def _random_gpus() -> list[_FakeGPU]:
    """Two simulated GPUs, a fast and a slow one (2-4 ms and 10.5-14 ms per call, 40-80 ms of
    set-up). The check accepts 0.5x-1.25x of the true time, so no single number passes both:
    1.25 x 4 < 0.5 x 10.5."""
    rng = random.Random()  # fresh each run, seeded by the OS
    return [_FakeGPU(rng.uniform(0.040, 0.080), rng.uniform(lo, hi))
            for lo, hi in ((0.002, 0.004), (0.0105, 0.014))]


@exercise("profiling.sync", title="Fix a benchmark that forgets to synchronise", stub=SYNC_STUB,
          answers=("time_ms",), intro="""
`time_ms` below times a GPU function with a wall clock. Its numbers look great and are wrong:
a launch returns as soon as the kernel is *queued*. Fix it so that it returns the time the GPU
spends per call (keep `time.perf_counter`; use `torch.cuda.synchronize()`; do not call
`timing.benchmark`, the point is to see what it does for you).

The check runs your timer on two simulated GPUs whose calls return at once and whose
`torch.cuda.synchronize()` waits for the queued work (tens of milliseconds of set-up on the
first call, then a few milliseconds per call, different each run), so it works on a laptop
too; on a real GPU it also times a matmul against `timing.benchmark`.""")
def check_sync(time_ms, report) -> None:
    gpus = _random_gpus()
    got = [_time_on(gpu, time_ms) for gpu in gpus]
    fast, slow = (gpu.CALL_S * 1e3 for gpu in gpus)
    expect(abs(got[1] - got[0]) > 0.25 * (slow - fast),
           f"your timer says {got[0]:.2f} and {got[1]:.2f} ms per call on two simulated GPUs "
           f"whose calls take {fast:.2f} and {slow:.2f} ms: it does not follow the work",
           "time the calls with the clock and the GPU's synchronisation; do not return a "
           "number you measured once")
    for gpu, ms in zip(gpus, got, strict=True):
        _judge(gpu, ms)
        report.line(f"simulated GPU: {ms:.2f} ms per call for {gpu.CALL_S * 1e3:.2f} ms of work")
    _time_real_gpu(time_ms, report)


def _time_on(gpu: _FakeGPU, time_ms) -> float:
    with mock.patch.object(torch.cuda, "synchronize", gpu.synchronize), \
            mock.patch.object(torch.cuda, "is_available", lambda: True):
        got = time_ms(gpu.launch, reps=20)
    expect(isinstance(got, int | float), f"time_ms returned {type(got).__name__} {got!r}, "
           "expected the milliseconds per call (a float)")
    return got


def _judge(gpu: _FakeGPU, got: float) -> None:
    true_ms = gpu.CALL_S * 1e3
    hint_end = ("the loop only queued the work; call torch.cuda.synchronize() after it, "
                "before reading the clock")
    if got < 0.5 * true_ms:
        raise Mismatch(f"your timer says {got:.3f} ms per call for work that takes "
                       f"{true_ms:.2f} ms on the (simulated) GPU: the clock stopped while the "
                       "work was still queued", hint_end)
    if got > 1.25 * true_ms:
        raise Mismatch(f"your timer says {got:.2f} ms per call for work that takes "
                       f"{true_ms:.2f} ms: it also counted work queued before the clock "
                       f"started (the warm-up's {gpu.SETUP_S * 1e3:.0f} ms of set-up)",
                       "synchronise after the warm-up too, so the queue is empty when the "
                       "clock starts")


def _time_real_gpu(time_ms, report) -> None:
    if env.HAS_CUDA:
        from course_utils import timing

        a = torch.randn(4096, 4096, device="cuda")
        yours = time_ms(torch.mm, a, a)
        ref = timing.benchmark(torch.mm, a, a).median
        verdict = "agrees with" if abs(yours / ref - 1) < 0.2 else "differs from"
        report.line(f"real GPU, 4096² matmul: {yours:.3f} ms by your timer, {ref:.3f} ms by "
                    f"timing.benchmark (median): {verdict} it within 20%")


# --------------------------------------------------------------------------------------------
DOMINANT_STUB = '''
# workload(x, w) = torch.softmax(x @ w, dim=-1) * 2.0, with x and w of 1024 x 1024 float32
# (4096 x 4096 on a GPU). Predict before you profile:
DOMINANT = ...  # which takes most of the time: "matmul", "softmax" or "multiply"
KERNELS = ...   # how many kernels one call launches (on a CPU: ATen ops with a kernel)
'''


def workload(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x @ w, dim=-1) * 2.0


def _kind(kernel: str) -> str:
    name = kernel.lower()
    if "softmax" in name:
        return "softmax"
    if any(k in name for k in ("gemm", "aten::mm", "matmul", "nvjet", "cutlass", "addmm")):
        return "matmul"
    if "mul" in name:
        return "multiply"
    return name


@exercise("profiling.dominant", title="Predict from the napkin which kernel dominates",
          stub=DOMINANT_STUB, answers=("DOMINANT", "KERNELS"), intro="""
Before profiling, predict. A matmul of two $n \\times n$ matrices does $2n^3$ FLOP on $3n^2$
elements; softmax and the multiply touch each of the $n^2$ elements a few times. Which kernel
takes most of the time, and how many kernels does one call launch? The check profiles the
workload here with `profiling.profile` and compares.""")
def check_dominant(dominant, kernels, report) -> None:
    from course_utils import profiling

    choices = ("matmul", "softmax", "multiply")
    expect(dominant in choices, f"DOMINANT = {dominant!r}; expected one of {choices}")
    # 2048 on a CPU: at 1024 the matmul took as little as 38% of a profiled call on a busy
    # 2-core machine (first-touch costs of the other two), too close to call; at 2048 it does
    # 8x the FLOPs for 4x the bytes
    n = 4096 if env.HAS_CUDA else 2048
    x, w = (torch.randn(n, n, device=env.DEFAULT_DEVICE) for _ in range(2))
    prof = profiling.profile(workload, x, w, name="exercise_01_dominant", show=False)
    total = prof.kernel_time_ms or 1.0
    shares = [(_kind(k), ms / total) for k, _, ms in prof.top_kernels(5)]
    table = ", ".join(f"{kind} {share:.0%}" for kind, share in shares)
    report.line(f"the profile on {prof.device}: {table}; {prof.launches:g} launches per call")
    expect(shares[0][0] == dominant,
           f"you predicted {dominant}; the profile says {shares[0][0]} "
           f"({shares[0][1]:.0%} of the time)",
           f"count: the matmul does 2·{n}³ = {2 * n**3 / 1e9:.0f} GFLOP, the softmax and the "
           f"multiply move about {8 * n * n / 1e6:.0f} MB each; which takes longer?")
    expect(isinstance(kernels, int) and kernels == prof.launches,
           f"you predicted {kernels!r} kernels; the profile counted {prof.launches:g}",
           "one kernel per operation that touches the data: the matmul, the softmax, the "
           "multiply")


# --------------------------------------------------------------------------------------------
TFLOPS_STUB = '''
def matmul_tflops(m, n, k, ms):
    """Achieved TFLOP/s of an (m x k) @ (k x n) matmul that took `ms` milliseconds."""
    ...
'''


@exercise("profiling.tflops", title="Throughput of a matmul", stub=TFLOPS_STUB,
          answers=("matmul_tflops",), intro="""
Quote a result as a rate, so that it can be compared with a ceiling. Write `matmul_tflops`: the
FLOP count of the matmul divided by the time, in TFLOP/s (1e12 FLOP per second). On a GPU the
check also uses it on a measured matmul and compares with the datasheet peak.""")
def check_tflops(matmul_tflops, report) -> None:
    import random

    shapes = [(1, 1, 1, 1e-3), (3, 5, 7, 2.0), (4096, 4096, 4096, 0.25), (8192, 1, 127, 0.01)]
    shapes += [(random.randint(1, 5000), random.randint(1, 5000), random.randint(1, 5000),
                random.uniform(0.01, 10)) for _ in range(4)]
    for m, n, k, ms in shapes:
        want = 2 * m * n * k / (ms * 1e-3) / 1e12
        got = matmul_tflops(m, n, k, ms)
        expect(isinstance(got, int | float),
               f"matmul_tflops({m}, {n}, {k}, {ms}) returned {got!r}; expected a number")
        if abs(got - want) > 1e-6 * want:
            ratio = got / want
            hint = ("a multiply-add is two FLOP: 2·m·n·k" if abs(ratio - 0.5) < 1e-3 else
                    "ms is milliseconds: divide by ms·1e-3 seconds, then by 1e12"
                    if min(abs(ratio - r) for r in (1e3, 1e-3, 1e6, 1e-6)) < 1e-3 * ratio else
                    "FLOP = 2·m·n·k (each of the m·n outputs is k multiply-adds)")
            raise Mismatch(f"matmul_tflops({m}, {n}, {k}, {ms}) returned {got:.6g}, expected "
                           f"{want:.6g} ({ratio:.3g}x)", hint)
    report.line(f"right on {len(shapes)} shapes, odd ones included")
    if env.HAS_CUDA:
        from course_utils import timing

        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        ms = timing.benchmark(torch.mm, a, a).median
        rate = matmul_tflops(8192, 8192, 8192, ms)
        peak = env.device_info().peak_tflops(torch.bfloat16)
        report.line(f"8192³ bf16 here: {rate:,.0f} TFLOP/s"
                    + (f" = {rate / peak:.0%} of the {peak:,.0f} TFLOP/s datasheet peak"
                       if peak else ""))
