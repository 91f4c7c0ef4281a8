"""Exercise first_kernels.flip_rows of lesson 04, the first CUDA kernels: a 2-D grid, a whole
kernel described by a :class:`~exercises.spec_checks.Spec` (the privatised histogram,
first_kernels.histogram, is :mod:`exercises.first_kernels_histogram`). It is compiled and its
SASS read on any machine, then run on awkward sizes (input surrounded by poison, output fenced):
on a GPU in a child process, under compute-sanitizer, and timed; without one on this CPU
(:mod:`course_utils.cuda_on_cpu`).
"""

from __future__ import annotations

import json

import torch

from course_utils import env
from exercises import (
    Mismatch,
    access_checks,
    exercise,
    expect,
    kernel_checks,
    sentinels,
    spec_checks,
)
from exercises.sass_checks import Need
from exercises.spec_checks import Spec

# --------------------------------------------------------------------------------------------
# first_kernels.flip_rows: a 2-D grid
# --------------------------------------------------------------------------------------------

FLIP_BLOCK = (32, 8)


def _cdiv(n: int, d: int) -> int:
    return max(1, -(-n // d))  # at least one block: an empty problem must still do nothing


def _launch_flip(kernel, x, y):
    rows, cols = x.shape
    kernel(x, y, rows, cols, grid=(_cdiv(cols, FLIP_BLOCK[0]), _cdiv(rows, FLIP_BLOCK[1])),
           block=FLIP_BLOCK)


def _flip_access(launches: list[dict]) -> list[str]:
    """Coalesced loads and stores per launch of :data:`FLIP_PROFILED` (Nsight Compute)."""
    said = []
    for (rows, cols), launch in zip(FLIP_PROFILED, launches, strict=False):
        ld, st = (access_checks.per_use(launch, op, rows * cols * 4) for op in ("ld", "st"))
        if None in (ld, st):
            return [f"{access_checks.UNMEASURED}coalescing (a counter missing)"]
        for ratio, what in ((ld, "reading x"), (st, "writing y")):
            expect(ratio <= 1.25, f"{rows}x{cols}: {what} moves {ratio:.1f} sectors per sector "
                   "of data (Nsight Compute; 1 when coalesced): the 32 threads of a warp do not "
                   "touch 32 neighbouring floats", "threadIdx.x is the fast axis: it must run "
                   "along a row (the column index c), threadIdx.y down the rows")
        said.append(f"{rows}x{cols}: {ld:.2f} / {st:.2f} sectors per sector read / written")
    if len(said) != len(FLIP_PROFILED):
        return [f"{access_checks.UNMEASURED}coalescing (Nsight Compute gave {len(launches)} "
                f"launches, expected {len(FLIP_PROFILED)})"]
    return [f"coalesced loads and stores (Nsight Compute): {'; '.join(said)}"]


FLIP_PROFILED = ((256, 512),)
FLIP_SPEC = Spec(
    id="first_kernels.flip_rows", kernel="flip_rows", answer="FLIP_SOURCE",
    sass=(Need(("LDG",), "the SASS has no global load (LDG): your kernel never reads x",
               "y[r][c] = x[rows - 1 - r][c]: load it"),
          Need(("STG",), "the SASS has no global store (STG): your kernel never writes y",
               "store y[r * cols + c]")),
    make=lambda shape, device: torch.randn(*shape, device=device),
    out_shape=lambda x: tuple(x.shape), launch=_launch_flip,
    reference=lambda x: x.flip(0).contiguous(),
    shapes=((1, 1), (3, 33), (33, 3), (0, 5), (5, 0), (8, 64), (1000, 7), (7, 1000),
            (257, 129), (37, 45)),
    bench_shape=(8192, 8192), nbytes=lambda x: 2 * x.numel() * 4,
    profile_shapes=FLIP_PROFILED, measures="coalesced loads and stores", access=_flip_access,
    hint="y[r][c] = x[rows - 1 - r][c], element (r, c) of a row-major matrix at r * cols + c; "
         "a thread outside the matrix (r >= rows or c >= cols) must not load or store")


# Offsets past 2^31 elements. The statement asks for r and c in 64 bits: in a matrix of more than
# 2^31 elements (8 GiB of float32) r * cols + c passes 2^31, where a 32-bit int wraps around to a
# negative offset. The awkward shapes are all small, so on this CPU one more problem runs: a
# matrix of 2^31 + 2^18 elements whose x and y are reserved, not allocated (mmap with
# MAP_NORESERVE: only the pages the kernel touches are ever committed, a few hundred KiB), and of
# whose grid only the four corner blocks run (the CPU runner's blocks=). The first block row
# reads x's last rows (the source offset passes 2^31), the last block row writes y's last rows
# (the destination offset does); an offset that wrapped lands before x or y, 8 GiB apart so that
# it cannot land in the other one, and the runner's bounds check names the thread and the line.
# (On a GPU the child runs the awkward shapes only: 17 GiB of memory is more than a student's GPU
# may have.)
WIDE_FLIP = (262144, 8193)  # rows x cols: its last 32 rows start at element 2^31 or later
WIDE_HINT = ("compute c and r in long long (blockIdx.y * (long long)blockDim.y + threadIdx.y), and "
             "the offsets r * cols + c from them: past 2^31 elements (an 8 GiB float32 matrix) an "
             "int offset wraps around to a negative one")


def _flip_past_2_31(source: str) -> dict:
    """:data:`WIDE_FLIP` on this CPU, its four corner blocks only: the child's verdict."""
    from course_utils import cuda_on_cpu
    from exercises import compare

    rows, cols = WIDE_FLIP
    label = (f"{rows}x{cols} (2^31 + {rows * cols - 2**31} elements, x and y reserved, not "
             "allocated; its four corner blocks run)")
    print(json.dumps({"case": label}), flush=True)
    try:
        x, y = (t.view(rows, cols) for t in cuda_on_cpu.reserved(rows * cols))
    except OSError as err:
        return {"unsupported": f"this CPU cannot reserve 25 GiB of address space for offsets "
                               f"past 2^31 elements ({err})"}
    edge = FLIP_BLOCK[1]  # one block row
    ends = (slice(0, edge), slice(rows - edge, rows))
    for part in ends:  # the only pages committed: the rows the corner blocks read and write
        x[part] = torch.randn(edge, cols)
        y[part] = sentinels.FENCE
    grid = (_cdiv(cols, FLIP_BLOCK[0]), _cdiv(rows, FLIP_BLOCK[1]))
    corners = [(bx, by) for by in (0, grid[1] - 1) for bx in (0, grid[0] - 1)]
    try:
        kernel_checks.load(source, "flip_rows")(x, y, rows, cols, grid=grid, block=FLIP_BLOCK,
                                                blocks=corners)
    except cuda_on_cpu.KernelFault as fault:
        return {"mismatch": f"{label}: {fault}", "fault": fault.kind, "hint": WIDE_HINT}
    # what the corner blocks cover: their rows, columns 0-31 and those of the last column block
    covered = torch.cat([torch.arange(FLIP_BLOCK[0]), torch.arange((grid[0] - 1) * FLIP_BLOCK[0],
                                                                   cols)])
    for part, other in zip(ends, reversed(ends), strict=True):
        want = torch.full((edge, cols), sentinels.FENCE)
        want[:, covered] = x[other].flip(0)[:, covered]
        try:
            compare(y[part], want, what=f"{label}, rows {part.start}-{part.stop - 1} of y "
                    f"(columns 0-31 and {covered[FLIP_BLOCK[0]]}-{cols - 1} written, the others "
                    "left alone)")
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": WIDE_HINT}
    return {"ok": True}


WIDE_RAN = (f"offsets past 2^31 elements right: {WIDE_FLIP[0]}x{WIDE_FLIP[1]}, its first and last "
            "rows (on this CPU: x and y reserved, not allocated, and the grid's four corner blocks "
            "run, every load and store checked against the tensors' bounds)")


def flip_child(source: str, small: bool) -> dict:
    """The GPU child of first_kernels.flip_rows (run by
    :func:`exercises.kernel_checks.run_child`); on this CPU, the problem past 2^31 elements
    after the awkward shapes (:func:`_flip_past_2_31`)."""
    verdict = spec_checks.spec_child(FLIP_SPEC, source, small)
    if verdict.get("ok") and kernel_checks.device() == "cpu":
        return _flip_past_2_31(source)
    return verdict


def flip_profile(source: str):
    """The call Nsight Compute profiles for first_kernels.flip_rows (:data:`FLIP_PROFILED`)."""
    return spec_checks.spec_profile(FLIP_SPEC, source)


FLIP_STUB = r'''
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    // y[r][c] = x[rows - 1 - r][c] for row-major (rows x cols) matrices: the rows upside down.
    // Blocks of (32, 8) threads; threadIdx.x along a row (c), threadIdx.y down the rows (r).
}
"""
'''


@exercise("first_kernels.flip_rows", title="Turn a matrix upside down with a 2-D grid",
          stub=FLIP_STUB, answers=("FLIP_SOURCE",), section="2 · A 2-D grid", intro="""
Write `flip_rows`: `y[r][c] = x[rows - 1 - r][c]` for float32 matrices of `rows x cols`,
row-major (element `(r, c)` at `r * cols + c`). It is launched as `add_2d` is: blocks of
(32, 8) threads, a grid of (ceil(cols / 32), ceil(rows / 8)) blocks (at least one each way).
Compute `c` from the x coordinates and `r` from the y coordinates (threadIdx.x along a row:
coalesced), in 64-bit (`long long`), and guard both: the last blocks of each axis have threads
outside the matrix.

The check compiles it with NVRTC (any machine) and reads the SASS: a 2-D grid (`SR_TID.Y`,
`SR_CTAID.Y`), a load and a store, no local memory. On a GPU it runs it in a child process on
awkward shapes (1 x 1, 3 x 33, 33 x 3, no rows, no columns, ...; `x` inside NaN, `y` fenced on
both sides) against `x.flip(0)`, under compute-sanitizer's memcheck, reads Nsight Compute's
counters for coalesced loads and stores, and measures it against the copy bandwidth.

Without a GPU the same cases run on this CPU (`course_utils.cuda_on_cpu`): every thread of every
block, in three orders, each load and store checked against the tensors' bounds and alignment,
races in shared and global memory reported, and the sectors counted as Nsight Compute counts
them; only the speed needs a GPU.""")
def check_flip(source, report) -> None:
    kernel_checks.expect_source(source, "FLIP_SOURCE", kernel="flip_rows")
    from exercises import sass_checks

    found = sass_checks.sass_report(kernel_checks.compile_answer(
        source, "flip_rows", "FLIP_SOURCE", hint=kernel_checks.WHOLE))
    for register, what in (("SR_TID.Y", "threadIdx.y"), ("SR_CTAID.Y", "blockIdx.y")):
        expect(register in found.sass, f"the SASS never reads {register} ({what}): your kernel "
               "does not use the grid's second dimension, so with the 2-D launch most rows are "
               "never visited", "r = blockIdx.y * blockDim.y + threadIdx.y")
    spec_checks.check_spec(FLIP_SPEC, source, report)
    if not env.HAS_CUDA:  # (it passed: the CPU child ran the problem past 2^31 elements too)
        report.line(WIDE_RAN)
