// Warp divergence, measured (lesson 04): two kernels doing the same work per thread, ITERS
// steps of __sinf or of __cosf (one special-function instruction each, MUFU.SIN / MUFU.COS, the
// same cost), chosen by a branch.
//
// branch_lane: the branch depends on the lane (threadIdx.x % 2). Every warp holds both kinds of
//   thread, so it runs the sine loop with its odd lanes switched off, then the cosine loop with
//   its even lanes off: twice the time of one loop.
// branch_warp: the branch depends on the warp ((threadIdx.x / 32) % 2). All 32 lanes of a warp
//   agree, so each warp runs one loop: half the warps take each side, and no time is lost.
// Both compile to the same branch in SASS (BSSY ... BRA ... BSYNC: the warp splits at the BRA
// and its lanes wait for each other at the BSYNC); only at run time do the lanes disagree.
//
// Everything above the marker line is for the editor only (see kernels/add/add.cu).
constexpr int ITERS = 256;  // steps per thread: enough work that the branch, not memory, counts
// ==== kernel: everything above this line is replaced by the generated header ====

__device__ __forceinline__ float sine_steps(float v) {
#pragma unroll 8
    for (int k = 0; k < ITERS; ++k) v = __sinf(v) + 0.5f;
    return v;
}

__device__ __forceinline__ float cosine_steps(float v) {
#pragma unroll 8
    for (int k = 0; k < ITERS; ++k) v = __cosf(v) + 0.5f;
    return v;
}

extern "C" __global__ void branch_lane(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    y[i] = threadIdx.x % 2 == 0 ? sine_steps(v) : cosine_steps(v);  // lanes disagree
}

extern "C" __global__ void branch_warp(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    y[i] = (threadIdx.x / 32) % 2 == 0 ? sine_steps(v) : cosine_steps(v);  // a warp agrees
}
