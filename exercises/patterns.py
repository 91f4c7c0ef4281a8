"""Exercises of lesson 21, the canonical parallel patterns: patterns.block_scan, the block scan
the student writes whole (warp shuffles, then across warps in shared memory).

Described by a :class:`~exercises.spec_checks.Spec` and checked by
:func:`~exercises.spec_checks.check_spec`: compiled by NVRTC and its SASS read on any machine
(a global load, shuffles, a barrier, no spills); then its problems
(:mod:`exercises.patterns_scan_cases`) run on this CPU in three orders of threads, every access
checked (:mod:`course_utils.cuda_on_cpu`); on a GPU in a child process, under
compute-sanitizer's memcheck and racecheck, then on the CPU runner as well (what a GPU forgives,
a lane that exited before a shuffle, the runner does not), and timed against the copy bandwidth.
"""

from __future__ import annotations

import contextlib
import io
import json

from course_utils import env
from exercises import Mismatch, exercise, spec_checks
from exercises import patterns_scan_cases as scan_cases
from exercises.kernel_checks import CPU_RAN, device, load
from exercises.sass_checks import Need
from exercises.spec_checks import Spec

BLOCK_SCAN_SPEC = Spec(
    id="patterns.block_scan", kernel="block_scan", answer="BLOCK_SCAN_SOURCE",
    sass=(Need(("LDG",), "the SASS has no global load (LDG): your kernel never reads x",
               "every y[i] depends on x: load x[i] (or a 0 past n)"),
          Need(("SHFL",), "the SASS has no shuffle (SHFL): the warps do not scan with "
               "__shfl_up_sync", "for (int offset = 1; offset < 32; offset *= 2) { float below "
               "= __shfl_up_sync(0xffffffff, v, offset); if (lane >= offset) v += below; }"),
          Need(("BAR",), "the SASS has no barrier (BAR): the warps' totals in shared memory are "
               "read with no __syncthreads() after they were stored (a race)",
               "lane 31 stores its warp's total, then __syncthreads(), then every thread reads "
               "the totals")),
    make=lambda shape, where: scan_cases.integers(shape[0]).to(where),
    out_shape=lambda x: tuple(x.shape), launch=scan_cases.launch, reference=scan_cases.reference,
    shapes=tuple((n,) for n in scan_cases.SIZES), bench_shape=(1 << 26,),
    nbytes=lambda x: 2 * x.numel() * 4, sanitize=("memcheck", "racecheck"),
    hint="y[i] = x[256 b] + ... + x[i] for i in block b's tile; a thread past n scans a 0 and "
         "stores nothing")


def block_scan_child(source: str, small: bool) -> dict:
    """The run of patterns.block_scan's problems, on a GPU in a child process
    (:func:`exercises.kernel_checks.run_child`) or on this CPU in three orders of threads."""
    where = device()
    kernel = load(source, "block_scan")
    found = scan_cases.run_cases(kernel, where,
                                 orders=(None,) if where == "cuda" else scan_cases.ORDERS,
                                 small=small)
    if where == "cpu" and "ok" in found:
        wide = scan_cases.run_wide(kernel)
        return found if "unsupported" in wide else wide
    return found


BLOCK_SCAN_STUB = r'''
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    // Block b (256 threads, 8 warps) owns the tile x[256 b] ... x[256 b + 255]; the last tile
    // may be shorter (n need not be a multiple of 256). For i in the tile:
    //     y[i] = x[256 b] + x[256 b + 1] + ... + x[i]    (inclusive, float32)
    // One element per thread, thread t of block b on element i = 256 b + t.
    // 1. scan each warp's 32 values with __shfl_up_sync (5 steps: offsets 1, 2, 4, 8, 16)
    // 2. lane 31 puts its warp's total in shared memory; wait until all 8 are there
    // 3. add the totals of the warps before yours, and store y[i] (only where i < n)
}
"""
'''


@exercise("patterns.block_scan", title="A block scan: warp shuffles, then shared memory",
          stub=BLOCK_SCAN_STUB, answers=("BLOCK_SCAN_SOURCE",), section="2 · A block scan",
          intro="""
Write `block_scan`, the scan of one tile per block: block `b` of 256 threads owns
`x[256 b] ... x[256 b + 255]` (the last tile may be shorter) and writes, for each `i` of its
tile, `y[i] = x[256 b] + ... + x[i]`: an **inclusive** scan, in float32, each tile starting
from 0 (the carry across tiles is the next section's). It is launched with `ceil(n / 256)`
blocks (one when `n` is 0) of 256 threads, thread `t` of block `b` on element `256 b + t`.
Scan each warp with `__shfl_up_sync` (after 5 steps lane `l` holds the sum of lanes `0..l`),
then let lane 31 put its warp's total in `__shared__` memory, wait with `__syncthreads()`, and
add the totals of the warps before yours. Every lane of a warp must reach the shuffles: a
thread past `n` scans a 0 and stores nothing.

The check compiles it with NVRTC (any machine) and reads the SASS for shuffles (`SHFL`), a
barrier (`BAR`) and no spills (the races a missing barrier leaves, the runs below catch); then runs
it on sizes 1, 31, 32, 33, 255, 256, 257, several tiles with a ragged tail and 0, on integers
(exact in any order: compared bit for bit), on negative ones, on floats of twelve orders of
magnitude and on small values after a large one (within what any order of float32 additions
allows), `x` inside NaN and `y` fenced, and on this CPU the last two blocks of n = 2³² + 300
(x and y reserved, not allocated, where the CPU can reserve the address space):
on this CPU every thread of every block in three orders with every access checked; on a GPU in
a child process, under compute-sanitizer's memcheck and racecheck, on the CPU runner too (a GPU
forgives a lane that left before a shuffle; the runner does not), and timed.""")
def check_block_scan(source, report) -> None:
    spec_checks.check_spec(BLOCK_SCAN_SPEC, source, report)
    if env.HAS_CUDA:
        _on_the_cpu_runner_too(source, report)


def _on_the_cpu_runner_too(source: str, report) -> None:
    """On a GPU, the same problems on the CPU runner as well: a GPU forgives what the runner
    does not (a lane that has exited before a shuffle its mask names works on an H100, and is
    undefined behaviour all the same)."""
    from course_utils import cuda_on_cpu

    if reason := cuda_on_cpu.unavailable_reason():
        report.line(f"the CPU runner's stricter checks skipped: {reason}")
        return
    progress = io.StringIO()  # the cases' progress lines, for naming the case of a fault
    try:
        with contextlib.redirect_stdout(progress):
            found = scan_cases.run_cases(cuda_on_cpu.kernel(source, "block_scan"), "cpu")
    except cuda_on_cpu.KernelFault as fault:
        case = json.loads(progress.getvalue().splitlines()[-1])["case"]
        raise Mismatch(f"on the CPU runner, {case}: {fault}", BLOCK_SCAN_SPEC.hint) from None
    if "mismatch" in found:
        raise Mismatch(f"on the CPU runner: {found['mismatch']}", found.get("hint", ""))
    report.line(f"the same problems on the CPU runner too ({CPU_RAN})")


__all__ = ["BLOCK_SCAN_SPEC", "block_scan_child", "check_block_scan"]
