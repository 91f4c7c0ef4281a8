"""Exercises of lesson 05, the whole kernels the student writes: a coalesced transpose through
shared memory (cuda_gelu.transpose) and a warp-shuffle row sum (cuda_gelu.warp_sum). Each is
described by a :class:`~exercises.spec_checks.Spec` (its awkward shapes, launch, reference and the
property Nsight Compute measures) and checked by :func:`~exercises.spec_checks.check_spec`: compiled
and its SASS read anywhere; run in a GPU child (:func:`transpose_child`,
:func:`warp_sum_child`), under compute-sanitizer and Nsight Compute on a GPU.
"""

from __future__ import annotations

import re

import torch

from exercises import Mismatch, access_checks, exercise, expect, kernel_checks, spec_checks
from exercises.cuda_gelu import BLOCK
from exercises.sass_checks import Need
from exercises.spec_checks import Spec


def _cdiv(n: int, d: int) -> int:
    return max(1, -(-n // d))  # at least one block: an empty problem must still do nothing


def _launch_transpose(kernel, x, y):
    rows, cols = x.shape
    kernel(x, y, rows, cols, grid=(_cdiv(cols, TILE), _cdiv(rows, TILE)), block=(TILE, 8))


def _launch_warp_sum(kernel, x, y):
    rows, cols = x.shape
    kernel(x, y, rows, cols, grid=_cdiv(rows, BLOCK // 32), block=BLOCK)


def _randn(shape, device):
    return torch.randn(*shape, device=device)


def _transpose_access(launches: list[dict]) -> list[str]:
    """Coalesced global loads and stores, and no bank conflicts on the tile, per launch of
    :data:`TRANSPOSE_PROFILED` (Nsight Compute's counters)."""
    said = []
    for (rows, cols), launch in zip(TRANSPOSE_PROFILED, launches, strict=False):
        nbytes = rows * cols * 4
        ld, st = (access_checks.per_use(launch, op, nbytes) for op in ("ld", "st"))
        wave_ld, wave_st = (access_checks.wavefronts(launch, op) for op in ("ld", "st"))
        if None in (ld, st, wave_ld, wave_st):
            return [f"{access_checks.UNMEASURED}coalescing and bank conflicts (a counter "
                    "missing)"]
        where = f"{rows}x{cols}"
        expect(ld <= 1.25, f"{where}: reading x moves {ld:.1f} sectors per sector of data "
               "(Nsight Compute; 1 when coalesced): neighbouring threads do not read "
               "neighbouring addresses of x", "threadIdx.x along x's columns on the way in: "
               "x[(r0 + i) * cols + c0 + threadIdx.x]")
        expect(st <= 1.25, f"{where}: writing y moves {st:.1f} sectors per sector of data "
               "(Nsight Compute; 1 when coalesced): neighbouring threads write addresses "
               f"{rows * 4} bytes apart", "threadIdx.x along y's columns on the way out: "
               "y[(c0 + i) * rows + r0 + threadIdx.x] = tile[threadIdx.x][i]")
        for op, waves in (("load from", wave_ld), ("store into", wave_st)):
            expect(waves <= 1.5, f"{where}: each shared-memory {op} the tile takes "
                   f"{waves:.1f} wavefronts (Nsight Compute; 1 without bank conflicts): the "
                   "threads of a warp touch one bank many times", "pad the tile, __shared__ "
                   "float tile[32][33], so that a column of it lies across the 32 banks")
        said.append(f"{where}: {ld:.2f} / {st:.2f} sectors per sector of data read / written, "
                    f"{wave_ld:.2f} / {wave_st:.2f} wavefronts per shared load / store")
    if len(said) != len(TRANSPOSE_PROFILED):
        return [f"{access_checks.UNMEASURED}coalescing and bank conflicts (Nsight Compute gave "
                f"{len(launches)} launches, expected {len(TRANSPOSE_PROFILED)})"]
    return [f"coalesced, no bank conflicts (Nsight Compute): {'; '.join(said)}"]


def _warp_sum_access(launches: list[dict]) -> list[str]:
    """Coalesced loads of x per launch of :data:`WARP_SUM_PROFILED` (Nsight Compute)."""
    said = []
    for (rows, cols), launch in zip(WARP_SUM_PROFILED, launches, strict=False):
        ld = access_checks.per_use(launch, "ld", rows * cols * 4)
        if ld is None:
            return [f"{access_checks.UNMEASURED}coalescing (a counter missing)"]
        expect(ld <= 1.25, f"{rows}x{cols}: reading x moves {ld:.1f} sectors per sector of "
               "data (Nsight Compute; 1 when coalesced): the 32 lanes do not read 32 "
               "neighbouring columns at each step", "lane l adds columns l, l + 32, l + 64, "
               "...: x[row * cols + c] with c = lane + 32k")
        said.append(f"{rows}x{cols}: {ld:.2f} sectors per sector of x read")
        stores = launch.get(access_checks.THREAD_METRICS[1])
        if not isinstance(stores, float):
            return [f"{access_checks.UNMEASURED}one store per row (no thread-level counts)"]
        # after __shfl_down_sync only lane 0 holds the row's sum: a store from every lane
        # writes 31 partial sums to the same address, and which lane wins is not defined
        expect(stores <= rows, f"{rows}x{cols}: your kernel's threads made {stores:.0f} global "
               f"stores for {rows} rows (Nsight Compute): more than one lane stores each row, "
               "and only lane 0 holds the whole sum after the shuffles (which lane's value "
               "lands is not defined)", "if (lane == 0) y[row] = sum;")
        said[-1] += f", {stores:.0f} stores"
    if len(said) != len(WARP_SUM_PROFILED):
        return [f"{access_checks.UNMEASURED}coalescing (Nsight Compute gave {len(launches)} "
                f"launches, expected {len(WARP_SUM_PROFILED)})"]
    return [f"coalesced reads, one store per row (Nsight Compute): {'; '.join(said)}"]


# profiled by Nsight Compute: sides that are multiples of 32 (every warp's 32 floats one
# 128-byte line), not square (the roles of rows and cols cannot be confused)
TRANSPOSE_PROFILED = ((256, 512),)
WARP_SUM_PROFILED = ((512, 1024),)
TILE = 32
_READS_X = Need(("LDG",), "the SASS has no global load (LDG): your kernel never reads x",
                "every output depends on x: load it")
SPECS = {
    "cuda_gelu.transpose": Spec(
        id="cuda_gelu.transpose", kernel="transpose", answer="TRANSPOSE_SOURCE",
        sass=(_READS_X,
              Need(("STS",), "the SASS has no shared-memory store (STS): without a tile in "
                   "shared memory, either the reads or the writes of a transpose are strided "
                   "(uncoalesced)", "load a 32x32 tile into __shared__ float tile[32][33] with "
                   "coalesced reads, then write it out transposed"),
              Need(("LDS",), "the SASS has no shared-memory load (LDS): the tile is written but "
                   "never read back", "write y from the tile"),
              Need(("BAR",), "the SASS has no barrier (BAR): without __syncthreads() a thread "
                   "may read a tile element before its neighbour has written it (a race)",
                   "__syncthreads() between filling the tile and reading it")),
        make=_randn, out_shape=lambda x: (x.shape[1], x.shape[0]), launch=_launch_transpose,
        reference=lambda x: x.t().contiguous(),
        shapes=((1, 1), (33, 65), (1000, 3), (3, 1000), (0, 7), (64, 64), (257, 129)),
        bench_shape=(8192, 8192), nbytes=lambda x: 2 * x.numel() * 4,
        sanitize=("memcheck", "racecheck"), barriers=True,
        profile_shapes=TRANSPOSE_PROFILED, measures="coalescing and bank conflicts",
        access=_transpose_access,
        hint="y has shape (cols, rows): y[c][r] = x[r][c]; check both bounds on the load (r < "
             "rows, c < cols) and on the store, where the roles of the indices swap"),
    "cuda_gelu.warp_sum": Spec(
        id="cuda_gelu.warp_sum", kernel="warp_row_sum", answer="WARP_SUM_SOURCE",
        sass=(_READS_X,
              Need(("SHFL",), "the SASS has no shuffle (SHFL): the 32 lanes' partial sums are "
                   "not added with __shfl_down_sync", "after the loop over columns: for (int "
                   "offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffff, "
                   "sum, offset);")),
        make=_randn, out_shape=lambda x: (x.shape[0],), launch=_launch_warp_sum,
        reference=lambda x: torch.sum(x, dim=-1, dtype=torch.float32),
        shapes=((1, 1), (3, 31), (13, 33), (17, 1000), (0, 5), (4, 0), (1000, 7), (5, 4099)),
        bench_shape=(1 << 18, 1024), nbytes=lambda x: x.numel() * 4 + x.shape[0] * 4,
        tolerance=(1e-3, 1e-4), profile_shapes=WARP_SUM_PROFILED,
        measures="coalesced reads and one store per row", access=_warp_sum_access,
        hint="lane l adds columns l, l + 32, ... < cols; after the shuffles lane 0 holds the "
             "row's sum; rows past the last one (the last block's extra warps) do nothing"),
}


def transpose_child(source: str, small: bool) -> dict:
    """The GPU child of cuda_gelu.transpose (run by :func:`exercises.kernel_checks.run_child`)."""
    return spec_checks.spec_child(SPECS["cuda_gelu.transpose"], source, small)


def warp_sum_child(source: str, small: bool) -> dict:
    """The GPU child of cuda_gelu.warp_sum (run by :func:`exercises.kernel_checks.run_child`)."""
    return spec_checks.spec_child(SPECS["cuda_gelu.warp_sum"], source, small)


def transpose_profile(source: str):
    """The call Nsight Compute profiles for cuda_gelu.transpose (:data:`TRANSPOSE_PROFILED`)."""
    return spec_checks.spec_profile(SPECS["cuda_gelu.transpose"], source)


def warp_sum_profile(source: str):
    """The call Nsight Compute profiles for cuda_gelu.warp_sum (:data:`WARP_SUM_PROFILED`)."""
    return spec_checks.spec_profile(SPECS["cuda_gelu.warp_sum"], source)


def partial_shuffle_masks(ptx: str) -> list[int]:
    """The member masks of the PTX's ``shfl.sync`` that are constants other than all 32 lanes
    (a mask computed at run time, such as ``__activemask()``, is not judged here)."""
    constants = dict(re.findall(r"mov\.[bsu]32\s+(%r\d+),\s*(-?\w+);", ptx))
    found = []
    for operand in re.findall(r"shfl\.sync\.\w+\.b32\s[^;]*,\s*([^,;\s]+)\s*;", ptx):
        try:
            mask = int(constants.get(operand, operand), 0) & 0xFFFFFFFF
        except ValueError:
            continue
        if mask != 0xFFFFFFFF:
            found.append(mask)
    return found


TRANSPOSE_STUB = r'''
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    // y (cols x rows) = x (rows x cols) transposed. Block (32, 8) moves the 32x32 tile whose
    // corner is x[blockIdx.y * 32][blockIdx.x * 32]: each thread copies 4 elements in, 4 out.
    // 1. read the tile with threadIdx.x along x's columns (coalesced) into shared memory
    // 2. wait until the whole tile is there
    // 3. write it out with threadIdx.x along y's columns (coalesced), reading the tile
    //    transposed; mind the edges of x on the way in and of y on the way out
}
"""
'''


@exercise("cuda_gelu.transpose", title="A coalesced transpose through shared memory",
          stub=TRANSPOSE_STUB, answers=("TRANSPOSE_SOURCE",), section="6 · Coalescing",
          intro="""
The strided copy above is a transpose: reading `x` row by row writes `y` column by column, and
one side is always strided. The way out is a tile in **shared memory**, the on-chip scratchpad
a block shares: the block reads a 32x32 tile of `x` with neighbouring threads on neighbouring
columns (coalesced), waits (`__syncthreads()`), then writes the tile *transposed* to `y`,
again with neighbouring threads on neighbouring columns of `y`. Both DRAM sides are coalesced;
the strided access happens in shared memory, which is built for it. Declare the tile
`__shared__ float tile[32][33]`: the extra column shifts each row by one of shared memory's 32
banks, so reading a tile column does not make 32 threads queue on one bank.

It is launched with blocks of (32, 8) threads and a grid of (ceil(cols / 32), ceil(rows / 32))
blocks. The check compiles it with NVRTC (any machine) and reads the SASS for shared-memory
stores and loads (`STS`, `LDS`), a barrier (`BAR`) and no spills; on a GPU it runs it on
awkward shapes in a child process (`x` inside NaN, `y` fenced on both sides), under
compute-sanitizer's memcheck and racecheck, reads Nsight Compute's counters for coalesced loads
and stores and for bank conflicts on the tile, and measures it against the copy bandwidth.""")
def check_transpose(source, report) -> None:
    spec_checks.check_spec(SPECS["cuda_gelu.transpose"], source, report)


WARP_SUM_STUB = r'''
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    // y[row] = x[row][0] + ... + x[row][cols - 1], one warp (32 lanes) per row, 8 rows per
    // 256-thread block. Lane l adds columns l, l + 32, l + 64, ... (coalesced), then the
    // lanes' 32 partial sums are added with __shfl_down_sync; lane 0 stores the row's sum.
}
"""
'''


@exercise("cuda_gelu.warp_sum", title="A warp-shuffle row sum", stub=WARP_SUM_STUB,
          answers=("WARP_SUM_SOURCE",), section="A warp per row", intro=f"""
Write `warp_row_sum`: warp `w` of block `b` sums row `8b + w` of a row-major float32 `x`
(`rows x cols`), in float32, and lane 0 writes it to `y[row]`. It is launched with {BLOCK}
threads per block and `ceil(rows / 8)` blocks, so the last block may have warps with no row:
they must not write. `threadIdx.x / 32` is the warp, `threadIdx.x % 32` the lane.

The check compiles it with NVRTC (any machine), reads the shuffles' masks in the PTX, and the
SASS for the shuffles (`SHFL`) and no spills; on a GPU it runs it in a child process on awkward
shapes (empty rows and columns, rows that are not a multiple of 8, `x` inside NaN, `y` fenced
on both sides) against `x.sum(-1)`, under memcheck, reads Nsight Compute's counters for
coalesced loads and one store per row (only lane 0 holds the whole sum), and measures it
against the copy bandwidth.""")
def check_warp_sum(source, report) -> None:
    kernel_checks.expect_source(source, "WARP_SUM_SOURCE", kernel="warp_row_sum")
    ptx = kernel_checks.compile_answer(source, "warp_row_sum", "WARP_SUM_SOURCE", output="ptx",
                                       hint=kernel_checks.WHOLE).ptx
    if masks := partial_shuffle_masks(ptx):
        raise Mismatch(f"a shuffle's member mask is {masks[0]:#010x}, yet all 32 lanes of the "
                       "warp call it: a lane that calls __shfl_down_sync outside its mask is "
                       "undefined behaviour (it may work on one GPU and not on the next)",
                       "all 32 lanes take part: __shfl_down_sync(0xffffffff, sum, offset)")
    spec_checks.check_spec(SPECS["cuda_gelu.warp_sum"], source, report)
