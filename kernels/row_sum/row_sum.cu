// Row sums for NVRTC: y[r] = x[r, 0] + x[r, 1] + ... in float32, two ways.
//
// row_sum_warp: one warp (32 threads) per row. Lane l adds columns l, l + 32, l + 64, ...
//   (neighbouring lanes read neighbouring addresses: coalesced), then the 32 partial sums are
//   added by a butterfly of __shfl_down_sync: in 5 steps, register to register, no memory.
// row_sum_block: one block of BLOCK threads per row, for long rows. Each warp reduces its
//   partial sums with shuffles as above; the BLOCK / 32 warp sums meet in shared memory
//   (after a __syncthreads), where the first warp adds them up with shuffles again.
//
// Everything above the marker line is for the editor only: course_utils.nvrtc replaces it by a
// header generated from Python values (scalar_t from the tensor's dtype, BLOCK).
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = float;     // example value; the generated header sets it from x's dtype
constexpr int BLOCK = 256;  // threads per block; the launch must use the same number
// ==== kernel: everything above this line is replaced by the generated header ====

constexpr int WARP = 32;
constexpr unsigned FULL_MASK = 0xffffffffu;  // all 32 lanes take part in each shuffle

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// The sum of `v` over the 32 lanes of a warp, in lane 0. Step by step, lane l adds the value
// of lane l + 16, then l + 8, 4, 2, 1: after 5 steps lane 0 holds all 32 (other lanes hold
// partial sums nobody reads).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) {
        v += __shfl_down_sync(FULL_MASK, v, offset);
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
row_sum_warp(const scalar_t* __restrict__ x, float* __restrict__ y, long long rows,
             long long cols, long long row_stride) {
    const long long row = blockIdx.x * (long long)(BLOCK / WARP) + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    // a whole warp leaves together (row is the same for its 32 lanes), so every lane that
    // reaches a shuffle below has all its neighbours with it: FULL_MASK is true
    if (row >= rows) return;
    const scalar_t* line = x + row * row_stride;
    float sum = 0.0f;
#pragma unroll 4
    for (long long c = lane; c < cols; c += WARP) sum += to_float(line[c]);
    sum = warp_sum(sum);
    if (lane == 0) y[row] = sum;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
row_sum_block(const scalar_t* __restrict__ x, float* __restrict__ y, long long cols,
              long long row_stride) {
    __shared__ float warp_sums[BLOCK / WARP];
    const scalar_t* line = x + blockIdx.x * row_stride;  // one block per row
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    float sum = 0.0f;
#pragma unroll 4
    for (long long c = threadIdx.x; c < cols; c += BLOCK) sum += to_float(line[c]);
    sum = warp_sum(sum);
    if (lane == 0) warp_sums[warp] = sum;  // one shared-memory store per warp
    __syncthreads();  // every warp's sum is written before the first warp reads them
    if (warp == 0) {
        sum = lane < BLOCK / WARP ? warp_sums[lane] : 0.0f;
        sum = warp_sum(sum);
        if (lane == 0) y[blockIdx.x] = sum;
    }
}
