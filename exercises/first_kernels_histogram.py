"""Exercise first_kernels.histogram of lesson 04: atomics, privatised in shared memory (a block
counts into its own histogram, then adds it to the global one once). Compiled and its SASS read
on any machine, then run on awkward sizes (input surrounded by poison, counts fenced): on a GPU
in a child process, under compute-sanitizer, and timed; without one on this CPU
(:mod:`course_utils.cuda_on_cpu`). The 2-D grid exercise of the lesson, first_kernels.flip_rows,
is :mod:`exercises.first_kernels`.
"""

from __future__ import annotations

import json

import torch

from course_utils import env
from exercises import Mismatch, exercise, kernel_checks
from exercises.sass_checks import Need

HIST_THREADS = 256
HIST_MAX_BLOCKS = 64  # a grid-stride loop: few blocks, each flushing its histogram once
HIST_MAX_BINS = 1024
# global atomics: REDG when the old value is not used, ATOMG when it is (RED/ATOM: older forms)
GLOBAL_ATOMICS = ("REDG", "ATOMG", "RED", "ATOM")
HIST_KINDS = {"STS": "S", "ATOMS": "A", "LDS": "L", **dict.fromkeys(GLOBAL_ATOMICS, "G")}
# (n, bins, values): every remainder of a block, one element, none, one bin, the largest
# histogram, values outside [0, bins) (ignored), skewed values (contention), more elements than
# the capped grid has threads (the grid-stride loop)
HIST_CASES = ((0, 8, "uniform"), (1, 5, "uniform"), (255, 7, "uniform"), (257, 1, "uniform"),
              (1000, 1024, "uniform"), (4099, 37, "outside"), (100_003, 256, "skewed"),
              (70_001, 1000, "uniform"))
# under compute-sanitizer (exact allocations); the full 1024 bins with values equal to bins:
# counting v <= bins writes local[1024], one int past the shared array
HIST_SMALL = ((4099, 300, "outside"), (4099, HIST_MAX_BINS, "outside"))
HIST_BENCH = (1 << 26, 256)
HIST_POISON = 0  # around x: a read outside it that is used lands in bin 0
HIST_FENCE = -12345  # around counts: nothing may write there
# the child's limit: its eight cases take seconds, and a kernel that never ends (a grid-stride
# loop whose step went to 0) should say so in a minute, not in run_child's five
HIST_CHILD_TIMEOUT = 60
HIST_HINT = ("zero the block's bins, __syncthreads(), count each element in range into the "
             "shared histogram with atomicAdd, __syncthreads(), then each thread adds bins "
             "threadIdx.x, threadIdx.x + blockDim.x, ... to counts")


def hist_blocks(n: int) -> int:
    """The launch of the statement: ``max(1, min(ceil(n / 256), 64))`` blocks of 256."""
    return max(1, min(-(-n // HIST_THREADS), HIST_MAX_BLOCKS))


def hist_values(n: int, bins: int, kind: str, device: str) -> torch.Tensor:
    from kernels.histogram import skewed, uniform

    if kind == "outside":  # a third of them outside [0, bins)
        x = torch.randint(-bins // 2 - 1, bins + bins // 2 + 1, (n,), device=device,
                          dtype=torch.int32)
        # and some at +-2^30: without the range test, local[v] is 4 * 2^30 bytes away, which a
        # 32-bit shared-memory address wraps onto local[0] (the values near bins only land in
        # the unflushed rest of local, and compute-sanitizer did not flag them on an H100)
        x[::97] = 1 << 30
        x[1::89] = -(1 << 30)
        # and every boundary, whatever the draw: -1, 0, bins - 1 and bins itself (which a
        # "v <= bins" counts into local[bins], one past the shared array at the full 1024)
        for start, value in enumerate((-1, 0, bins - 1, bins)):
            x[2 + start::53] = value
        return x
    return (skewed if kind == "skewed" else uniform)(n, bins, device)


def hist_reference(x: torch.Tensor, bins: int) -> torch.Tensor:
    from kernels.registry import reference

    return reference("histogram")(x, bins)


def histogram_order(sass: str) -> str | None:
    """What is wrong with the order of the privatised histogram's steps in ``sass`` (None:
    nothing seen): the shared bins zeroed (STS), a barrier, the counting (ATOMS), a barrier,
    then the flush (LDS, one global atomic per bin) outside the counting loop."""
    from exercises import sass_checks

    events, loops = sass_checks.events(sass, HIST_KINDS)
    kinds = [kind for _, kind in events]
    first_a, last_a = kinds.index("A"), len(kinds) - 1 - kinds[::-1].index("A")
    before = kinds[:first_a]
    if "S" not in before:
        return ("the shared histogram is never zeroed before the counting starts (no store "
                "into shared memory, STS, before the first ATOMS): it starts from whatever the "
                "last block left there")
    last_s = len(before) - 1 - before[::-1].index("S")
    if "B" not in before[last_s:]:
        return ("the counting (ATOMS) follows the zeroing of the bins (STS) with no barrier "
                "(BAR.SYNC) between: a fast thread counts into a bin another thread has not "
                "zeroed yet, and the zero then erases its count")
    after = kinds[last_a + 1:]
    if "G" not in after:
        return ("no global atomic after the counting: the block's histogram never reaches "
                "counts")
    first_read = min(after.index(k) for k in ("L", "G") if k in after)
    if "B" not in after[:first_read]:
        return ("the block's histogram is read (LDS, then the global atomics) right after the "
                "counting with no barrier (BAR.SYNC) between: a thread flushes a bin while "
                "other threads still count into it")
    for start, end in loops:
        body = {kind for addr, kind in events if start <= addr <= end}
        if {"A", "G"} <= body:
            return ("a global atomic sits inside the counting loop: one global atomic per "
                    "element, as without the shared histogram")
    return None


def _check_histogram_sass(source: str) -> tuple[str, object]:
    """The CPU part: compiles, shared atomics, global atomics only in the flush, barriers."""
    from exercises import sass_checks

    found = sass_checks.sass_report(kernel_checks.compile_answer(
        source, "histogram_shared", "HISTOGRAM_SOURCE", hint=kernel_checks.WHOLE))
    held = sass_checks.expect_opcodes(found, (
        Need(("LDG",), "the SASS has no global load (LDG): your kernel never reads x",
             "every element of x is counted: load it"),
        Need(("ATOMS",), "the SASS has no shared-memory atomic (ATOMS): the elements are not "
             "counted into a histogram in shared memory", "__shared__ int local[MAX_BINS]; "
             "... atomicAdd(&local[v], 1)"),
        Need(GLOBAL_ATOMICS, "the SASS has no global atomic (REDG/ATOMG): the blocks' "
             "histograms are never added into counts (a plain store would let blocks "
             "overwrite each other)", "atomicAdd(&counts[b], local[b])")))
    if wrong := histogram_order(found.sass):
        raise Mismatch(wrong, HIST_HINT)
    sass_checks.expect_no_spills(found, "your kernel")
    return held, found


HISTOGRAM_STUB = r'''
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    // counts[v] += the number of elements of x equal to v, for v in [0, bins); other values
    // are ignored; counts is zeroed before the launch. Blocks of 256 threads, at most 64
    // blocks: walk x with a grid-stride loop. Count into a histogram in shared memory with
    // atomicAdd, then add each of its bins to counts: one global atomicAdd per bin per block.
}
"""
'''


@exercise("first_kernels.histogram", title="A histogram privatised in shared memory",
          stub=HISTOGRAM_STUB, answers=("HISTOGRAM_SOURCE",), section="4 · Atomics",
          intro=f"""
Write `histogram_shared` for `bins` up to {HIST_MAX_BINS}: each block zeroes its own
`__shared__ int local[MAX_BINS]` (threads take bins `threadIdx.x`, `threadIdx.x + blockDim.x`,
...), waits, counts its elements into it with `atomicAdd` (a grid-stride loop: the launch has
`max(1, min(ceil(n / {HIST_THREADS}), {HIST_MAX_BLOCKS}))` blocks of {HIST_THREADS} threads, fewer
threads than elements), waits again, then adds each bin to `counts` with one global `atomicAdd`
(skipping the empty ones saves atomics). Values outside `[0, bins)` are ignored.

The check compiles it with NVRTC (any machine) and reads the SASS: shared-memory atomics
(`ATOMS`), global atomics only after the counting and outside its loop, the bins zeroed (`STS`)
and a barrier (`BAR.SYNC`) after the zeroing and after the counting. On a GPU it runs it in a
child process against `torch.bincount` on n = 0, 1, 255, 257, ... (one bin, 1024 bins, values out
of range, skewed values, more elements than threads; `x` inside a buffer of zeros, `counts`
fenced on both sides), under compute-sanitizer's memcheck and racecheck, and times it against
the course's kernels (`kernels/histogram`) on uniform and skewed values.

Without a GPU the same cases run on this CPU (`course_utils.cuda_on_cpu`): every thread of every
block, in three orders, each load and store checked against the tensors' bounds and alignment,
races in shared and global memory reported; only the speed needs a GPU.""")
def check_histogram(source, report) -> None:
    kernel_checks.expect_source(source, "HISTOGRAM_SOURCE", kernel="histogram_shared")
    held, found = _check_histogram_sass(source)
    verified = (f"compiles for sm_90 (NVRTC); its SASS holds {held}: shared-memory atomics, "
                "the bins zeroed and a barrier before and after the counting, global atomics "
                f"only in the flush; {found.resources.registers} registers, no local memory")
    cases = ", ".join(f"{n} ({bins} bins{', ' + kind if kind != 'uniform' else ''})"
                      for n, bins, kind in HIST_CASES)
    if not env.HAS_CUDA:
        kernel_checks.decide_on_cpu(
            "first_kernels.histogram", source, report, [verified], "the counts against "
            "torch.bincount, compute-sanitizer (memcheck, racecheck) and the speed need a GPU",
            HIST_HINT, f"matches torch.bincount on n = {cases} (x inside zeros, nothing written "
            "outside counts, shared memory starting as garbage)")
        report.line(kernel_checks.NOT_TIMED)
        return
    report.line(verified)
    ran = kernel_checks.run_child("first_kernels.histogram", source, timeout=HIST_CHILD_TIMEOUT)
    kernel_checks.expect_child_ok(ran, HIST_HINT,
                                  "an index outside local or counts: check 0 <= v < bins "
                                  "before counting and b < bins in the zeroing and the flush")
    report.line(f"matches torch.bincount on n = {cases} (in a child process; x inside zeros, "
                "nothing written outside counts)")
    for line in kernel_checks.sanitize("first_kernels.histogram", source,
                                       ("memcheck", "racecheck")):
        report.line(line)
    _time_histogram(source, report)


def _time_histogram(source: str, report) -> None:
    from course_utils import nvrtc, timing
    from kernels.histogram import nvrtc as course

    kernel = nvrtc.kernel(source, "histogram_shared", verbose=False)  # it ran clean
    n, bins = HIST_BENCH
    said = []
    for kind in ("uniform", "skewed"):
        x = hist_values(n, bins, kind, "cuda")
        counts = torch.zeros(bins, device="cuda", dtype=torch.int32)
        yours = timing.benchmark(lambda x=x, c=counts: kernel(x, c, n, bins, grid=hist_blocks(n),
                                                              block=HIST_THREADS),
                                 name="yours").median
        theirs = {v: timing.benchmark(f, x, bins, name=v).median for v, f in
                  (("global", course.histogram_global), ("shared", course.histogram_shared))}
        said.append(f"{kind}: yours {timing.format_ms(yours)}, the course's shared "
                    f"{timing.format_ms(theirs['shared'])}, global atomics only "
                    f"{timing.format_ms(theirs['global'])}")
    report.line(f"time on {n:,} values, {bins} bins: " + "; ".join(said))


# Shared memory is not cleared between kernels: blocks of this one leave 7 in every word a block
# may declare statically (48 KiB), so the next kernel's bins start from it unless it zeroes them
# (after a fresh context they often read 0, and a kernel that zeroes too few bins would pass)
DIRTY_SHARED = r"""
extern "C" __global__ void dirty_shared() {
    __shared__ int words[12288];
    volatile int* v = words;  // volatile: stores no one reads must still happen
    for (int i = threadIdx.x; i < 12288; i += blockDim.x) v[i] = 7;
}
"""


def histogram_child(source: str, small: bool) -> dict:
    """The GPU child of first_kernels.histogram (run by :func:`exercises.kernel_checks.run_child`;
    ``small``: exact allocations, for compute-sanitizer)."""
    kernel, device = kernel_checks.load(source, "histogram_shared"), kernel_checks.device()
    if device == "cuda":
        dirty = kernel_checks.load(DIRTY_SHARED, "dirty_shared")
        sms = torch.cuda.get_device_properties(0).multi_processor_count
    else:  # the CPU runner fills each block's shared memory with garbage itself
        dirty, sms = None, 0
    pad = 1024
    # (on a CPU every access is checked against exact bounds as it runs, so the sanitizer's
    # cases join the others)
    cases = HIST_SMALL if small else HIST_CASES + (HIST_SMALL if device == "cpu" else ())
    for n, bins, kind in cases:
        label = f"n={n}, {bins} bins, {kind} values"
        print(json.dumps({"case": label}), flush=True)  # the parent names it if we crash
        made = hist_values(n, bins, kind, device)
        if small:
            x, counts = made, torch.zeros(bins, device=device, dtype=torch.int32)
            outside = lambda: None  # noqa: E731  (memcheck sees it)
        else:
            x = torch.full((n + 2 * pad,), HIST_POISON, device=device, dtype=torch.int32)
            x = x[pad:pad + n]
            x.copy_(made)
            fence = torch.full((bins + 2 * pad,), HIST_FENCE, device=device, dtype=torch.int32)
            counts = fence[pad:pad + bins]
            counts.zero_()

            def outside(fence=fence, bins=bins) -> str | None:
                spilled = torch.nonzero(torch.cat([fence[:pad], fence[pad + bins:]])
                                        != HIST_FENCE)
                if len(spilled):
                    at = int(spilled[0])
                    return (f"counts[{at - pad}]" if at < pad else f"counts[{bins + at - pad}]") \
                        + f" (counts has {bins} bins)"
                return None

        if dirty and not small:
            dirty(grid=8 * sms, block=256)
        kernel(x, counts, n, bins, grid=hist_blocks(n), block=HIST_THREADS)
        kernel_checks.synchronize()
        if where := outside():
            return {"mismatch": f"{label}: your kernel wrote outside counts, at {where}",
                    "hint": "only bins 0 .. bins - 1 exist: check b < bins in the flush"}
        if not torch.equal(x, made):
            return {"mismatch": f"{label}: your kernel changed x", "hint": "only read x"}
        want = hist_reference(made, bins)
        if not torch.equal(counts, want):
            bad = torch.nonzero(counts != want)
            b = int(bad[0])
            return {"mismatch": f"{label}: {len(bad)} of {bins} bins differ; first bin {b}: "
                                f"got {int(counts[b])}, expected {int(want[b])} "
                                f"(total counted {int(counts.sum())}, expected "
                                f"{int(want.sum())})", "hint": HIST_HINT}
    return {"ok": True}
