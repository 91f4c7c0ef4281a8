"""Wrong answers to exercise patterns.block_scan, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "patterns.block_scan"
BLIND: dict[str, str] = {
    "the global index is computed as a 32-bit unsigned product (blockIdx.x * blockDim.x) before widening to long long: it wraps once n passes 2^32": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    float before = 0.0f;
    for (int w = 0; w < warp; ++w) before += totals[w];
    if (i < n) y[i] = v + before;
}
"""
''',
    "tail threads load x[min(i, n - 1)] and zero it afterwards: with n == 0 every thread reads x[-1]": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // every lane loads something (no divergence), the lanes past the end then scan a 0
    float v = x[i < n ? i : n - 1];
    if (i >= n) v = 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    float before = 0.0f;
    for (int w = 0; w < warp; ++w) before += totals[w];
    if (i < n) y[i] = v + before;
}
"""
''',
    "tail threads return after the warp shuffles but before __syncthreads: the barrier is not reached by every thread of the last block": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    // every lane has done its shuffles; lanes past n are not needed any more
    if (i >= n) return;
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    float before = 0.0f;
    for (int w = 0; w < warp; ++w) before += totals[w];
    y[i] = v + before;
}
"""
''',
    "the prefix of the warps' totals is accumulated in __half (fp16 additions): rounded to 11 bits, and inf past 65504": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    __half before = __float2half(0.0f);  // at most 7 totals to add: half is plenty
    for (int w = 0; w < warp; ++w) before = __hadd(before, __float2half(totals[w]));
    if (i < n) y[i] = v + __half2float(before);
}
"""
''',
    "warp 0 scans the 8 warp totals in place in shared memory, but the second __syncthreads (before the other warps read their prefix) is missing": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    // warp 0 turns the 8 totals into their exclusive prefix, with shuffles too
    if (warp == 0) {
        const float t = lane < 8 ? totals[lane] : 0.0f;
        float s = t;
        for (int offset = 1; offset < 8; offset *= 2) {
            const float below = __shfl_up_sync(0xffffffffu, s, offset);
            if (lane >= offset) s += below;
        }
        if (lane < 8) totals[lane] = s - t;
    }
    if (i < n) y[i] = v + totals[warp];
}
"""
''',
    "the warps' prefix is taken inclusive (totals of warps 0..mine) and then my own warp's total is subtracted: cancellation, not a sum of the earlier values": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    float upto = 0.0f;  // totals of warps 0..warp, then remove my own: the warps before mine
    for (int w = 0; w <= warp; ++w) upto += totals[w];
    if (i < n) y[i] = v + (upto - totals[warp]);
}
"""
''',
    "threads past n return at the top, before the shuffles (the last warp's collectives miss lanes)": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    float before = 0.0f;
    for (int w = 0; w < warp; ++w) before += totals[w];
    y[i] = v + before;
}
"""
''',
    "the store guard uses the tail length n % 256 in every block, not only in the last one: the earlier tiles of a ragged n lose their stores past that length": r'''
# ✏️ Exercise patterns.block_scan: edit this cell, run it, then run the check below
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long base = (long long)blockIdx.x * 256;
    const long long i = base + threadIdx.x;
    // how many elements this tile holds: 256, or fewer in a ragged tail
    const long long valid = (n % 256 == 0) ? 256 : n % 256;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += below;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    float before = 0.0f;
    for (int w = 0; w < warp; ++w) before += totals[w];
    if (threadIdx.x < valid) y[i] = v + before;
}
"""
''',
}

# Computes exactly what the statement asks: a thread that has exited does not hold up a
# barrier (PTX ISA, `exit`: "if the exiting threads are holding up the barrier, the barrier is
# released"), and the statement asks only that every lane reach the shuffles.
EQUIVALENT: dict[str, str] = {
    "tail threads return after the warp shuffles but before __syncthreads: the barrier is not "
    "reached by every thread of the last block":
        "exited threads release a barrier (PTX ISA, exit); the statement asks every lane to "
        "reach the shuffles, which these do, and the values are the solution's on every input",
}
