// The kernel of exercise nvrtc.divergence: y[i] = even_steps(x[i]) for even i and odd_steps(x[i])
// for odd i, the same work on each side (ITERS steps of __sinf, or of __cosf). Thread t, with
// t = blockIdx.x * 256 + threadIdx.x, handles element element_of(t): your function, which
// replaces the "your code" line. It is launched with 256 threads a block and ceil(n / 256)
// blocks, so the threads of block b must take exactly the elements 256 b .. 256 b + 255.
constexpr int ITERS = 256;

__device__ __forceinline__ float even_steps(float v) {
#pragma unroll 8
    for (int k = 0; k < ITERS; ++k) v = __sinf(v) + 0.5f;
    return v;
}

__device__ __forceinline__ float odd_steps(float v) {
#pragma unroll 8
    for (int k = 0; k < ITERS; ++k) v = __cosf(v) + 0.5f;
    return v;
}

// ==== your code: element_of(t) goes here

extern "C" __global__ void even_odd(const float* __restrict__ x, float* __restrict__ y,
                                    long long n) {
    const long long i = element_of(blockIdx.x * (long long)blockDim.x + threadIdx.x);
    if (i >= n) return;
    y[i] = i % 2 == 0 ? even_steps(x[i]) : odd_steps(x[i]);  // a warp may hold both kinds of i
}
