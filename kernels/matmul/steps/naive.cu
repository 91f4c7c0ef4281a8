// Steps 1-3 of lesson 07: C = A @ B with one thread per output element, accumulating in fp32.
//
// Operands as torch's low-precision matmuls take them (both "K-major"):
//   A [M, K] row-major:     A(m, k) = a[m * K + k]
//   B [K, N] column-major:  B(k, n) = b[n * K + k]   (b.t() is contiguous)
//   C [M, N] row-major, in the inputs' dtype.
// The generated header sets scalar_t from the tensors' dtype and the block shape from Python
// (kernels/matmul/steps/__init__.py launches with the same numbers).
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = __nv_bfloat16;  // example value; float, __half or __nv_bfloat16
constexpr int BLOCK_X = 32;      // threads along N: a warp covers 32 / BLOCK_X rows x BLOCK_X columns
constexpr int BLOCK_Y = 8;       // threads along M
// ==== kernel: everything above this line is replaced by the generated header ====

// Products in fp32 whatever the input type: the same accumulator a tensor core uses for
// bf16/fp16, so the steps differ in speed, not in what they compute.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
matmul_naive(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
             scalar_t* __restrict__ c, int M, int N, int K) {
    const int n = blockIdx.x * BLOCK_X + threadIdx.x;
    const int m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;  // the edge blocks hang over the matrix: those threads idle

    // Each thread walks one row of A and one column of B from start to end. Per step of k, a
    // warp reads one element of A (the same address for all 32 threads: a broadcast) and 32
    // elements of B that lie K elements apart: 32 separate memory transactions for 64 bytes of
    // bf16. Every element of A and B is fetched again by every thread that needs it (N times
    // for A, M times for B); only the caches stand between this kernel and DRAM. Step 4 stages
    // tiles in shared memory so each element is fetched once per block.
    const scalar_t* row = a + (long long)m * K;
    const scalar_t* col = b + (long long)n * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += to_float(row[k]) * to_float(col[k]);
    store(&c[(long long)m * N + n], acc);
}
