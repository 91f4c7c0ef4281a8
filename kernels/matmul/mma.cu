// C = A @ B on the tensor cores with mma.sync: one source for every dtype variant.
//
// A is [M, K] row-major and B is [K, N] column-major, so both are "K-major": each row of A and
// each column of B is K contiguous elements. C is [M, N] row-major.
//
// The kernel is written in BYTES, not elements. Every mma.sync variant on sm_80+ reads its A
// fragment as a 16 x 32-byte tile and its B fragment as a 32-byte x 8 tile, whatever the type:
//     bf16/fp16 m16n8k16 (16 x 2 B), tf32 m16n8k8 (8 x 4 B), fp8/int8 m16n8k32 (32 x 1 B),
//     int4 m16n8k64 (64 x 4 bits)
// and the thread that holds a register holds the same BYTES of it in every case. So loading
// (cp.async), the shared-memory layout (swizzle) and ldmatrix are type-agnostic byte moves; only
// the one mma instruction and the epilogue's conversion depend on the types. Compare
// kernels/matmul/steps/mma_simple.cu, the same idea without the pipeline.
//
// The pieces, from global memory to the tensor cores:
//   1. thread-block tile BM x BN of C; the K loop walks it in slices of BK_BYTES bytes
//   2. a STAGES-deep ring of shared-memory slices, filled by cp.async (global -> shared without
//      registers) while the tensor cores work on an older slice; each thread's source addresses
//      are worked out once, before the K loop
//   3. shared memory swizzled: the 16-byte chunk `c` of row `r` is stored at chunk
//      c ^ ((r / (8 / CHUNKS)) % CHUNKS), so the 8 rows one ldmatrix phase reads hit 8
//      different 16-byte bank groups (without it, rows 64 or 128 bytes apart share banks)
//   4. each warp owns a WM x WN tile of C: per 32-byte k-step it ldmatrix-loads MI A fragments
//      and NI B fragments, and issues MI x NI mma.sync (each fragment feeds several mma)
//   5. the epilogue converts the accumulators to out_t and stores them in pairs, predicated at
//      the M and N edges
//
// Everything above the marker is for the editor. kernels/matmul/mma.py generates the real header
// from Python (types from the variant, tile sizes from the config); these are example values.
//
// nvrtc example: mma_matmul
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
using a_t = __nv_bfloat16;  // storage type of A's elements (int4: signed char, two per byte)
using b_t = __nv_bfloat16;  // storage type of B's elements
using acc_t = float;        // accumulator: float, __half or int
using out_t = __nv_bfloat16;
constexpr bool INT4 = false;  // operands are packed 4-bit integers (low nibble first)
constexpr int BM = 128;            // thread-block tile of C: BM x BN
constexpr int BN = 128;
constexpr int WM = 64;             // warp tile of C: WM x WN
constexpr int WN = 64;
constexpr int BK_BYTES = 64;       // K slice per pipeline stage, in bytes (64 or 128)
constexpr int STAGES = 4;          // shared-memory ring depth
constexpr int GROUP_M = 8;         // block rows that share B tiles in L2 (launch order)
constexpr bool VARY_OPERANDS = true;  // mma_ceiling only: change operands every iteration
// ==== kernel: everything above this line is replaced by the generated header ====

using u32 = cuda::std::uint32_t;
using i64 = cuda::std::int64_t;

constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int CHUNKS = BK_BYTES / 16;      // 16-byte chunks per row of a shared-memory slice
constexpr int KSTEPS = BK_BYTES / 32;      // mma k-steps per slice (each reads 32 bytes of K)
constexpr int MI = WM / 16, NI = WN / 8;   // mma tiles per warp tile (m16 x n8 each)
constexpr int A_SLICE = BM * BK_BYTES, B_SLICE = BN * BK_BYTES;  // bytes per stage
constexpr int ACC_REGS = cuda::std::is_same_v<acc_t, __half> ? 2 : 4;  // per m16n8 tile/thread
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "tile shapes");
static_assert(BK_BYTES == 64 || BK_BYTES == 128, "the swizzle below assumes 4 or 8 chunks");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");
static_assert(KSTEPS % 2 == 0, "double-buffered fragments alternate per k-step");

// ---- 1. shared-memory layout ----------------------------------------------------------------
// Byte offset of 16-byte chunk `chunk` of row `row` in a slice. ldmatrix reads 8 rows at the same
// logical chunk; a row is BK_BYTES (64 or 128) long, so without the XOR those 8 addresses would
// fall into 2 (or 1) of the 8 bank groups of 16 bytes: a 4-way (8-way) conflict.
__device__ __forceinline__ int swizzled(int row, int chunk) {
    return row * BK_BYTES + ((chunk ^ ((row / (8 / CHUNKS)) % CHUNKS)) << 4);
}

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- 2. global -> shared, asynchronously ----------------------------------------------------
// 16 bytes per thread per call; src_bytes = 0 writes zeros instead of reading (the M/N/K edges:
// a zero contributes nothing to the dot products, so edge tiles need no other special case).
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// One operand's share of a K slice, [ROWS rows x BK_BYTES] of a K-major matrix, copied into a
// swizzled slice: ROWS x CHUNKS chunks spread over the block's threads so that consecutive
// threads read consecutive 16-byte chunks. Everything that does not change along K (which rows
// and chunk this thread copies, where they land, whether the row exists) is worked out once,
// before the K loop: per slice a copy is then one add and one cp.async, which keeps the
// instruction stream between the tensor-core instructions short.
template <int ROWS>
struct SliceCopier {
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
    static constexpr int ROUNDS = ROWS * CHUNKS / THREADS;
    // THREADS is a multiple of CHUNKS, so a thread copies the same chunk column in every round,
    // ROW_STEP rows apart
    static constexpr int ROW_STEP = THREADS / CHUNKS;
    const char* src[ROUNDS];  // this thread's chunk in each of its rows (row 0 if past the edge)
    bool row_ok[ROUNDS];
    u32 dst;                  // swizzled offset of the first round's chunk in a slice
    int chunk_byte;

    __device__ __forceinline__ SliceCopier(const char* base, int rows_left, i64 row_bytes) {
        const int row = threadIdx.x / CHUNKS, chunk = threadIdx.x % CHUNKS;
        chunk_byte = chunk * 16;
        dst = swizzled(row, chunk);
#pragma unroll
        for (int n = 0; n < ROUNDS; ++n) {
            const int r = row + n * ROW_STEP;
            row_ok[n] = r < rows_left;
            src[n] = base + (row_ok[n] ? r * row_bytes : 0) + chunk_byte;
        }
    }

    // Where round n's chunk lands. The swizzle repeats every 8 rows, so with 2 warps or more
    // (ROW_STEP a multiple of 8) it is the first round's offset moved down by whole rows.
    __device__ __forceinline__ u32 dst_of(int n) const {
        if constexpr (ROW_STEP % 8 == 0) return dst + n * ROW_STEP * BK_BYTES;
        else return swizzled(threadIdx.x / CHUNKS + n * ROW_STEP, threadIdx.x % CHUNKS);
    }

    // Copy the slice that starts at byte k_byte of every row into the slice at `slice`.
    __device__ __forceinline__ void copy(u32 slice, i64 k_byte, i64 k_bytes) const {
        const bool k_ok = k_byte + chunk_byte < k_bytes;  // the K edge: past it, zeros
#pragma unroll
        for (int n = 0; n < ROUNDS; ++n) {
            const bool valid = row_ok[n] && k_ok;
            // a zero-filling copy still gets a readable address: the start of a real row
            cp_async_16(slice + dst_of(n), valid ? src[n] + k_byte : src[n], valid);
        }
    }
};

// ---- 3. shared -> registers: ldmatrix --------------------------------------------------------
// ldmatrix.x4 loads four 8 x 16-byte matrices; lane l gives the row address of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// ---- 4. the tensor-core instruction, chosen by type ------------------------------------------
// d += a * b for one m16n8 tile. a: 4 registers (16 x 32 bytes), b: 2 registers (32 bytes x 8).
template <typename T>
constexpr bool is_e4m3 = cuda::std::is_same_v<T, __nv_fp8_e4m3>;
template <typename T>
constexpr bool is_e5m2 = cuda::std::is_same_v<T, __nv_fp8_e5m2>;

#define MMA_F32(shape_types)                                                                  \
    asm volatile("mma.sync.aligned." shape_types                                             \
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"         \
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define MMA_F16(shape_types)                                                                  \
    asm volatile("mma.sync.aligned." shape_types                                             \
                 " {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"                         \
                 : "+r"(d[0]), "+r"(d[1])                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

// Accumulators live in 32-bit registers whatever acc_t is (float, int, or two halves): PTX lets a
// .b32 register stand for any 32-bit type, which keeps one code path for every variant.
// (A template, so that only the branch of the compiled variant is instantiated.)
template <typename A = a_t, typename B = b_t, typename Acc = acc_t>
__device__ __forceinline__ void mma(u32 (&d)[ACC_REGS], const u32 (&a)[4], const u32 (&b)[2]) {
    if constexpr (cuda::std::is_same_v<Acc, __half>) {
        if constexpr (cuda::std::is_same_v<A, __half>) MMA_F16("m16n8k16.row.col.f16.f16.f16.f16");
        else if constexpr (is_e4m3<A> && is_e4m3<B>) MMA_F16("m16n8k32.row.col.f16.e4m3.e4m3.f16");
        else if constexpr (is_e4m3<A> && is_e5m2<B>) MMA_F16("m16n8k32.row.col.f16.e4m3.e5m2.f16");
        else if constexpr (is_e5m2<A> && is_e4m3<B>) MMA_F16("m16n8k32.row.col.f16.e5m2.e4m3.f16");
        else if constexpr (is_e5m2<A> && is_e5m2<B>) MMA_F16("m16n8k32.row.col.f16.e5m2.e5m2.f16");
        else static_assert(sizeof(A) == 0, "no f16-accumulating mma for these operand types");
    } else if constexpr (cuda::std::is_same_v<Acc, int>) {
        if constexpr (INT4) MMA_F32("m16n8k64.row.col.s32.s4.s4.s32");
        else MMA_F32("m16n8k32.row.col.s32.s8.s8.s32");
    } else {
        if constexpr (cuda::std::is_same_v<A, __nv_bfloat16>) MMA_F32("m16n8k16.row.col.f32.bf16.bf16.f32");
        else if constexpr (cuda::std::is_same_v<A, __half>) MMA_F32("m16n8k16.row.col.f32.f16.f16.f32");
        // tf32 reads the top 19 bits of each float: the low mantissa bits are ignored (truncated)
        else if constexpr (cuda::std::is_same_v<A, float>) MMA_F32("m16n8k8.row.col.f32.tf32.tf32.f32");
        else if constexpr (is_e4m3<A> && is_e4m3<B>) MMA_F32("m16n8k32.row.col.f32.e4m3.e4m3.f32");
        else if constexpr (is_e4m3<A> && is_e5m2<B>) MMA_F32("m16n8k32.row.col.f32.e4m3.e5m2.f32");
        else if constexpr (is_e5m2<A> && is_e4m3<B>) MMA_F32("m16n8k32.row.col.f32.e5m2.e4m3.f32");
        else if constexpr (is_e5m2<A> && is_e5m2<B>) MMA_F32("m16n8k32.row.col.f32.e5m2.e5m2.f32");
        else static_assert(sizeof(A) == 0, "no f32-accumulating mma for these operand types");
    }
}

// ---- 5. epilogue: accumulator registers -> out_t pairs in C ----------------------------------
__device__ __forceinline__ void store_pair(float* p, float x, float y, bool both) {
    if (both) *reinterpret_cast<float2*>(p) = make_float2(x, y); else *p = x;
}
__device__ __forceinline__ void store_pair(int* p, int x, int y, bool both) {
    if (both) *reinterpret_cast<int2*>(p) = make_int2(x, y); else *p = x;
}
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float x, float y, bool both) {
    if (both) *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
    else *p = __float2bfloat16_rn(x);
}
__device__ __forceinline__ void store_pair(__half* p, float x, float y, bool both) {
    if (both) *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y); else *p = __float2half_rn(x);
}
__device__ __forceinline__ void store_pair(__half* p, __half2 xy, bool both) {
    if (both) *reinterpret_cast<__half2*>(p) = xy; else *p = __low2half(xy);
}

// Register h of an m16n8 accumulator tile holds row g (+8 for the second half) and columns 2t,
// 2t + 1, where g = lane / 4 and t = lane % 4.
template <typename Out = out_t, typename Acc = acc_t>
__device__ __forceinline__ void store_tile(Out* C, const u32 (&d)[ACC_REGS], int row, int col,
                                           int M, int N, bool pairs_aligned) {
#pragma unroll
    for (int half_rows = 0; half_rows < 2; ++half_rows) {
        const int r = row + half_rows * 8;
        if (r >= M || col >= N) continue;
        Out* p = C + static_cast<i64>(r) * N + col;
        const bool both = pairs_aligned && col + 1 < N;
        if constexpr (cuda::std::is_same_v<Acc, __half>) {
            const __half2 xy = *reinterpret_cast<const __half2*>(&d[half_rows]);
            if constexpr (cuda::std::is_same_v<Out, __half>) {
                store_pair(p, xy, both);
                if (!both && col + 1 < N) p[1] = __high2half(xy);
            } else {
                static_assert(sizeof(Out) == 0, "f16 accumulators are stored as __half");
            }
        } else {
            if constexpr (cuda::std::is_same_v<Acc, int>) {
                const int x = static_cast<int>(d[2 * half_rows]), y = static_cast<int>(d[2 * half_rows + 1]);
                store_pair(p, x, y, both);
                if (!both && col + 1 < N) store_pair(p + 1, y, y, false);
            } else {
                const float x = __uint_as_float(d[2 * half_rows]), y = __uint_as_float(d[2 * half_rows + 1]);
                store_pair(p, x, y, both);
                if (!both && col + 1 < N) store_pair(p + 1, y, y, false);
            }
        }
    }
}

// ---- the kernel ------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS, 1)
mma_matmul(const a_t* __restrict__ A, const b_t* __restrict__ B, out_t* __restrict__ C,
           int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    const u32 a_smem = smem_addr(smem), b_smem = a_smem + STAGES * A_SLICE;

    // Launch order: GROUP_M block-rows side by side, so that blocks running at the same time
    // reuse the same B tiles (and A tiles) from L2 instead of streaming all of B per row.
    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;
    const int per_group = GROUP_M * grid_n, group = blockIdx.x / per_group;
    const int first_m = group * GROUP_M, group_rows = min(grid_m - first_m, GROUP_M);
    const int block_m = first_m + (blockIdx.x % per_group) % group_rows;
    const int block_n = (blockIdx.x % per_group) / group_rows;

    // Sizes in bytes: K elements of a_t (two per byte for int4).
    const i64 k_bytes = INT4 ? K / 2 : static_cast<i64>(K) * sizeof(a_t);
    const char* a_base = reinterpret_cast<const char*>(A) + block_m * BM * k_bytes;
    const char* b_base = reinterpret_cast<const char*>(B) + block_n * BN * k_bytes;
    const int a_rows = M - block_m * BM, b_rows = N - block_n * BN;
    const int slices = static_cast<int>((k_bytes + BK_BYTES - 1) / BK_BYTES);

    const SliceCopier<BM> a_copier(a_base, a_rows, k_bytes);
    const SliceCopier<BN> b_copier(b_base, b_rows, k_bytes);
    auto load_stage = [&](int slice) {
        const int slot = slice % STAGES;
        a_copier.copy(a_smem + slot * A_SLICE, static_cast<i64>(slice) * BK_BYTES, k_bytes);
        b_copier.copy(b_smem + slot * B_SLICE, static_cast<i64>(slice) * BK_BYTES, k_bytes);
    };

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_m = (warp / WARPS_N) * WM, warp_n = (warp % WARPS_N) * WN;

    // Where this lane's ldmatrix rows start. A: lanes 0-15 give rows 0-15 of an m16 tile at the
    // k-step's first 16 bytes, lanes 16-31 the same rows at its second 16 bytes. B: lanes 0-7 and
    // 8-15 give the 8 rows (n) of tile j at the two 16-byte halves, lanes 16-31 those of tile
    // j + 1. Moving by 16 rows keeps the swizzle pattern, so the XOR below is computed once, here,
    // instead of for every ldmatrix in the loop.
    const int a_row = warp_m + lane % 16, b_row = warp_n + (lane / 16) * 8 + lane % 8;
    u32 a_off[KSTEPS], b_off[KSTEPS];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
        a_off[ks] = swizzled(a_row, 2 * ks + lane / 16);
        b_off[ks] = swizzled(b_row, 2 * ks + (lane / 8) % 2);
    }

    // Fragments are double-buffered: the ldmatrix of the next k-step is issued before the mma of
    // this one, so its latency hides behind 32 tensor-core instructions instead of stalling.
    u32 a[2][MI][4], b[2][NI][2];
    auto load_fragments = [&](int buf, int slot, int ks) {
        const u32 a_slot = a_smem + slot * A_SLICE + a_off[ks];
        const u32 b_slot = b_smem + slot * B_SLICE + b_off[ks];
#pragma unroll
        for (int i = 0; i < MI; ++i) ldmatrix_x4(a[buf][i], a_slot + i * 16 * BK_BYTES);
#pragma unroll
        for (int j = 0; j < NI; j += 2) {
            u32 r[4];
            ldmatrix_x4(r, b_slot + j * 8 * BK_BYTES);
            b[buf][j][0] = r[0]; b[buf][j][1] = r[1]; b[buf][j + 1][0] = r[2]; b[buf][j + 1][1] = r[3];
        }
    };

    u32 acc[MI][NI][ACC_REGS] = {};

    // Prologue: STAGES - 1 slices in flight, then the first fragments of slice 0.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load_stage(s);
        cp_async_commit();  // an empty group keeps the count uniform near the end
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_fragments(0, 0, 0);

    for (int slice = 0; slice < slices; ++slice) {
        // Refill the slot of slice - 1: every warp finished reading it before the barrier at the
        // end of the previous slice.
        if (slice + STAGES - 1 < slices) load_stage(slice + STAGES - 1);
        cp_async_commit();
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            if (ks < KSTEPS - 1) {
                load_fragments((ks + 1) % 2, slice % STAGES, ks + 1);
            } else {
                // Last k-step: the next slice must have landed (at most STAGES - 2 younger copy
                // groups still in flight) before any warp reads its first fragments.
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                if (slice + 1 < slices) load_fragments((ks + 1) % 2, (slice + 1) % STAGES, 0);
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma(acc[i][j], a[ks % 2][i], b[ks % 2][j]);
        }
    }
    cp_async_wait<0>();  // no copy may still target shared memory when the block exits

    const int g = lane / 4, t = lane % 4;
    const bool pairs_aligned = N % 2 == 0;  // row starts keep 2-element stores aligned
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
            store_tile(C, acc[i][j], block_m * BM + warp_m + i * 16 + g,
                       block_n * BN + warp_n + j * 8 + 2 * t, M, N, pairs_aligned);
}

// ---- the instruction's own ceiling -----------------------------------------------------------
// How fast can mma() go with no memory traffic at all? Each warp keeps CEIL_A x CEIL_B
// independent accumulator chains (enough to hide the instruction's latency). With VARY_OPERANDS
// it changes its operand registers every iteration: with loop-invariant operands the compiler
// hoists an emulated instruction's conversions out of the loop (fp8 on sm_90) and reports a rate
// no real matmul can see. For a native instruction there is nothing to hoist, and the invariant
// loop (VARY_OPERANDS = false) measures the instruction alone. Launched with several warps per
// SM; the result is written so nothing is dead.
constexpr int CEIL_A = 4, CEIL_B = 4;

extern "C" __global__ void mma_ceiling(u32* __restrict__ out, int iterations) {
    u32 a[CEIL_A][4], b[CEIL_B][2];
#pragma unroll
    for (int i = 0; i < CEIL_A; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) a[i][r] = 0x3c003c00u ^ (threadIdx.x * 2654435761u + i * 4 + r);
#pragma unroll
    for (int j = 0; j < CEIL_B; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r) b[j][r] = 0x3c003c00u ^ (threadIdx.x * 40503u + j * 2 + r);
    u32 acc[CEIL_A][CEIL_B][ACC_REGS] = {};
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int i = 0; i < CEIL_A; ++i)
#pragma unroll
            for (int j = 0; j < CEIL_B; ++j) mma(acc[i][j], a[i], b[j]);
        if constexpr (VARY_OPERANDS) {
#pragma unroll
            for (int i = 0; i < CEIL_A; ++i)
#pragma unroll
                for (int r = 0; r < 4; ++r) a[i][r] ^= it;
#pragma unroll
            for (int j = 0; j < CEIL_B; ++j)
#pragma unroll
                for (int r = 0; r < 2; ++r) b[j][r] ^= it;
        }
    }
    u32 sum = 0;
#pragma unroll
    for (int i = 0; i < CEIL_A; ++i)
#pragma unroll
        for (int j = 0; j < CEIL_B; ++j)
#pragma unroll
            for (int r = 0; r < ACC_REGS; ++r) sum ^= acc[i][j][r];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
