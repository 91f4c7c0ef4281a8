// Step 9 of lesson 07: a first tensor-core matmul with mma.sync (bf16 or fp16 in, fp32
// accumulate): the full kernel's structure without its speed tricks.
//
//   block tile BM x BN = (WARPS_M * WM) x (WARPS_N * WN); each warp owns a WM x WN tile of C
//   warp tile          = (WM / 16) x (WN / 8) mma tiles of 16 x 8, accumulated in registers
//   K loop             in slices of BK: global -> shared (plain 16-byte loads), __syncthreads,
//                      then per 16-wide k step: ldmatrix A and B fragments, one mma per tile
//
// What the full kernel (kernels/matmul/mma.cu) adds: cp.async with several stages in flight so
// loads overlap the math, a swizzled shared layout (this one has bank conflicts: see below),
// ldmatrix.x4 for B, and larger warp tiles. Compare the two SASS censuses in the notebook.
//
// Operands: A [M, K] row-major, B [K, N] column-major (b.t() contiguous), C [M, N] row-major;
// K a multiple of 8 (rows of 16 bytes), any M and N.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = __nv_bfloat16;  // example value; __half or __nv_bfloat16
constexpr int WM = 32;           // warp tile rows: a multiple of 16 (16..64)
constexpr int WN = 32;           // warp tile columns: a multiple of 8 (8..64)
constexpr int WARPS_M = 2;       // warps along M in a block
constexpr int WARPS_N = 2;       // warps along N in a block
constexpr int BK = 32;           // K slice in shared memory: a multiple of 16
// ==== kernel: everything above this line is replaced by the generated header ====

constexpr int BM = WARPS_M * WM, BN = WARPS_N * WN, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int MT = WM / 16, NT = WN / 8;  // mma tiles per warp along M and N
constexpr int VEC = 8;                    // 2-byte elements per 16-byte load
static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 16 == 0, "tiles must fit m16n8k16");

// The instruction, one overload per input type: the tag argument picks the PTX at compile time.
// A fragment: 4 registers of 2 elements (16x16 of A); B: 2 registers (16x8); C/D: 4 floats.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2], __nv_bfloat16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2], __half) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ldmatrix: the warp reads 8x8 matrices of 2-byte elements from shared memory, each lane giving
// the address of one 16-byte row, and every lane receives the elements mma.sync expects of it.
// .x4 reads four matrices (a 16x16 A tile), .x2 two (a 16x8 B tile stored n-major, k inside).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// Copy a rows x BK tile of a K-major matrix (row r starts at src + r * K) into dst[rows][BK],
// 16 bytes per load. Rows past `rows_left` and k past K are zero: zeros add nothing to the dot
// products, so the mma loop runs on full tiles at the edges too.
template <int ROWS>
__device__ __forceinline__ void load_tile(scalar_t (*dst)[BK], const scalar_t* src, int rows_left,
                                          int k0, int K) {
    for (int i = threadIdx.x; i < ROWS * BK / VEC; i += THREADS) {
        const int r = i / (BK / VEC), k = (i % (BK / VEC)) * VEC;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < rows_left && k0 + k < K)  // K % 8 == 0: a vector is all inside or all outside
            v = *reinterpret_cast<const uint4*>(src + (long long)r * K + k0 + k);
        *reinterpret_cast<uint4*>(&dst[r][k]) = v;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
matmul_mma_simple(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                  scalar_t* __restrict__ c, int M, int N, int K) {
    // Both tiles K-major, rows of BK elements (64 bytes with the defaults). No padding, no
    // swizzle: the 8 rows one ldmatrix phase reads start 64 bytes apart, so rows r and r+2 hit
    // the same banks (a 4-way conflict). The full kernel's swizzle spreads them out.
    __shared__ __align__(16) scalar_t as[BM][BK];
    __shared__ __align__(16) scalar_t bs[BN][BK];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;  // warp tile in block
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[MT][NT][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile<BM>(as, a + (long long)m0 * K, M - m0, k0, K);
        load_tile<BN>(bs, b + (long long)n0 * K, N - n0, k0, K);
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // A: lanes 0-15 give rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15.
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i)
                ldmatrix_x4(af[i], &as[wm + i * 16 + lane % 16][kk + (lane / 16) * 8]);
            // B: lanes 0-7 give columns 0-7 at k 0-7, lanes 8-15 the same columns at k 8-15
            // (lanes 16-31 are ignored by .x2 but must hold valid addresses).
#pragma unroll
            for (int j = 0; j < NT; ++j)
                ldmatrix_x2(bf[j], &bs[wn + j * 8 + lane % 8][kk + ((lane / 8) % 2) * 8]);
            // Every A fragment meets every B fragment: MT * NT mmas per 16-wide k step.
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_16816(acc[i][j], af[i], bf[j], scalar_t{});
        }
        __syncthreads();
    }

    // C fragment of one mma tile: lane holds rows lane/4 and lane/4 + 8, columns
    // 2 * (lane % 4) and the next one.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = m0 + wm + i * 16 + lane / 4 + (e / 2) * 8;
                const int n = n0 + wn + j * 8 + (lane % 4) * 2 + e % 2;
                if (m < M && n < N) store(&c[(long long)m * N + n], acc[i][j][e]);
            }
        }
    }
}
