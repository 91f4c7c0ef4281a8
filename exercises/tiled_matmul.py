"""Exercise nvrtc.tiled_matmul, lesson 06's assignment: a whole fp32 matmul in CUDA from an empty
kernel, tiled through shared memory, each thread computing 16 outputs held in registers.

The check, on every machine: NVRTC compiles the kernel for sm_90 and its SASS is read (tiles
stored into and loaded from shared memory, barriers both ways around them inside the K loop, no
local memory). Where g++ is (any Linux laptop) the kernel then runs on the CPU
(:mod:`course_utils.cuda_on_cpu`: every thread of every block, in three orders, each load and
store checked against A, B, C and the shared tiles, races between barriers reported) on the
problems of :mod:`exercises.tiled_matmul_problems` against float64, and what it counted on the
one-tile problem is judged (:mod:`exercises.tiled_matmul_counters`: coalesced loads, the tiles'
reuse, register blocking). On a GPU the same problems run through NVRTC in a child process (a
faulting kernel cannot take the notebook down), and one line prints its TFLOP/s at 4096^3 beside
the course's fp32 kernels and cuBLAS fp32 (a ratio, never an assertion).
``exercises/solutions/tiled_matmul.py`` keeps the solution and the wrong answers.
"""

from __future__ import annotations

import re

import torch

from course_utils import env
from exercises import Mismatch, exercise, kernel_checks, sass_checks
from exercises.sass_checks import Need
from exercises.tiled_matmul_counters import judge, register_blocking
from exercises.tiled_matmul_problems import (
    COUNTED,
    PROBLEMS,
    WIDE_PROBLEMS,
    launch,
    run_problem,
    run_wide,
    say,
)

ID = "nvrtc.tiled_matmul"
SECTION = "9 · At home: a tiled matmul"
SPEED_SIZE = 4096
# lesson 07's fp32 steps beside which the speed line puts yours: the same design (64 x 64 tiles,
# 4 x 4 outputs a thread), and its next step (8 x 8)
COURSE_STEPS = ("7_smem_4x4", "8_smem_8x8")
NEEDS = (
    Need(("STS",), "the SASS has no shared-memory store (STS): no tile of A or B is staged in "
         "shared memory, so every thread reads its operands from global memory",
         "per step of K, copy a 64 x BK tile of A and a BK x 64 tile of B into __shared__ "
         "arrays"),
    Need(("LDS",), "the SASS has no shared-memory load (LDS): the tiles are stored but the "
         "multiply never reads them", "multiply from the __shared__ tiles"),
    Need(("BAR",), "the SASS has no barrier (BAR): without __syncthreads() a thread reads a "
         "tile element before its neighbour has stored it", "__syncthreads() after filling the "
         "tiles, and again after multiplying (before the next step overwrites them)"),
)
BARRIER_HINT = ("two __syncthreads() per step of K: one after the tiles are filled (before any "
                "thread reads them), one after the multiply (before the next step overwrites "
                "them)")
FAULT_HINTS = {
    "outside": "a thread whose row (>= M), column (>= N) or k (>= K) lies outside the matrix "
               "must put 0 into the tile instead of loading, and must not store; a __shared__ "
               "array must hold the whole tile; offsets past 2^31 elements need 64 bits "
               "((long long)r * N + c)",
    "race": BARRIER_HINT,
    # run_on_cpu builds with the runner's bounds=True: an index past an array's end traps
    "crash": "an index past the end of one of your arrays (a thread's acc, a or b, or a "
             "__shared__ tile): on this CPU every index into an array of known size is "
             "checked, and this one ran past the end; check each loop's bound against the size "
             "of the array it indexes",
}
# a race between two stores of one line: two threads put different elements into one word
SAME_STORE = re.compile(r"stores it at line (\d+) .*stores it at line \1 ")
SAME_STORE_HINT = ("two threads of the block store into one word of a tile in the same step: "
                   "a __shared__ array smaller than the tile, or two elements mapped onto one "
                   "place; each __shared__ array must hold the whole tile (64 x BK of A, BK x 64 "
                   "of B), each element stored by one thread")
HINT = ("C[r][c] = sum over k of A[r][k] * B[k][c], row-major: A[r][k] at r * K + k, B[k][c] at "
        "k * N + c, C[r][c] at r * N + c; block (bx, by) owns rows 64 by .. 64 by + 63 and "
        "columns 64 bx .. 64 bx + 63")

MATMUL_STUB = r'''
MATMUL_SOURCE = r"""
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    // C (M x N) = A (M x K) @ B (K x N), float32, row-major (A[r][k] at A[r * K + k]).
    // 256 threads a block; block (blockIdx.x, blockIdx.y) computes the 64 x 64 tile of C at
    // rows 64 * blockIdx.y ..., columns 64 * blockIdx.x ...: 16 outputs a thread, in registers.
    // Per step of K: stage a 64 x BK tile of A and a BK x 64 tile of B in shared memory
    // (coalesced loads, 0 outside the matrices), __syncthreads(), multiply, __syncthreads().
}
"""
'''


@exercise(ID, title="A tiled matmul in CUDA, from an empty kernel", stub=MATMUL_STUB,
          answers=("MATMUL_SOURCE",), section=SECTION, intro="""
Write `matmul`: `C = A @ B` for float32 matrices, row-major and contiguous, `A` of `M x K`,
`B` of `K x N`, `C` of `M x N` (`M, N, K >= 0`, passed as `int`).

- **The launch is fixed**: 256 threads a block (`threadIdx.x` from 0 to 255), a grid of
  `(ceil(N / 64), ceil(M / 64))` blocks (at least one each way). Block `(bx, by)` computes the
  64 x 64 tile of C at rows `64·by ... 64·by + 63`, columns `64·bx ... 64·bx + 63`; outputs
  past row `M - 1` or column `N - 1` do not exist.
- **Tiles through shared memory**: the block walks K in steps of `BK` (your choice: 8, 16 or
  32 are common). Per step it copies a `64 x BK` tile of A and a `BK x 64` tile of B into
  `__shared__` arrays (static ones: the launch passes no dynamic shared memory), each element
  loaded by one thread with **coalesced** loads (consecutive threads on consecutive elements
  of a row), 0 where the tile passes the edge of A or B
  (`K` need not be a multiple of `BK`), then `__syncthreads()`, the multiply, and
  `__syncthreads()` again before the next step overwrites the tiles.
- **Register blocking**: each thread computes 16 outputs of the tile (4 x 4, or any 16 you
  choose), summed in registers (`float acc[4][4]`, starting at 0) and stored once at the end.
  Per k it loads its 4 values of A and 4 of B from the tiles into registers and does 16
  multiply-adds with them: a shared-memory load then feeds 2 FMAs instead of half of one.
- **Offsets in 64 bits**: A, B or C may have more than 2^31 elements, so compute `r * N + c`,
  `r * K + k` and `k * N + c` in `long long`.

The check compiles your kernel with NVRTC and reads its SASS (shared-memory stores and loads,
barriers both ways around them, no local memory, shared-memory floats per FFMA). Then, on any
machine with g++, it runs it on this CPU (every thread in three orders, each load and store
checked against A, B, C and your tiles, races between barriers reported) against float64: M and
N of 1 and on both sides of 64 and 128, K of 0, 1, 8, 9, 17, 24, 31, 33, 64, 65 and 513, M = 0,
N = 0, rows and columns scaled from 2^-40 to 2^40, +inf down the first column of A and of B,
a C and an A past 2^31 elements and a B past 2^32 (a few blocks run). On one tile it counts,
as Nsight Compute would, the sectors each global load moves, the floats loaded from global
memory per multiply-add and the floats stored into C (each output once). On a GPU the same
problems run there, and one line prints your TFLOP/s at 4096³ beside lesson 07's fp32
kernels and cuBLAS fp32.""")
def check_tiled_matmul(source, report) -> None:
    kernel_checks.expect_source(source, "MATMUL_SOURCE", kernel="matmul")
    found = sass_checks.sass_report(kernel_checks.compile_answer(
        source, "matmul", "MATMUL_SOURCE", hint=kernel_checks.WHOLE))
    held = sass_checks.expect_opcodes(found, NEEDS)
    if race := sass_checks.shared_memory_races(found.sass):
        raise Mismatch(race, BARRIER_HINT)
    sass_checks.expect_no_spills(found, "your kernel")
    verified = (f"compiles for sm_90 (NVRTC); its SASS holds {held}, "
                f"{found.resources.registers} registers a thread, no local memory, "
                + register_blocking(found))
    result = run_on_cpu(source)
    if "unsupported" in result and not env.HAS_CUDA:
        raise kernel_checks.cpu_verdict(ID, report, [verified], "running it on the problems "
                                        f"against float64 and the speed need a GPU; "
                                        f"{result['unsupported']}", recorded_last=True)
    report.line(verified)
    if "mismatch" in result:
        raise Mismatch(result["mismatch"], result.get("hint") or HINT)
    if "unsupported" in result:
        report.line(f"not run on this CPU ({result['unsupported']}): no bounds, race or "
                    "access counts, and no operand past 2^31 elements")
    else:
        report.line(f"right against float64 on {len(PROBLEMS) + len(WIDE_PROBLEMS)} problems, "
                    f"C and A past 2^31 elements included ({kernel_checks.CPU_RAN})")
        for line in result["lines"]:
            report.line(line)
    if not env.HAS_CUDA:
        report.line(kernel_checks.NOT_TIMED)
        return
    kernel_checks.expect_child_ok(kernel_checks.run_child(ID, source), HINT,
                                  "an access outside A, B or C: " + FAULT_HINTS["outside"])
    report.line(f"right against float64 on {torch.cuda.get_device_name()} too, "
                f"{len(PROBLEMS)} problems (in a child process)")
    report.line(speed_line(source))


def run_on_cpu(source: str) -> dict:
    """The problems on this CPU's runner, in this process (the runner stops a kernel that
    faults or never ends): {"ok": True, "lines": [...]}, {"mismatch", "hint"}, or
    {"unsupported": why}."""
    from course_utils import cuda_on_cpu

    if reason := cuda_on_cpu.unavailable_reason():
        return {"unsupported": reason}
    try:
        kernel = cuda_on_cpu.kernel(source, "matmul", bounds=True)
    except (cuda_on_cpu.Unsupported, cuda_on_cpu.CompileError) as err:
        return {"unsupported": f"this CPU cannot run it ({str(err).splitlines()[0]})"}
    problem = COUNTED
    try:  # (each launch runs its threads in the next of the runner's three orders)
        for problem in PROBLEMS:
            run_problem(kernel, problem, "cpu")
            if problem is COUNTED:
                counted = judge(kernel, kernel.launches[-1])
        for problem in WIDE_PROBLEMS:
            if why := run_wide(kernel, problem):
                return {"unsupported": why}
    except cuda_on_cpu.KernelFault as fault:
        hint = SAME_STORE_HINT if SAME_STORE.search(str(fault)) else FAULT_HINTS.get(fault.kind)
        return {"mismatch": f"{problem.label}: {fault}", "hint": hint}
    except Mismatch as wrong:
        return {"mismatch": wrong.message, "hint": wrong.hint}
    return {"ok": True, "lines": counted}


def tiled_matmul_child(source: str, small: bool) -> dict:
    """The GPU child (:func:`exercises.kernel_checks.run_child`): every problem through NVRTC
    (``small`` is not used: no compute-sanitizer run)."""
    kernel = kernel_checks.load(source, "matmul")
    for problem in PROBLEMS:
        say(problem.label)
        try:
            run_problem(kernel, problem, kernel_checks.device())
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": wrong.hint}
    return {"ok": True}


def speed_line(source: str) -> str:
    """Your kernel's TFLOP/s at 4096^3 beside the course's fp32 kernels and cuBLAS fp32 (TF32
    off), as ratios: one printed line, never an assertion."""
    from course_utils import nvrtc, timing
    from kernels.registry import get_kernels

    n = SPEED_SIZE
    a, b = (torch.randn(n, n, device="cuda") for _ in range(2))
    c = torch.empty(n, n, device="cuda")
    kernel = nvrtc.kernel(source, "matmul", verbose=False)  # it ran clean in the child
    runs = {"yours": lambda: launch(kernel, a, b, c, n, n, n)}
    try:
        for k in get_kernels("matmul", a, b, where=lambda k: k.provider == "steps"
                             and k.variant in COURSE_STEPS):
            runs[f"the course's {k.name}"] = lambda k=k: k(a, b)
    except Exception as err:  # the course's kernels are a comparison, never the verdict
        runs[f"the course's fp32 kernels did not run ({type(err).__name__})"] = None

    def cublas():
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 on the FMA pipes, as yours
        try:
            torch.mm(a, b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous

    runs["cuBLAS fp32 (torch.mm, TF32 off)"] = cublas
    rates = {}
    for name, run in runs.items():
        if run is None:
            rates[name] = None
            continue
        ms = timing.benchmark(run, device="cuda", min_time_s=0.1).median
        rates[name] = timing.tflops(timing.matmul_flop(n, n, n), ms)
    peak = rates["cuBLAS fp32 (torch.mm, TF32 off)"]
    said = [name if rate is None else f"{name} {rate:.1f} TFLOP/s ({rate / peak:.2f} of cuBLAS)"
            for name, rate in rates.items()]
    return f"speed at {n}³ on {torch.cuda.get_device_name()}: " + "; ".join(said)
