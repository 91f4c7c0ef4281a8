"""Blind wrong answers: plausible student mistakes, written without seeing the checks.

Every answer below was written from an exercise's statement and stub cell alone (plus the
lessons and the course's kernels a student can read), by someone who never saw the exercise
checks, their mutation operators or the reference solutions. Each is a complete answer cell, as
a student would paste it, that defines every name the check reads, runs, and gives mostly right
output on friendly inputs, but is wrong per the statement: a bound off by one, a mask missing on
one side, a running max started at 0, padding that enters a max, a missing barrier, a buffer
cached between calls, a wrong layout that only square shapes hide, and so on.

The mutation harness runs them like its own mutants and counts them apart: a blind answer that
passes is a gap in a check that nobody tuned the check against.

``BLIND[exercise id][label] = cell source``; the label says what the mistake is.
"""

# ruff: noqa: E501

BLIND: dict[str, dict[str, str]] = {
    # ------------------------------------------------------------------ cuda_gelu (NVRTC) ----
    "cuda_gelu.silu": {
        "alignment tested on x only, not on y": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long i = 4 * t;
    if (i >= n) return;
    // a float4 needs a 16-byte aligned address
    const bool aligned = reinterpret_cast<unsigned long long>(x) % 16 == 0;
    if (aligned && i + 4 <= n) {
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        for (long long j = i; j < n && j < i + 4; ++j) y[j] = x[j] / (1.0f + __expf(-x[j]));
    }
}
"""
''',
        "last whole group of four takes the scalar path (i + 4 < n)": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long i = 4 * t;
    if (i >= n) return;
    const bool aligned = (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);
    if (aligned && i + 4 < n) {  // all four exist
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        for (long long j = i; j < n && j < i + 4; ++j) y[j] = x[j] / (1.0f + __expf(-x[j]));
    }
}
"""
''',
        "scalar path writes all four elements, no j < n bound": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long i = 4 * t;
    if (i >= n) return;
    const bool aligned = (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);
    if (aligned && i + 4 <= n) {
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        // one at a time
#pragma unroll
        for (int k = 0; k < 4; ++k) y[i + k] = x[i + k] / (1.0f + __expf(-x[i + k]));
    }
}
"""
''',
        "32-bit thread index (4 * t overflows past 2^31 elements)": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = 4 * t;
    if (i >= n) return;
    const bool aligned = (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);
    if (aligned && i + 4 <= n) {
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        for (int j = i; j < n && j < i + 4; ++j) y[j] = x[j] / (1.0f + __expf(-x[j]));
    }
}
"""
''',
    },
    "cuda_gelu.transpose": {
        "tile declared [32][32]: no padding column (bank conflicts)": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][32];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long yr = c0 + j, yc = r0 + threadIdx.x;  // y's row is a column of x
        if (yr < cols && yc < rows) y[yr * rows + yc] = tile[threadIdx.x][j];
    }
}
"""
''',
        "no __syncthreads between the tile's stores and loads": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long yr = c0 + j, yc = r0 + threadIdx.x;
        if (yr < cols && yc < rows) y[yr * rows + yc] = tile[threadIdx.x][j];
    }
}
"""
''',
        "output guard compares y's row with rows and y's column with cols (right only when square)": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long yr = c0 + j, yc = r0 + threadIdx.x;
        if (yr < rows && yc < cols) y[yr * rows + yc] = tile[threadIdx.x][j];
    }
}
"""
''',
        "transposes in the global index on the way out: strided stores": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;  // element (r, c) of x goes to y[c][r]
        if (r < rows && c < cols) y[c * rows + r] = tile[j][threadIdx.x];
    }
}
"""
''',
    },
    "cuda_gelu.warp_sum": {
        "shuffle mask from __activemask() instead of the full warp": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += xr[c];
    const unsigned mask = __activemask();
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(mask, s, offset);
    if (lane == 0) y[row] = s;
}
"""
''',
        "row guard is row > rows: the last block writes y[rows]": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row > rows) return;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += x[row * cols + c];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) y[row] = s;
}
"""
''',
        "xor butterfly, then every lane stores the row's sum": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row >= rows) return;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += x[row * cols + c];
    // after the butterfly every lane holds the whole sum
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    y[row] = s;
}
"""
''',
        "lanes with no column return before the shuffles": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row >= rows) return;
    if (cols > 0 && lane >= cols) return;  // nothing to add for this lane
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += x[row * cols + c];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) y[row] = s;
}
"""
''',
    },
    # ------------------------------------------------------------------ distributed ----------
    "distributed.halves": {
        "never waits on the all-gather's handle": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    chunk = torch.empty(x.numel() // n, dtype=x.dtype, device=x.device)
    reduce_scatter(chunk, x)
    chunk /= n
    out = torch.empty_like(x)
    all_gather(out, chunk, async_op=True)  # the gather runs in the background
    return out
''',
        "chunk sized numel // 2 (a half: right for two ranks only)": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    half = torch.empty(x.numel() // 2, dtype=x.dtype, device=x.device)
    reduce_scatter(half, x)
    half /= n
    out = torch.empty_like(x)
    work = all_gather(out, half, async_op=True)
    work.wait()
    return out
''',
        "output buffers cached by length and reused between calls": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter

_BUFFERS = {}  # (numel, dtype) -> (chunk, out): no allocation after the first call


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    key = (x.numel(), x.dtype, x.device)
    if key not in _BUFFERS:
        _BUFFERS[key] = (torch.empty(x.numel() // n, dtype=x.dtype, device=x.device),
                         torch.empty_like(x))
    chunk, out = _BUFFERS[key]
    reduce_scatter(chunk, x)
    chunk /= n
    work = all_gather(out, chunk, async_op=True)
    work.wait()
    return out
''',
        "gathers into x itself: the caller's tensor is overwritten, no new tensor": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    chunk = torch.empty(x.numel() // n, dtype=x.dtype, device=x.device)
    reduce_scatter(chunk, x)
    chunk /= n
    work = all_gather(x, chunk, async_op=True)  # x is no longer needed: reuse its memory
    work.wait()
    return x
''',
    },
    "distributed.one_shot": {
        "no barrier after the last tile (a peer may still read my buffer)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every peer's input has landed
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
''',
        "accumulates in the buffer's dtype (bf16 added in bf16)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=out.dtype.element_ty)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask)
        tl.store(out + offsets, acc, mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
''',
        "each rank sums starting from its own buffer (a different order, different bits per rank)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for hop in tl.static_range(WORLD):  # my own buffer first (it is local), then the peers
            peer = (rank + hop) % WORLD
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
''',
        "writes the sum back into its own symmetric buffer too (peers may still be reading it)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    mine = tl.load(buffer_ptrs + rank).to(tl.pointer_type(out.dtype.element_ty))
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        total = acc.to(out.dtype.element_ty)
        tl.store(out + offsets, total, mask=mask)
        tl.store(mine + offsets, total, mask=mask)  # in place as well, like an all-reduce
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
''',
    },
    "distributed.pipeline": {
        "chunk start computed from the current chunk's size (wrong after a short last chunk)": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    for c, (chunk, work) in enumerate(zip(gathered, works)):
        work.wait()
        rows = chunk.shape[1]
        start = c * rows
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
''',
        "waits for every chunk first, then multiplies (nothing overlaps)": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    for work in works:
        work.wait()
    start = 0
    for chunk in gathered:
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows
''',
        "waits on the chunk after multiplying it": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    start = 0
    for chunk, work in zip(gathered, works):
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        work.wait()  # this chunk is done before the next one starts
        start += rows
''',
        "rows per rank taken as chunk rows x chunks (too many when the last chunk is short)": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = gathered[0].shape[1] * len(gathered)  # rows of a rank's shard
    start = 0
    for chunk, work in zip(gathered, works):
        work.wait()
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows
''',
    },
    # ------------------------------------------------------------------ first_kernels --------
    "first_kernels.flip_rows": {
        "guards joined with && (a thread outside one axis only still runs)": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    if (r >= rows && c >= cols) return;
    y[r * cols + c] = x[(rows - 1 - r) * cols + c];
}
"""
''',
        "flips against the padded grid's row count (right only when rows % 8 == 0)": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    const long long last = (long long)gridDim.y * blockDim.y - 1;  // the grid's last row
    if (r >= rows || c >= cols) return;
    const long long src = last - r;
    if (src < 0 || src >= rows) return;
    y[r * cols + c] = x[src * cols + c];
}
"""
''',
        "element offsets in 32-bit int (overflow past 2^31 elements)": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    const int dst = r * (int)cols + c;
    const int src = ((int)rows - 1 - r) * (int)cols + c;
    y[dst] = x[src];
}
"""
''',
        "only the column is guarded": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    if (c >= cols) return;  // rows: the grid covers them
    y[r * cols + c] = x[(rows - 1 - r) * cols + c];
}
"""
''',
    },
    "first_kernels.histogram": {
        "only bins below blockDim.x are zeroed (one pass, not a loop)": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    if (threadIdx.x < bins) local[threadIdx.x] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
        "negative values not ignored (only v < bins tested)": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
        "no barrier between the zeroing and the counting": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
        "one element per thread, no grid-stride loop": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
    },
    # ------------------------------------------------------------------ fusion ---------------
    "fusion.reverse": {
        "reverses within each program's block, not the whole vector": r'''
# ✏️ Exercise fusion.reverse: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    src = pid * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))
    mask = offsets < n
    x = tl.load(x_ptr + src, mask=src < n)
    tl.store(y_ptr + offsets, x, mask=mask)
''',
        "store not masked (the last program writes past y)": r'''
# ✏️ Exercise fusion.reverse: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + (n - 1 - offsets), mask=mask, other=0.0)
    tl.store(y_ptr + offsets, x)
''',
        "load not masked (the last program reads before x)": r'''
# ✏️ Exercise fusion.reverse: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + (n - 1 - offsets))
    tl.store(y_ptr + offsets, x, mask=mask)
''',
    },
    "fusion.silu_mul": {
        "odd width checked with assert (AssertionError, not ValueError)": r'''
# ✏️ Exercise fusion.silu_mul: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    r = i // d
    c = i % d
    a = tl.load(x_ptr + r * 2 * d + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + r * 2 * d + d + c, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + i, y.to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    assert x.dim() == 2 and x.shape[1] % 2 == 0, f"x must be 2-D with an even width, got {tuple(x.shape)}"
    rows, width = x.shape
    d = width // 2
    y = torch.empty((rows, d), dtype=x.dtype, device=x.device)
    n = rows * d
    if n == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, d, n, BLOCK=BLOCK)
    return y
''',
        "silu(a) rounded to x's dtype before the multiply (two roundings, not float32)": r'''
# ✏️ Exercise fusion.silu_mul: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    r = i // d
    c = i % d
    a = tl.load(x_ptr + r * 2 * d + c, mask=mask, other=0.0)
    b = tl.load(x_ptr + r * 2 * d + d + c, mask=mask, other=0.0)
    af = a.to(tl.float32)
    silu = (af * tl.sigmoid(af)).to(a.dtype)  # F.silu(a) in a's dtype, as eager has it
    tl.store(y_ptr + i, (silu * b).to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got shape {tuple(x.shape)}")
    rows, width = x.shape
    d = width // 2
    y = torch.empty((rows, d), dtype=x.dtype, device=x.device)
    n = rows * d
    if n == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, d, n, BLOCK=BLOCK)
    return y
''',
        "y allocated with empty_like(x[:, :d]): a slicing op beside the allocation": r'''
# ✏️ Exercise fusion.silu_mul: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    r = i // d
    c = i % d
    a = tl.load(x_ptr + r * 2 * d + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + r * 2 * d + d + c, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + i, y.to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got shape {tuple(x.shape)}")
    d = x.shape[1] // 2
    y = torch.empty_like(x[:, :d], memory_format=torch.contiguous_format)
    n = y.numel()
    if n == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, d, n, BLOCK=BLOCK)
    return y
''',
    },
    # ------------------------------------------------------------------ Hopper ---------------
    "hopper_attention.pingpong": {
        "barrier thread count 128 (a warpgroup completes it alone)": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 128;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 128;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
        "turn_pass uses bar.sync: the passing warpgroup waits too": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
        "turn_pass signals its own barrier, not the other consumer's": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}
"""
''',
        "bar.sync without a thread count (defaults to every thread of the block)": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 256;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
    },
    "hopper_backward.dq_add": {
        "row guard is <= sq (the first row past Sq is added)": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    const int row = q_row + 8 * h;
    if (row <= sq) {
        float* out = dq_sum + (i64(bh) * sq + row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
''',
        "guard tests the thread's first row only, not row + 8": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
if (q_row < sq) {
    float* base = dq_sum + (i64(bh) * sq + q_row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float* out = base + 8 * h * D;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
''',
        "element offset computed in 32-bit int (bh not cast to i64)": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    const int row = q_row + 8 * h;
    if (row < sq) {
        const int offset = (bh * sq + row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(dq_sum + offset + 8 * j, dq_acc[4 * j + 2 * h] * scale,
                     dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
''',
        "pairs taken as registers 4j + h and 4j + h + 2 (mixes rows r and r + 8)": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    const int row = q_row + 8 * h;
    if (row < sq) {
        float* out = dq_sum + (i64(bh) * sq + row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + h] * scale, dq_acc[4 * j + h + 2] * scale);
        }
    }
}
"""
''',
    },
    "hopper_backward.quantize": {
        "block maximum of x, not of |x| (negative outliers missed)": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.max(x, axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = tl.clamp(x / scale, -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
''',
        "batch and head offsets in int32 (overflow past 2^31 elements)": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = tl.clamp(x / scale, -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
''',
        "x8 stored with x's strides (keys-contiguous V lands in the wrong layout)": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    offsets = b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd
    x = tl.load(x_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = tl.clamp(x / scale, -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + offsets, y.to(x8_ptr.dtype.element_ty), mask=ok)  # same element, same place
''',
        "x / scale not clamped to ±448 before the cast": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = x / scale  # |y| <= 448 by construction of the scale
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
''',
    },
    "hopper_matmul.parity": {
        "parity of the tile index (kt & 1), not of the slot's phase": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt) & 1u;  // phases alternate 0, 1, 0, 1, ...
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    const u32 address = static_cast<u32>(__cvta_generic_to_shared(bar));
    u32 done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(address), "r"(parity)
                     : "memory");
    } while (!done);
}
"""
''',
        "one try_wait, no loop (it may time out before the phase completes)": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt / 2) & 1u;  // tile kt is phase kt / 2 of its slot
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    const u32 address = static_cast<u32>(__cvta_generic_to_shared(bar));
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n}"
                 :: "r"(address), "r"(parity) : "memory");
}
"""
''',
        "barrier passed as a generic 64-bit pointer, not its shared-state-space address": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt / 2) & 1u;
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    u32 done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "l"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
"""
''',
        "phase index kt / 2 returned without & 1 (0, 0, 1, 1, 2, 2, ...)": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt >> 1);  // the slot's phase number
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    const u32 address = static_cast<u32>(__cvta_generic_to_shared(bar));
    u32 done = 0;
    while (!done) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(address), "r"(parity)
                     : "memory");
    }
}
"""
''',
    },
    "hopper_matmul.promote": {
        "half h ignored: always adds into d[0..63] (right for BN = 128 only)": r'''
# ✏️ Exercise hopper_matmul.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;
    for (int j = 0; j < 16; ++j) {
        d[4 * j + 0] += part[4 * j + 0] * lo;
        d[4 * j + 1] += part[4 * j + 1] * lo;
        d[4 * j + 2] += part[4 * j + 2] * hi;
        d[4 * j + 3] += part[4 * j + 3] * hi;
    }
}
"""
''',
        "row scale chosen by the register's parity (even: row_lo, odd: row_hi)": r'''
# ✏️ Exercise hopper_matmul.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;
    for (int i = 0; i < 64; ++i) d[64 * h + i] += part[i] * (i % 2 == 0 ? lo : hi);
}
"""
''',
        "scale products computed per register (64 extra multiplies)": r'''
# ✏️ Exercise hopper_matmul.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    for (int j = 0; j < 16; ++j) {
        d[64 * h + 4 * j + 0] += part[4 * j + 0] * row_lo * block;
        d[64 * h + 4 * j + 1] += part[4 * j + 1] * row_lo * block;
        d[64 * h + 4 * j + 2] += part[4 * j + 2] * row_hi * block;
        d[64 * h + 4 * j + 3] += part[4 * j + 3] * row_hi * block;
    }
}
"""
''',
        "assigns instead of adding: each K tile overwrites the running sum": r'''
# ✏️ Exercise hopper_matmul.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;
    for (int j = 0; j < 16; ++j) {
        d[64 * h + 4 * j + 0] = part[4 * j + 0] * lo;
        d[64 * h + 4 * j + 1] = part[4 * j + 1] * lo;
        d[64 * h + 4 * j + 2] = part[4 * j + 2] * hi;
        d[64 * h + 4 * j + 3] = part[4 * j + 3] * hi;
    }
}
"""
''',
    },
    # ------------------------------------------------------------------ mma_matmul -----------
    "mma_matmul.smem": {
        "no __syncthreads after the inner product (next slice overwrites the tiles)": r'''
# ✏️ Exercise mma_matmul.smem: edit this cell, run it, then run the check below
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        as[ty][tx] = (row < M && k0 + tx < K) ? a[(long long)row * K + k0 + tx] : 0.0f;
        bs[ty][tx] = (col0 + ty < N && k0 + tx < K) ? b[(long long)(col0 + ty) * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[ty][k] * bs[tx][k];
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
"""
''',
        "B's staging guard tests col (col0 + tx), not the column it loads (col0 + ty)": r'''
# ✏️ Exercise mma_matmul.smem: edit this cell, run it, then run the check below
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        as[ty][tx] = (row < M && k0 + tx < K) ? a[(long long)row * K + k0 + tx] : 0.0f;
        bs[ty][tx] = (col < N && k0 + tx < K) ? b[(long long)(col0 + ty) * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[ty][k] * bs[tx][k];
        __syncthreads();
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
"""
''',
        "store of C guarded on the row only": r'''
# ✏️ Exercise mma_matmul.smem: edit this cell, run it, then run the check below
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        as[ty][tx] = (row < M && k0 + tx < K) ? a[(long long)row * K + k0 + tx] : 0.0f;
        bs[ty][tx] = (col0 + ty < N && k0 + tx < K) ? b[(long long)(col0 + ty) * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[ty][k] * bs[tx][k];
        __syncthreads();
    }
    if (row < M) c[(long long)row * N + col] = acc;
"""
''',
    },
    "mma_matmul.swizzle_cuda": {
        "swizzle added to store_offset only; ldmatrix_offset left unswizzled": r'''
# ✏️ Exercise mma_matmul.swizzle_cuda: edit this cell, run it, then run the check below
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + (chunk ^ ((row / (8 / CHUNKS)) % CHUNKS)) * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    return (16 * warp + lane % 16) * ROW_BYTES + (2 * step + lane / 16) * 16;
}
"""
''',
        "XOR with row % CHUNKS (the 128-byte-row pattern): rows r and r + 4 still collide": r'''
# ✏️ Exercise mma_matmul.swizzle_cuda: edit this cell, run it, then run the check below
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + (chunk ^ (row % CHUNKS)) * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    const int row = 16 * warp + lane % 16;
    const int chunk = 2 * step + lane / 16;
    return row * ROW_BYTES + (chunk ^ (row % CHUNKS)) * 16;
}
"""
''',
        "XOR key taken % 8 instead of % CHUNKS (chunks land past the row)": r'''
# ✏️ Exercise mma_matmul.swizzle_cuda: edit this cell, run it, then run the check below
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + (chunk ^ ((row / (8 / CHUNKS)) % 8)) * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    const int row = 16 * warp + lane % 16;
    const int chunk = 2 * step + lane / 16;
    return row * ROW_BYTES + (chunk ^ ((row / (8 / CHUNKS)) % 8)) * 16;
}
"""
''',
    },
    "mma_matmul.triton_dot": {
        "accumulator in C's dtype (fp16 partial sums for fp16 inputs)": r'''
# ✏️ Exercise mma_matmul.triton_dot: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32  # the tile: given


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """C[tile] = A @ B for the BLOCK_M x BLOCK_N tile (tl.program_id(0), tl.program_id(1))."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k0 + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k0 + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=c_ptr.dtype.element_ty)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    """a @ b for 2-D fp16 or fp32 tensors of any strides; the result in a's dtype."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K)
    return c
''',
        "A advanced by BLOCK_K elements, not BLOCK_K * stride_ak (right only for a K-contiguous A)": r'''
# ✏️ Exercise mma_matmul.triton_dot: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32  # the tile: given


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """C[tile] = A @ B for the BLOCK_M x BLOCK_N tile (tl.program_id(0), tl.program_id(1))."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k0 + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k0 + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K  # the next K slice of A's rows
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    """a @ b for 2-D fp16 or fp32 tensors of any strides; the result in a's dtype."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K)
    return c
''',
        "operands cast to fp16 before tl.dot (fp32 values past the fp16 range overflow)": r'''
# ✏️ Exercise mma_matmul.triton_dot: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32  # the tile: given


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """C[tile] = A @ B for the BLOCK_M x BLOCK_N tile (tl.program_id(0), tl.program_id(1))."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k0 + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k0 + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        # the tensor cores want 16-bit operands
        acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    """a @ b for 2-D fp16 or fp32 tensors of any strides; the result in a's dtype."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K)
    return c
''',
        "loads masked on M and N but not on K (a ragged K reads past the rows)": r'''
# ✏️ Exercise mma_matmul.triton_dot: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32  # the tile: given


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """C[tile] = A @ B for the BLOCK_M x BLOCK_N tile (tl.program_id(0), tl.program_id(1))."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptrs, mask=rn[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    """a @ b for 2-D fp16 or fp32 tensors of any strides; the result in a's dtype."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K)
    return c
''',
    },
    # ------------------------------------------------------------------ model ----------------
    "model.predict": {
        "the head (d -> vocab) left out of the total": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    attention = 2 * (2 * s * s * d)                       # Q K^T and P V over every head
    projections = 2 * s * d * 3 * d + 2 * s * d * d       # q, k, v and out
    mlp = 2 * s * d * 4 * d + 2 * s * 4 * d * d           # d -> 4d -> d
    per_layer = attention + projections + mlp
    return n_layers * attention / (n_layers * per_layer)
''',
        "causal attention counted as half the S x S products": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    attention = 2 * (2 * s * s * d) / 2                   # causal: only the lower triangle
    projections = 2 * s * d * 3 * d + 2 * s * d * d
    mlp = 2 * s * d * 4 * d + 2 * s * 4 * d * d
    head = 2 * s * d * vocab
    total = n_layers * (attention + projections + mlp) + head
    return n_layers * attention / total
''',
        "the MLP counted once (d -> 4d only, not back to d)": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    attention = 2 * (2 * s * s * d)
    projections = 2 * s * d * 3 * d + 2 * s * d * d
    mlp = 2 * s * d * 4 * d
    head = 2 * s * d * vocab
    total = n_layers * (attention + projections + mlp) + head
    return n_layers * attention / total
''',
        "attention's FLOPs counted per head dim (one head's S x S products only)": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
N_HEADS = 12  # GPT-2 small


def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    head_dim = d // N_HEADS
    attention = 2 * (2 * s * s * head_dim)                # Q K^T and P V: (S x dh) @ (dh x S)
    projections = 2 * s * d * 3 * d + 2 * s * d * d
    mlp = 2 * s * d * 4 * d + 2 * s * 4 * d * d
    head = 2 * s * d * vocab
    total = n_layers * (attention + projections + mlp) + head
    return n_layers * attention / total
''',
    },
    "model.swap": {
        "x_hat rounded to x's dtype before the products (each dy * x_hat term rounded to bf16)": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    r = rstd.reshape(-1, 1).float()
    x_hat = (x.float() * r).to(x.dtype)  # the normalised row, as the forward produced it
    g = dy * weight
    mean = (g.float() * x_hat.float()).mean(dim=-1, keepdim=True)
    dx = r * (g.float() - x_hat.float() * mean)
    dweight = (dy * x_hat).float().sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype)
''',
        "dx returned in float32, not in x's dtype": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    r = rstd.reshape(-1, 1).float()
    x_hat = x.float() * r
    g = dy.float() * weight.float()
    dx = r * (g - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    dweight = (dy.float() * x_hat).sum(dim=0)
    return dx, dweight.to(weight.dtype)
''',
        "mean(g * x_hat) taken over the whole tensor, not per row": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    r = rstd.reshape(-1, 1).float()
    x_hat = x.float() * r
    g = dy.float() * weight.float()
    dx = r * (g - x_hat * (g * x_hat).mean())
    dweight = (dy.float() * x_hat).sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype)
''',
        "Triton kernel adds dweight with tl.atomic_add (order changes the bits)": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_row_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr, n_cols,
                           BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    x_hat = x * rstd
    g = dy * w
    dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
    tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.atomic_add(dw_ptr + cols, dy * x_hat, mask=mask)  # float32 sum of every row's part


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    dw = torch.zeros(cols, dtype=torch.float32, device=x.device)
    if rows == 0 or cols == 0:
        return dx, dw.to(weight.dtype)
    rmsnorm_bwd_row_kernel[(rows,)](dy, x, weight, rstd.contiguous(), dx, dw, cols,
                                    BLOCK=triton.next_power_of_2(cols))
    return dx, dw.to(weight.dtype)
''',
    },
    # ------------------------------------------------------------------ nvrtc ----------------
    "nvrtc.divergence": {
        "block's base left out: every block maps onto elements 0 .. 255": r'''
# ✏️ Exercise nvrtc.divergence: edit this cell, run it, then run the check below
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x): warps 0-3 take the even
// elements of the block, warps 4-7 the odd ones.
__host__ __device__ constexpr long long element_of(long long t) {
    return 2 * (t % 128) + (t % 256) / 128;
}
"""
''',
        "parity per half-warp (16 lanes), so each warp still holds both kinds": r'''
# ✏️ Exercise nvrtc.divergence: edit this cell, run it, then run the check below
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x): each group of 16 threads
// takes one parity of 32 neighbouring elements.
__host__ __device__ constexpr long long element_of(long long t) {
    return (t / 32) * 32 + 2 * (t % 16) + (t / 16) % 2;
}
"""
''',
        "warp w takes elements w, w + 8, w + 16, ... of the block: one parity, but 256 floats apart": r'''
# ✏️ Exercise nvrtc.divergence: edit this cell, run it, then run the check below
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x): lane l of warp w takes
// element 8 l + w of the block, so a warp's elements all have the parity of w.
__host__ __device__ constexpr long long element_of(long long t) {
    return (t / 256) * 256 + 8 * (t % 32) + (t % 256) / 32;
}
"""
''',
    },
    # ------------------------------------------------------------------ rmsnorm --------------
    "rmsnorm.backward": {
        "mean(g * x_hat) divided by BLOCK, not n_cols": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / BLOCK))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
        "last program's rows not clamped to n_rows (reads and writes past the end)": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    for row in range(first, first + rows_per_program):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
        "dweight added with tl.atomic_add into one zeroed row (no partial rows)": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.atomic_add(partial_ptr + cols, dw, mask=mask)  # one float32 row, every program adds


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.zeros((1, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
        "dweight accumulated in the input dtype (bf16 sums over the rows)": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)  # dweight has the weight's dtype
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += (dy * x_hat).to(dw.dtype)
    tl.store(partial_ptr + pid * n_cols + cols, dw.to(tl.float32), mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
    },
    # ------------------------------------------------------------------ triton_tools ---------
    "triton_tools.transpose": {
        "block pointers without boundary_check (ragged tiles run past the matrices)": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_block = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(p0 * BM, p1 * BN),
                                block_shape=(BM, BN), order=(1, 0))
    z_block = tl.make_block_ptr(z_ptr, shape=(N, M), strides=(M, 1), offsets=(p1 * BN, p0 * BM),
                                block_shape=(BN, BM), order=(1, 0))
    tile = tl.load(x_block)
    tl.store(z_block, tl.trans(tile))
''',
        "boundary_check on dimension 0 only": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_block = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(p0 * BM, p1 * BN),
                                block_shape=(BM, BN), order=(1, 0))
    z_block = tl.make_block_ptr(z_ptr, shape=(N, M), strides=(M, 1), offsets=(p1 * BN, p0 * BM),
                                block_shape=(BN, BM), order=(1, 0))
    tile = tl.load(x_block, boundary_check=(0,), padding_option="zero")
    tl.store(z_block, tl.trans(tile), boundary_check=(0,))
''',
        "z's tensor descriptor takes x's strides [N, 1]: right only when M == N": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    z_desc = tl.make_tensor_descriptor(z_ptr, shape=[N, M], strides=[N, 1], block_shape=[BN, BM])
    tile = x_desc.load([p0 * BM, p1 * BN])
    z_desc.store([p1 * BN, p0 * BM], tl.trans(tile))
''',
        "tile stored at the same (row, column) offsets it was loaded from, not swapped": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    z_desc = tl.make_tensor_descriptor(z_ptr, shape=[N, M], strides=[M, 1], block_shape=[BN, BM])
    tile = x_desc.load([p0 * BM, p1 * BN])
    z_desc.store([p0 * BM, p1 * BN], tl.trans(tile))
''',
    },
    # ------------------------------------------------------------------ puzzles --------------
    "puzzles.add": {
        "lane count hard-coded to 32 (the first example's N0)": r'''
# ✏️ Exercise puzzles.add: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. One program, B0 = N0 lanes (a power of two)."""
    offsets = tl.arange(0, 32)
    x = tl.load(x_ptr + offsets)
    tl.store(z_ptr + offsets, x + 10)
''',
        "mask offsets < N0 - 1 (the last element never written)": r'''
# ✏️ Exercise puzzles.add: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. One program, B0 = N0 lanes (a power of two)."""
    offsets = tl.arange(0, B0)
    mask = offsets < N0 - 1
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(z_ptr + offsets, x + 10, mask=mask)
''',
    },
    "puzzles.add_blocks": {
        "no mask: the ragged last program reads and writes past the end": r'''
# ✏️ Exercise puzzles.add_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is
    ragged."""
    offsets = tl.program_id(0) * B0 + tl.arange(0, B0)
    tl.store(z_ptr + offsets, tl.load(x_ptr + offsets) + 10)
''',
        "mask on the store only: the load reads past the end": r'''
# ✏️ Exercise puzzles.add_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is
    ragged."""
    offsets = tl.program_id(0) * B0 + tl.arange(0, B0)
    x = tl.load(x_ptr + offsets)
    tl.store(z_ptr + offsets, x + 10, mask=offsets < N0)
''',
        "mask built from the lane index, not the global offset": r'''
# ✏️ Exercise puzzles.add_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is
    ragged."""
    lanes = tl.arange(0, B0)
    offsets = tl.program_id(0) * B0 + lanes
    mask = lanes < N0
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(z_ptr + offsets, x + 10, mask=mask)
''',
    },
    "puzzles.outer": {
        "row stride N1 instead of N0 (right only when square)": r'''
# ✏️ Exercise puzzles.outer: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1."""
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + j)
    tl.store(z_ptr + j[:, None] * N1 + i[None, :], y[:, None] + x[None, :])
''',
        "block laid out as z[i, j] (x down the rows), stored transposed": r'''
# ✏️ Exercise puzzles.outer: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1."""
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + j)
    z = x[:, None] + y[None, :]  # (B0, B1)
    tl.store(z_ptr + i[:, None] * N1 + j[None, :], z)
''',
        "mask with the two bounds swapped (i < N1, j < N0)": r'''
# ✏️ Exercise puzzles.outer: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1."""
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0)
    y = tl.load(y_ptr + j, mask=j < N1)
    mask = (j < N0)[:, None] & (i < N1)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], y[:, None] + x[None, :], mask=mask)
''',
    },
    "puzzles.outer_blocks": {
        "store masked on the columns only (rows past N1 written)": r'''
# ✏️ Exercise puzzles.outer_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0)."""
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0, other=0.0)
    y = tl.load(y_ptr + j, mask=j < N1, other=0.0)
    z = tl.maximum(y[:, None] * x[None, :], 0.0)
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], z, mask=(i < N0)[None, :])
''',
        "relu applied to x and y before the product": r'''
# ✏️ Exercise puzzles.outer_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0)."""
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.maximum(tl.load(x_ptr + i, mask=i < N0, other=0.0), 0.0)
    y = tl.maximum(tl.load(y_ptr + j, mask=j < N1, other=0.0), 0.0)
    mask = (j < N1)[:, None] & (i < N0)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], y[:, None] * x[None, :], mask=mask)
''',
        "y loaded without a mask (the store's mask hides it)": r'''
# ✏️ Exercise puzzles.outer_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0)."""
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0, other=0.0)
    y = tl.load(y_ptr + j)
    mask = (j < N1)[:, None] & (i < N0)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], tl.maximum(y[:, None] * x[None, :], 0.0),
             mask=mask)
''',
    },
    "puzzles.row_sum": {
        "masked load without other= (masked lanes undefined)": r'''
# ✏️ Exercise puzzles.row_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=mask)
    tl.store(z_ptr + rows, tl.sum(x, axis=1), mask=rows < N0)
''',
        "row mask on the load but not on the store": r'''
# ✏️ Exercise puzzles.row_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=mask, other=0.0)
    tl.store(z_ptr + rows, tl.sum(x, axis=1))
''',
        "row stride BT instead of T (right only when T == 128)": r'''
# ✏️ Exercise puzzles.row_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * BT + cols[None, :], mask=mask, other=0.0)
    tl.store(z_ptr + rows, tl.sum(x, axis=1), mask=rows < N0)
''',
    },
    "puzzles.long_sum": {
        "loop over whole chunks only (the ragged tail of a row dropped)": r'''
# ✏️ Exercise puzzles.long_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T), in chunks of BT."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, T // BT * BT, BT):
        mask = (rows < N0)[:, None] & (start + cols < T)[None, :]
        x = tl.load(x_ptr + rows[:, None] * T + start + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "chunk masked on the rows only (the last chunk reads into the next row)": r'''
# ✏️ Exercise puzzles.long_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T), in chunks of BT."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, T, BT):
        x = tl.load(x_ptr + rows[:, None] * T + start + cols[None, :],
                    mask=(rows < N0)[:, None], other=0.0)
        acc += tl.sum(x, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "masked load without other= (masked-off lanes are undefined compiled)": r'''
# ✏️ Exercise puzzles.long_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T), in chunks of BT."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, T, BT):
        mask = (rows < N0)[:, None] & (start + cols < T)[None, :]
        x = tl.load(x_ptr + rows[:, None] * T + start + cols[None, :], mask=mask)
        acc += tl.sum(x, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
    },
    "puzzles.col_sum": {
        "loop over whole row blocks only (the last N0 % 16 rows dropped)": r'''
# ✏️ Exercise puzzles.col_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1)."""
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    rows = tl.arange(0, B0)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for start in range(0, N0 - B0 + 1, B0):
        mask = (start + rows < N0)[:, None] & (cols < N1)[None, :]
        x = tl.load(x_ptr + (start + rows)[:, None] * N1 + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
        "load masked on the columns only (the last row block reads past the matrix)": r'''
# ✏️ Exercise puzzles.col_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1)."""
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    rows = tl.arange(0, B0)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for start in range(0, N0, B0):
        x = tl.load(x_ptr + (start + rows)[:, None] * N1 + cols[None, :],
                    mask=(cols < N1)[None, :], other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
        "masked load without other= (masked-off lanes are undefined compiled)": r'''
# ✏️ Exercise puzzles.col_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1)."""
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    rows = tl.arange(0, B0)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for start in range(0, N0, B0):
        mask = (start + rows < N0)[:, None] & (cols < N1)[None, :]
        x = tl.load(x_ptr + (start + rows)[:, None] * N1 + cols[None, :], mask=mask)
        acc += tl.sum(x, axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
    },
    "puzzles.matvec": {
        "x loaded masked but without other=": r'''
# ✏️ Exercise puzzles.matvec: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, N1, B1):
        c = start + cols
        a = tl.load(a_ptr + rows[:, None] * N1 + c[None, :],
                    mask=(rows < N0)[:, None] & (c < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + c, mask=c < N1)  # a is 0 there anyway
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "x loaded without a mask (a's zeros hide it)": r'''
# ✏️ Exercise puzzles.matvec: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, N1, B1):
        c = start + cols
        a = tl.load(a_ptr + rows[:, None] * N1 + c[None, :],
                    mask=(rows < N0)[:, None] & (c < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + c)
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "store not masked (the last program writes rows past N0)": r'''
# ✏️ Exercise puzzles.matvec: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, N1, B1):
        c = start + cols
        a = tl.load(a_ptr + rows[:, None] * N1 + c[None, :],
                    mask=(rows < N0)[:, None] & (c < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + c, mask=c < N1, other=0.0)
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc)
''',
    },
    "puzzles.dot": {
        "K not masked (a ragged K reads the next row's values)": r'''
# ✏️ Exercise puzzles.dot: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (a: M x K, b: K x N, c: M x N, all row-major)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :], mask=(rm < M)[:, None], other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + rn[None, :], mask=(rn < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
''',
        "K loop over whole BK slices only (K % 16 dropped)": r'''
# ✏️ Exercise puzzles.dot: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (a: M x K, b: K x N, c: M x N, all row-major)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K - BK + 1, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :],
                    mask=(rm < M)[:, None] & (k < K)[None, :], other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + rn[None, :],
                    mask=(k < K)[:, None] & (rn < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
''',
        "masked loads without other=": r'''
# ✏️ Exercise puzzles.dot: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (a: M x K, b: K x N, c: M x N, all row-major)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :], mask=(rm < M)[:, None] & (k < K)[None, :])
        b = tl.load(b_ptr + k[:, None] * N + rn[None, :], mask=(k < K)[:, None] & (rn < N)[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
''',
    },
    "puzzles.softmax": {
        "padding loaded as 0.0, not -inf (it enters the max and the sum)": r'''
# ✏️ Exercise puzzles.softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    mask = cols < T
    x = tl.load(x_ptr + row * T + cols, mask=mask, other=0.0)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0), mask=mask)
''',
        "no max subtracted before exp (large rows overflow)": r'''
# ✏️ Exercise puzzles.softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    mask = cols < T
    x = tl.load(x_ptr + row * T + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x)
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0), mask=mask)
''',
        "store not masked (a row's padding lanes write over the next row)": r'''
# ✏️ Exercise puzzles.softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    mask = cols < T
    x = tl.load(x_ptr + row * T + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0))
''',
    },
    "puzzles.long_softmax": {
        "running max starts at 0 instead of -inf": r'''
# ✏️ Exercise puzzles.long_softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    m = tl.full([], 0.0, tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        tl.store(z_ptr + row * T + start + cols, tl.exp(x - m) / s, mask=mask)
''',
        "sum not rescaled when the max grows": r'''
# ✏️ Exercise puzzles.long_softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        m = tl.maximum(m, tl.max(x, axis=0))
        s = s + tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        tl.store(z_ptr + row * T + start + cols, tl.exp(x - m) / s, mask=mask)
''',
        "padding of the first loop loaded as 0.0 (enters the max and the sum)": r'''
# ✏️ Exercise puzzles.long_softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=0.0)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=0.0)
        tl.store(z_ptr + row * T + start + cols, tl.exp(x - m) / s, mask=mask)
''',
    },
    "puzzles.attention": {
        "padded keys not masked (their scores of 0 enter the softmax)": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None], other=0.0)
    k = tl.load(k_ptr + offsets, mask=ok[:, None], other=0.0)
    v = tl.load(v_ptr + offsets, mask=ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
        "no max subtracted before exp (scores of -200 underflow to 0/0)": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None], other=0.0)
    k = tl.load(k_ptr + offsets, mask=ok[:, None], other=0.0)
    v = tl.load(v_ptr + offsets, mask=ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    s = tl.where(ok[None, :], s, float("-inf"))
    p = tl.exp(s)
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
        "padded keys zeroed after exp, so their score of 0 still sets the max": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None], other=0.0)
    k = tl.load(k_ptr + offsets, mask=ok[:, None], other=0.0)
    v = tl.load(v_ptr + offsets, mask=ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    p = tl.where(ok[None, :], p, 0.0)  # padded keys weigh nothing
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
        "masked loads without other= (scores masked to -inf afterwards)": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None])
    k = tl.load(k_ptr + offsets, mask=ok[:, None])
    v = tl.load(v_ptr + offsets, mask=ok[:, None])
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    s = tl.where(ok[None, :], s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
    },
    # ------------------------------------------------------------------ attention ------------
    "attention.attend_block": {
        "mask applied to p after the max: masked scores still set m_new": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    if MASKED:
        p = tl.where(key_ok, p, 0.0)  # masked keys weigh nothing
    alpha = tl.math.exp2(m_i - m_new)
    l_new = l_i * alpha + tl.sum(p, 1)
    if IEEE:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_new
''',
        "weights taken relative to the block's own max (NaN on a fully masked block)": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_blk = tl.max(s, 1) * qk_scale
    m_new = tl.maximum(m_i, m_blk)
    p = tl.math.exp2(s * qk_scale - m_blk[:, None])  # the block's softmax numerators
    alpha = tl.math.exp2(m_i - m_new)  # old sums to the new max
    beta = tl.math.exp2(m_blk - m_new)  # this block's sums to the new max
    l_new = l_i * alpha + tl.sum(p, 1) * beta
    if IEEE:
        pv = tl.dot(p.to(v.dtype), v, input_precision="ieee")
    else:
        pv = tl.dot(p.to(v.dtype), v)
    acc = acc * alpha[:, None] + pv * beta[:, None]
    return acc, m_new, l_new
''',
        "IEEE flag ignored: fp32 scores computed in tf32": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_new = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_new
''',
        "running sum l not rescaled by alpha": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_new = l_i + tl.sum(p, 1)
    if IEEE:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_new
''',
    },
    "attention.backward_dkdv": {
        "causal mask strict (key j seen only when j < i: the diagonal dropped)": r'''
# ✏️ Exercise attention.backward_dkdv: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel. Return (dk, dv)."""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if MASKED:
        pt = tl.where(keys[:, None] < rows[None, :], pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv
''',
        "mask applied to P for dV only; dS uses the unmasked P": r'''
# ✏️ Exercise attention.backward_dkdv: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel. Return (dk, dv)."""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    pt_seen = pt
    if MASKED:
        pt_seen = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
    dv += dot(pt_seen.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv
''',
        "1/sqrt(D) applied to dK in the step as well (the kernel applies it again)": r'''
# ✏️ Exercise attention.backward_dkdv: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel. Return (dk, dv)."""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if MASKED:
        pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    sm_scale = qk_scale * 0.6931471805599453  # log2(e) / sqrt(D) * ln(2) = 1 / sqrt(D)
    dk += dot(dst.to(q.dtype), q, IEEE) * sm_scale
    return dk, dv
''',
    },
    "attention.combine_splits": {
        "no max subtracted: exp2(lse_s) overflows or underflows at |lse| ~ 3000": r'''
# ✏️ Exercise attention.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    ok = s < splits
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=ok, other=float("-inf"))
    w = tl.math.exp2(lse)
    total = tl.sum(w, 0)
    safe = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / safe
    return o, tl.math.log2(total)
''',
        "lanes past the last split read lse = 0.0, not -inf (they get weight)": r'''
# ✏️ Exercise attention.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    ok = s < splits
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=ok, other=0.0)
    m = tl.max(lse, 0)
    m_sub = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse - m_sub)
    total = tl.sum(w, 0)
    safe = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / safe
    return o, m + tl.math.log2(safe)
''',
        "partial outputs loaded without the split mask (0 x a poisoned split = NaN)": r'''
# ✏️ Exercise attention.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=s < splits, other=float("-inf"))
    m = tl.max(lse, 0)
    m_sub = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse - m_sub)  # 0 for the lanes past the last split
    total = tl.sum(w, 0)
    safe = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :])
    o = tl.sum(w[:, None] * part, 0) / safe
    return o, m + tl.math.log2(safe)
''',
        "row with every split empty not guarded (-inf - -inf gives NaN)": r'''
# ✏️ Exercise attention.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    ok = s < splits
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=ok, other=float("-inf"))
    m = tl.max(lse, 0)
    w = tl.math.exp2(lse - m)
    total = tl.sum(w, 0)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / total
    return o, m + tl.math.log2(total)
''',
    },
    "attention.key_range": {
        "causal full_end = q_start, not capped at the whole key blocks (ragged block unmasked when Sk < q_start)": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    if CAUSAL:
        full_end = tl.minimum(q_start, seq_k)  # every query sees every key before q_start
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = (seq_k // BLOCK_N) * BLOCK_N
        end = seq_k
    return full_end, end
''',
        "causal end not capped at seq_k (masked blocks past the keys)": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    whole = (seq_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        full_end = tl.minimum(q_start, whole)
        end = q_start + BLOCK_M  # the masked loop drops the keys past seq_k anyway
    else:
        full_end = whole
        end = seq_k
    return full_end, end
''',
        "non-causal full_end = seq_k: the ragged last block runs unmasked": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    if CAUSAL:
        full_end = tl.minimum(q_start, (seq_k // BLOCK_N) * BLOCK_N)
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = seq_k  # no mask at all without causality
        end = seq_k
    return full_end, end
''',
        "diagonal taken as the last BLOCK_N keys of the program (wrong when BLOCK_M > BLOCK_N)": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    whole = (seq_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        # only the key block on the diagonal crosses it
        full_end = tl.minimum(q_start + BLOCK_M - BLOCK_N, whole)
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = whole
        end = seq_k
    return full_end, end
''',
    },
    "attention.online_step": {
        "no guard: a block of -inf while m is -inf gives exp(-inf - -inf) = NaN": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
''',
        "NaN guard clamps the maximum at 0 (rows of -200 underflow)": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    safe = tl.maximum(m_new, 0.0)  # never -inf, so exp never sees -inf - -inf
    l_new = l * tl.exp(m - safe) + tl.sum(tl.exp(x - safe), 0)
    return safe, l_new
''',
        "returns the guard's 0 as the running max after an all -inf block": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    m_new = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing seen yet: start from 0
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
''',
        "guard on the rescale only; the block's exp still meets -inf - -inf": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    alpha = tl.where(m == float("-inf"), 0.0, tl.exp(m - m_new))  # nothing summed yet
    l_new = l * alpha + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
''',
    },
    "attention.varlen_locate": {
        "kv_h = h % group instead of h // group": r'''
# ✏️ Exercise attention.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h % group
''',
        "nothing-to-do test is q_start <= seq_q (a block starting at the end still runs)": r'''
# ✏️ Exercise attention.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start <= seq_q, seq_k, 0)
    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h // group
''',
        "k_lo read from cu_q (right only when every sequence has as many keys as queries)": r'''
# ✏️ Exercise attention.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - lo
    seq_k = tl.load(cu_k_ptr + b + 1) - tl.load(cu_k_ptr + b)
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    q_lo = lo.to(tl.int64)
    return q_lo, seq_q, q_lo, seq_k, h // group
''',
        "row offsets left in int32 (no .to(tl.int64))": r'''
# ✏️ Exercise attention.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    return q_lo, seq_q, k_lo, seq_k, h // group
''',
    },
    "attention.window_range": {
        "full_start from q_start + BLOCK_M - 1 - window (one key too early)": r'''
# ✏️ Exercise attention.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = tl.maximum(q_start - window + 1, 0)  # the first key query q_start sees
    start = (first // BLOCK_N) * BLOCK_N
    last_query = q_start + BLOCK_M - 1
    full_start = tl.cdiv(tl.maximum(last_query - window, 0), BLOCK_N) * BLOCK_N
    return start, full_start
''',
        "first key not clamped at 0 (start goes negative for early queries)": r'''
# ✏️ Exercise attention.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = q_start - window + 1
    start = (first // BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N
    return start, full_start
''',
        "full_start rounded down to a block instead of up": r'''
# ✏️ Exercise attention.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = tl.maximum(q_start - window + 1, 0)
    start = (first // BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = (last_first // BLOCK_N) * BLOCK_N
    return start, full_start
''',
        "start rounded up to a block (skips the block holding the window's first key)": r'''
# ✏️ Exercise attention.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = tl.maximum(q_start - window + 1, 0)
    start = tl.cdiv(first, BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N
    return start, full_start
''',
    },
}
