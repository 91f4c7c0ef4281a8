// A step of lesson 07: mma_cp_async.cu + a swizzled shared-memory layout and ldmatrix.x4 for B.
//
// A tile row is BK = 32 elements, 64 bytes: 4 chunks of 16 bytes. One ldmatrix phase reads 8
// rows at the same chunk; shared memory serves 8 bank groups of 16 bytes per cycle, and rows
// 64 bytes apart put that chunk in only 2 of them: a 4-way conflict, 4 cycles per phase. Here
// chunk c of row r is stored at chunk c ^ ((r / 2) % 4), so the 8 rows land in 8 different
// bank groups (section 1's figure). The copy and the ldmatrix addresses apply the same XOR.
// And B's fragments come two at a time (ldmatrix.x4 fills two n8 tiles): half the ldmatrix
// instructions for B. Still 32 x 32 warp tiles (the next step).
//
// Operands: A [M, K] row-major, B [K, N] column-major (b.t() contiguous), C [M, N] row-major;
// K a multiple of 8 (rows of 16 bytes), any M and N.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = __nv_bfloat16;  // example value; __half or __nv_bfloat16
constexpr int WM = 32;           // warp tile rows: a multiple of 16 (16..64)
constexpr int WN = 32;           // warp tile columns: a multiple of 16 (16..64)
constexpr int WARPS_M = 2;       // warps along M in a block
constexpr int WARPS_N = 2;       // warps along N in a block
constexpr int BK = 32;           // K slice in shared memory: a multiple of 16
constexpr int STAGES = 3;        // slots in the ring: STAGES - 1 slices in flight
// ==== kernel: everything above this line is replaced by the generated header ====

constexpr int BM = WARPS_M * WM, BN = WARPS_N * WN, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int MT = WM / 16, NT = WN / 8;  // mma tiles per warp along M and N
constexpr int VEC = 8;                    // 2-byte elements per 16-byte load
static_assert(WM % 16 == 0 && WN % 16 == 0 && BK == 32, "tiles must fit m16n8k16; x4 loads "
              "two n8 tiles of B; the swizzle below is written for 4 chunks per row");
static_assert(STAGES >= 2, "a pipeline needs a slot to compute on and one to fill");

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
// .x4 reads four matrices: a 16x16 A tile, or two 16x8 B tiles (stored n-major, k inside).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// new in mma_swizzle: the swizzle, chunk index XOR (r / 2) % 4
// Element offset, in a row of BK, of the 8-element chunk `chunk` of row `r`: eight consecutive
// rows then cover all 8 bank groups.
__device__ __forceinline__ int swizzled(int r, int chunk) { return (chunk ^ ((r / 2) % 4)) * VEC; }

// new in mma_cp_async: cp.async, 16 bytes global -> shared without registers
// (src_bytes = 0 writes zeros and reads nothing)
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(addr), "l"(src),
                 "r"(valid ? 16 : 0));
}
// a group: the copies issued since the last commit; wait_group N: at most N groups in flight
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N));
}

__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// Copy a rows x BK tile of a K-major matrix (row r starts at src + r * K) into dst[rows][BK],
// 16 bytes per copy, issued and not waited for. Rows past `rows_left` and k past K are zero:
// zeros add nothing to the dot products, so the mma loop runs on full tiles at the edges too.
template <int ROWS>
__device__ __forceinline__ void load_tile(scalar_t (*dst)[BK], const scalar_t* src, int rows_left,
                                          int k0, int K) {
    for (int i = threadIdx.x; i < ROWS * BK / VEC; i += THREADS) {
        const int r = i / (BK / VEC), k = (i % (BK / VEC)) * VEC;
        const bool valid = r < rows_left && k0 + k < K;  // K % 8 == 0: all inside or all outside
        // new in mma_cp_async: the copy goes straight to shared memory, not waited for
        // (a zero-fill still needs a readable address: the start of the tile)
        cp_async_16(&dst[r][swizzled(r, k / VEC)], valid ? src + (long long)r * K + k0 + k : src,
                    valid);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
matmul_mma_swizzle(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                   scalar_t* __restrict__ c, int M, int N, int K) {
    // Both tiles K-major, rows of BK elements (64 bytes), chunks swizzled within each row.
    // new in mma_cp_async: a ring of STAGES slots per operand (24 KB with the defaults)
    __shared__ __align__(16) scalar_t as[STAGES][BM][BK];
    __shared__ __align__(16) scalar_t bs[STAGES][BN][BK];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;  // warp tile in block
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    const int slices = (K + BK - 1) / BK;
    auto load_slice = [&](int slice) {  // one commit group per slice
        load_tile<BM>(as[slice % STAGES], a + (long long)m0 * K, M - m0, slice * BK, K);
        load_tile<BN>(bs[slice % STAGES], b + (long long)n0 * K, N - n0, slice * BK, K);
    };
    // new in mma_cp_async: a prologue puts STAGES - 1 slices in flight before any math
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load_slice(s);
        cp_async_commit();  // an empty group near the end keeps the count uniform
    }

    float acc[MT][NT][4] = {};
    for (int slice = 0; slice < slices; ++slice) {
        // new in mma_cp_async: wait for this slice only, then refill the oldest slot
        // (STAGES - 2 younger groups may still fly). One barrier: every thread's copies have
        // landed, and every warp is done with slice - 1, whose slot the refill overwrites
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (slice + STAGES - 1 < slices) load_slice(slice + STAGES - 1);
        cp_async_commit();
        const int s = slice % STAGES;

#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // A: lanes 0-15 give rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15.
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int r = wm + i * 16 + lane % 16;
                ldmatrix_x4(af[i], &as[s][r][swizzled(r, kk / VEC + lane / 16)]);
            }
            // new in mma_swizzle: B two tiles at a time, swizzled addresses for both
            // Lanes 0-7 give columns 0-7 of tile j at k 0-7, lanes 8-15 the same columns at
            // k 8-15, lanes 16-31 the same for tile j + 1.
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                const int r = wn + j * 8 + (lane / 16) * 8 + lane % 8;
                unsigned q[4];
                ldmatrix_x4(q, &bs[s][r][swizzled(r, kk / VEC + (lane / 8) % 2)]);
                bf[j][0] = q[0]; bf[j][1] = q[1]; bf[j + 1][0] = q[2]; bf[j + 1][1] = q[3];
            }
            // Every A fragment meets every B fragment: MT * NT mmas per 16-wide k step.
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_16816(acc[i][j], af[i], bf[j], scalar_t{});
        }
    }
    cp_async_wait<0>();  // no copy may still be writing shared memory when the block exits

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
