// Steps 4-8 of lesson 07: C = A @ B tiled through shared memory, on the fp32 FMA pipes (no tensor
// cores yet).
//
// A block computes a BM x BN tile of C. It walks K in slices of BK: the block copies a BM x BK
// slice of A and a BN x BK slice of B from global into shared memory (each element read from
// DRAM once per block, with coalesced loads), waits, and every thread then reads its operands
// from shared memory. Each thread owns a TM x TN patch of outputs in registers: per k it loads
// TM values of A and TN values of B and does TM * TN FMAs, so each shared-memory load feeds
// several FMAs (register blocking, the same idea a tensor core takes much further).
//
// Operands: A [M, K] row-major, B [K, N] column-major (b.t() contiguous), C [M, N] row-major.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = __nv_bfloat16;  // example value; float, __half or __nv_bfloat16
constexpr int BM = 64;           // block tile: rows of C
constexpr int BN = 64;           // block tile: columns of C
constexpr int BK = 32;           // K slice staged in shared memory per iteration
constexpr int TM = 4;            // outputs per thread along M
constexpr int TN = 4;            // outputs per thread along N
// ==== kernel: everything above this line is replaced by the generated header ====

constexpr int THREADS_M = BM / TM;  // threads along M (16 with the defaults)
constexpr int THREADS_N = BN / TN;  // threads along N (16)
constexpr int THREADS = THREADS_M * THREADS_N;
static_assert(BM % TM == 0 && BN % TN == 0, "the block tile must split into thread patches");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, at most 1024 threads");

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// __launch_bounds__(THREADS, 1): "at least one block per SM", i.e. use the registers you need.
// With THREADS alone, ptxas 13.0 for sm_90 aimed at full occupancy, capped the kernel at 32
// registers and spilled to local memory (the SASS census shows the STL/LDL; sm_80 was fine).
// 72-80 registers x 256 threads still fits 3 blocks (768 threads) per SM.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
matmul_smem_tiled(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                  scalar_t* __restrict__ c, int M, int N, int K) {
    // Shared tiles hold fp32 (converted once, on the way in) and are stored k-major:
    // as[k][m]. The +1 column of padding puts consecutive k of one row in different banks,
    // so the transposing store below is free of bank conflicts.
    __shared__ float as[BK][BM + 1];
    __shared__ float bs[BK][BN + 1];

    const int tid = threadIdx.x;
    const int tm = tid / THREADS_N, tn = tid % THREADS_N;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Global -> shared. Consecutive threads take consecutive k of one row of A (or one
        // column of B), which are adjacent in memory: coalesced. Outside the matrix (edges of
        // M, N or K) we store zeros, so the math below needs no bounds checks.
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, k = i % BK;
            const bool in = m0 + r < M && k0 + k < K;
            as[k][r] = in ? to_float(a[(long long)(m0 + r) * K + k0 + k]) : 0.0f;
        }
        for (int i = tid; i < BN * BK; i += THREADS) {
            const int r = i / BK, k = i % BK;
            const bool in = n0 + r < N && k0 + k < K;
            bs[k][r] = in ? to_float(b[(long long)(n0 + r) * K + k0 + k]) : 0.0f;
        }
        __syncthreads();  // the tiles are complete before anyone reads them

        // A thread's rows are tm, tm + THREADS_M, ... (strided, not adjacent): the 32 threads
        // of a warp then read 2 distinct as[] words (a broadcast) and 16 adjacent bs[] words.
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float av[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) av[i] = as[k][tm + i * THREADS_M];
#pragma unroll
            for (int j = 0; j < TN; ++j) bv[j] = bs[k][tn + j * THREADS_N];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();  // everyone is done with the tiles before the next slice overwrites them
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + tm + i * THREADS_M;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n0 + tn + j * THREADS_N;
            if (m < M && n < N) store(&c[(long long)m * N + n], acc[i][j]);
        }
    }
}
