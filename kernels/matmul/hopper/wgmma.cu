// C = A @ B on Hopper (sm_90a): TMA, wgmma and warp specialisation, in three kernels that make
// the four steps of lesson 07. Read them in order; each adds one idea to the one before.
//
//   wgmma_basic        step 1: TMA copies a K tile of A and B into shared memory, one warpgroup
//                      (128 threads) multiplies it with wgmma; load, wait, compute, repeat
//   wgmma_pipelined    step 2: a ring of STAGES tiles guarded by mbarriers ("full": the bytes
//                      have landed, "empty": the tensor cores are done reading), so TMA fills
//                      the next tiles while wgmma works on this one
//   wgmma_specialized  steps 3 and 4: warp specialisation. A producer warpgroup only issues TMA,
//                      CONSUMERS warpgroups only issue wgmma, and setmaxnreg moves registers
//                      from the first to the others. Written persistent: each block loops over
//                      output tiles (tile += gridDim.x) in a grouped order. Step 3 launches one
//                      block per 128 x 128 tile; step 4 launches one block per SM on 128 x 256
//                      tiles, so a block's producer already loads the next tile while its
//                      consumers store this one, and its consumers hand C to TMA (TMA_STORE)
//                      instead of storing it themselves.
//   wgmma_ceiling      the instruction's own ceiling: wgmma on operands already in shared memory
//
// Operands are K-major, as in lesson 05: A is [M, K] row-major, B is [K, N] column-major (B^T is
// [N, K] row-major). C is [M, N] row-major. The kernels are written in BYTES: a K tile is 128
// bytes of every row (64 bf16/fp16 values or 128 fp8 values), the width of the 128-byte swizzle,
// and one wgmma reads 32 bytes of K (k16 for 16-bit types, k32 for fp8). So TMA, the shared-memory
// layout and the descriptors are the same for every type; only the instruction differs.
//
// Built by kernels/matmul/hopper/wgmma.py with course_utils.nvrtc for sm_90a (the "a" enables
// the arch-specific wgmma and setmaxnreg). Tile shapes are template arguments, so the kernel's
// name says its configuration, e.g. wgmma_specialized<128, 256, 4, 2, 8>. Everything above the
// marker is for the editor; wgmma.py generates the real header (types and flags) from Python.
//
// nvrtc arch: sm_90a
// nvrtc example: wgmma_basic<128, 128>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
using a_t = __nv_bfloat16;    // storage type of A's elements
using b_t = __nv_bfloat16;    // storage type of B's elements
using out_t = __nv_bfloat16;  // C's type (accumulation is always fp32)
constexpr bool TIMELINE = false;       // record when each role waits and works (timeline.py)
constexpr int TIMELINE_BLOCKS = 8;     // blocks that record
constexpr int TIMELINE_EVENTS = 1024;  // events per role and block
constexpr bool BOUNDED_WAITS = true;   // a barrier wait that never completes traps, not hangs
// ==== kernel: everything above this line is replaced by the generated header ====

using u32 = cuda::std::uint32_t;
using u64 = cuda::std::uint64_t;
using i64 = cuda::std::int64_t;

constexpr int K_TILE = 128;       // bytes of K per tile and row: the 128-byte swizzle's width
constexpr int K_STEP = 32;        // bytes of K per wgmma: m64nNk16 (16-bit) or m64nNk32 (fp8)
constexpr int K_STEPS = K_TILE / K_STEP;
constexpr int WARPGROUP = 128;    // 4 consecutive warps issue one wgmma together
constexpr int ROLES = 3;          // timeline rows per block: producer, consumer 0, consumer 1

// The driver's CUtensorMap: 128 opaque bytes, written on the host by cuTensorMapEncodeTiled
// (kernels/matmul/hopper/tma.py) and passed by value as a __grid_constant__ parameter, so the
// TMA unit reads it from the kernel's parameter space.
struct alignas(64) CUtensorMap {
    u64 opaque[16];
};

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- 1. mbarriers: a counter and a phase bit in shared memory ----------------------------------
// A barrier completes a phase when `count` arrivals have happened AND every byte announced with
// expect_tx has landed (TMA counts them down). Waiting names the phase by its parity: wait(bar, p)
// returns once the phase with parity p has completed. A ring slot is used every STAGES
// iterations, so iteration i waits for parity (i / STAGES) & 1.
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_bytes(u64* bar, u32 bytes) {  // and arrive
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u64* bar, u32 parity) {
    u32 done;
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
    return done;
}
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
    if (mbar_try_wait(bar, parity)) return;
    if constexpr (BOUNDED_WAITS) {
        // a lost arrival would hang the GPU (and the notebook): give up after ~2 s and trap
        const long long start = clock64();
        while (!mbar_try_wait(bar, parity)) {
            // (no printf: a function call here would make ptxas serialise every wgmma, C7510)
            if (clock64() - start > 4000000000LL) __trap();
        }
    } else {
        while (!mbar_try_wait(bar, parity)) {
        }
    }
}
// make the initialised barriers visible to the TMA unit (the "async proxy") before first use
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// ---- 2. TMA: one instruction copies a whole box of a 2-D tensor into shared memory ------------
// The box is 128 bytes x `rows` (tma.py encodes it); (x, y) = (byte along K, row). Rows past the
// tensor's end and bytes past K arrive as zeros, so edge tiles need no special case. The copy
// completes on `bar` by counting down the bytes announced there.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap& map, int x, int y,
                                         u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        :: "r"(smem_addr(dst)), "l"(reinterpret_cast<u64>(&map)), "r"(x), "r"(y),
           "r"(smem_addr(bar)) : "memory");
}

// The way back: one thread copies a box from shared memory to C. Rows and columns outside C are
// not written (TMA clips), so edge tiles need no test either. The copy runs on while the
// thread goes on; before the buffer is written again, wait until TMA has read it.
__device__ __forceinline__ void tma_store(const CUtensorMap& map, int x, int y, const void* src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(reinterpret_cast<u64>(&map)), "r"(x), "r"(y), "r"(smem_addr(src))
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void tma_store_wait_read() {  // the source buffer may be reused
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// ordinary shared-memory stores become visible to TMA (the async proxy) only after this fence
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// a barrier for one warpgroup's 128 threads (id 0 is __syncthreads)
__device__ __forceinline__ void warpgroup_barrier(int id) {
    asm volatile("bar.sync %0, 128;" :: "r"(id) : "memory");
}

// ---- 3. wgmma: the tensor cores read A and B straight from shared memory -----------------------
// A descriptor tells them where a tile is and how it is laid out (layout.py draws its fields):
//   bits  0-13  start address >> 4
//   bits 16-29  leading byte offset >> 4 (not used by K-major swizzled tiles; 1 by convention)
//   bits 32-45  stride byte offset >> 4: 1024 bytes from one group of 8 rows to the next
//   bits 62-63  swizzle mode: 1 = 128-byte swizzle, the layout TMA wrote
// The tile must start on a 1024-byte boundary (the swizzle repeats every 8 rows of 128 bytes).
// Moving along K inside the 128-byte row is adding bytes to the start address: +32 per wgmma.
__device__ __forceinline__ u64 smem_descriptor(const void* tile) {
    return ((smem_addr(tile) & 0x3FFFF) >> 4) | (u64(1) << 16) | (u64(1024 >> 4) << 32) |
           (u64(1) << 62);
}

// The accumulator of m64nNk*: N / 2 fp32 registers per thread. The instruction names every one
// of them; these macros spell the operand lists out ("{%0, %1, ..., %127}").
#define WG_10(t) "%" #t "0, %" #t "1, %" #t "2, %" #t "3, %" #t "4, %" #t "5, %" #t "6, %" #t \
                 "7, %" #t "8, %" #t "9, "
#define WG_REGS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " WG_10(1) WG_10(2) WG_10(3)       \
                   WG_10(4) WG_10(5) "%60, %61, %62, %63}"
#define WG_REGS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " WG_10(1) WG_10(2) WG_10(3)      \
                    WG_10(4) WG_10(5) WG_10(6) WG_10(7) WG_10(8) WG_10(9) WG_10(10) WG_10(11)   \
                    "%120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),    \
                "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_OPS_64 WG_8(0), WG_8(8), WG_8(16), WG_8(24), WG_8(32), WG_8(40), WG_8(48), WG_8(56)
#define WG_OPS_128 WG_OPS_64, WG_8(64), WG_8(72), WG_8(80), WG_8(88), WG_8(96), WG_8(104),    \
                   WG_8(112), WG_8(120)
// d (+)= A * B for a 64 x N tile; scale_d = 0 overwrites d (the first K step of a tile).
// TRANS: 16-bit types take two "transpose" immediates (0: both K-major); fp8 has none.
#define WGMMA_N128(K, TA, TB, TRANS)                                                          \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"                               \
                 " wgmma.mma_async.sync.aligned.m64n128k" K ".f32." TA "." TB " " WG_REGS_64   \
                 ", %64, %65, p, 1, 1" TRANS ";\n}\n"                                         \
                 : WG_OPS_64 : "l"(desc_a), "l"(desc_b), "r"(scale_d))
#define WGMMA_N256(K, TA, TB, TRANS)                                                          \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                              \
                 " wgmma.mma_async.sync.aligned.m64n256k" K ".f32." TA "." TB " " WG_REGS_128  \
                 ", %128, %129, p, 1, 1" TRANS ";\n}\n"                                       \
                 : WG_OPS_128 : "l"(desc_a), "l"(desc_b), "r"(scale_d))
#define WGMMA_BY_TYPE(WGMMA)                                                                  \
    if constexpr (cuda::std::is_same_v<a_t, __nv_bfloat16>) WGMMA("16", "bf16", "bf16", ", 0, 0"); \
    else if constexpr (cuda::std::is_same_v<a_t, __half>) WGMMA("16", "f16", "f16", ", 0, 0");    \
    else if constexpr (is_e4m3<a_t> && is_e4m3<b_t>) WGMMA("32", "e4m3", "e4m3", "");             \
    else if constexpr (is_e4m3<a_t>) WGMMA("32", "e4m3", "e5m2", "");                             \
    else if constexpr (is_e4m3<b_t>) WGMMA("32", "e5m2", "e4m3", "");                             \
    else WGMMA("32", "e5m2", "e5m2", "")

template <typename T>
constexpr bool is_e4m3 = cuda::std::is_same_v<T, __nv_fp8_e4m3>;
static_assert(sizeof(a_t) == sizeof(b_t), "A and B must have the same element size");
static_assert(cuda::std::is_same_v<a_t, b_t> || sizeof(a_t) == 1, "only fp8 types may mix");

template <int N>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], u64 desc_a, u64 desc_b, u32 scale_d) {
    static_assert(N == 128 || N == 256, "this file spells out m64n128 and m64n256");
    if constexpr (N == 128) {
        WGMMA_BY_TYPE(WGMMA_N128);
    } else {
        WGMMA_BY_TYPE(WGMMA_N256);
    }
}

// wgmma runs asynchronously: fence before (registers are about to be read by the tensor cores),
// commit the issued ones as a group, then wait until at most N groups are still running.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// keep the compiler from moving accumulator reads/writes across the asynchronous instructions
template <int R>
__device__ __forceinline__ void fence_registers(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// One K tile (128 bytes) of a 64-row slice of A times the BN rows of B^T: 4 wgmma, 32 bytes each.
template <int BN>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[BN / 2], const char* a_rows,
                                             const char* b_tile, bool first) {
    const u64 desc_a = smem_descriptor(a_rows), desc_b = smem_descriptor(b_tile);
#pragma unroll
    for (int s = 0; s < K_STEPS; ++s) {
        // +32 bytes along K is +2 in the descriptor's address field (which counts 16 bytes)
        wgmma<BN>(d, desc_a + s * (K_STEP >> 4), desc_b + s * (K_STEP >> 4), !(first && s == 0));
    }
}

// ---- 4. register budget per warpgroup (sm_90a) ------------------------------------------------
template <int REGS>
__device__ __forceinline__ void registers_shrink() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void registers_grow() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGS));
}

// ---- 5. the epilogue: registers -> C ----------------------------------------------------------
// Thread t of the warpgroup holds, for each 8-column block j, rows 16 * (t / 32) + (t % 32) / 4
// (and + 8) at columns 8 j + 2 (t % 4) (and + 1): lesson 05's m16n8 layout, one per warp.
template <int BN>
__device__ __forceinline__ void store_tile(const float (&d)[BN / 2], out_t* c, int M, int N,
                                           int row0, int col0) {
    const int t = threadIdx.x % WARPGROUP;
    const int row = row0 + 16 * (t / 32) + (t % 32) / 4;
    // most tiles lie inside C: store them without a test per element
    const bool inside = row0 + 64 <= M && col0 + BN <= N && N % 2 == 0;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j + 2 * (t % 4);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = row + 8 * half;
            out_t* p = c + i64(r) * N + col;
            const float x = d[4 * j + 2 * half], y = d[4 * j + 2 * half + 1];
            if (inside || (r < M && col + 1 < N && N % 2 == 0)) {  // two values, one store
                if constexpr (cuda::std::is_same_v<out_t, __nv_bfloat16>) {
                    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
                } else {
                    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
                }
            } else if (r < M) {  // the right edge, or an odd N (rows not 4-byte aligned)
                if (col < N) p[0] = out_t(x);
                if (col + 1 < N) p[1] = out_t(y);
            }
        }
    }
}

// The asynchronous epilogue (step 4): the warpgroup writes its 64 x BN tile into shared memory
// as BN / 64 boxes of 64 rows x 128 bytes, in the same 128-byte swizzle TMA reads (so the 8 rows
// a warp writes at once land in 8 different bank groups), and one thread hands the boxes to TMA.
// The consumers go straight on to the next tile while TMA writes this one.
template <int BN>
__device__ __forceinline__ void store_tile_tma(const float (&d)[BN / 2], char* staging,
                                               const CUtensorMap& map, int row0, int col0,
                                               int barrier_id) {
    const int t = threadIdx.x % WARPGROUP;
    if (t == 0) tma_store_wait_read();  // the previous tile's boxes have left shared memory
    warpgroup_barrier(barrier_id);
    const int row = 16 * (t / 32) + (t % 32) / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int byte = (8 * j + 2 * (t % 4)) * int(sizeof(out_t));  // column, in bytes
        char* box = staging + (byte / K_TILE) * 64 * K_TILE;
        const int chunk = (byte % K_TILE) / 16, within = byte % 16;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = row + 8 * half;
            char* p = box + r * K_TILE + ((chunk ^ (r % 8)) << 4) + within;
            const float x = d[4 * j + 2 * half], y = d[4 * j + 2 * half + 1];
            if constexpr (cuda::std::is_same_v<out_t, __nv_bfloat16>) {
                *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
            } else {
                *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
            }
        }
    }
    fence_async_shared();
    warpgroup_barrier(barrier_id);
    if (t == 0) {
#pragma unroll
        for (int b = 0; b < BN * int(sizeof(out_t)) / K_TILE; ++b) {
            tma_store(map, col0 * int(sizeof(out_t)) + b * K_TILE, row0,
                      staging + b * 64 * K_TILE);
        }
        tma_store_commit();
    }
}

// ---- 6. the timeline (TIMELINE builds only) ----------------------------------------------------
// One thread per role records [start, end) in SM clock cycles with what it was doing, into
// timeline[block][role][event][4]: start, end, kind | stage << 8 | k tile << 32, SM id.
enum Kind : u32 { WAIT_SLOT = 1, LOAD = 2, WAIT_DATA = 3, COMPUTE = 4, STORE = 5 };

struct Timeline {
    u64* out;
    int n = 0;
    __device__ __forceinline__ void record(int role, u32 kind, int stage, int k_tile, u64 start,
                                           u64 end) {
        if constexpr (TIMELINE) {
            if (out != nullptr && blockIdx.x < TIMELINE_BLOCKS && n < TIMELINE_EVENTS) {
                u32 sm;
                asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
                u64* e = out + 4 * ((i64(blockIdx.x) * ROLES + role) * TIMELINE_EVENTS + n);
                e[0] = start;
                e[1] = end;
                e[2] = kind | (u64(stage) << 8) | (u64(k_tile) << 32);
                e[3] = sm;
            }
            ++n;
        }
    }
};
__device__ __forceinline__ u64 now() {
    if constexpr (TIMELINE) return clock64();
    return 0;
}

// Shared memory is carved from one dynamic buffer, aligned up to the swizzle's 1024 bytes
// (the launcher asks for 1 KB more than the tiles need).
__device__ __forceinline__ char* aligned_smem(char* raw) {
    return raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
}

// Output tile `tile` in grouped order: GROUP_M tile rows are walked column by column, so the
// blocks running at one time share a few A row panels and B column panels in L2.
template <int GROUP_M>
__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& tm,
                                            int& tn) {
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (tile / per_group) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    tm = first_m + (tile % per_group) % rows;
    tn = (tile % per_group) / rows;
}

// =================================================================================================
// Step 1: TMA + wgmma, one warpgroup, no pipeline. Per K tile: thread 0 announces the bytes and
// starts two TMA copies; everyone waits on the barrier; the warpgroup issues 4 wgmma per 64 rows
// and waits for them; a block barrier protects the tile before it is overwritten.
// =================================================================================================
template <int BM, int BN>
__global__ void __launch_bounds__(WARPGROUP)
wgmma_basic(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
            out_t* __restrict__ c, int M, int N, int K, u64* timeline) {
    static_assert(BM % 64 == 0 && BM <= 256 && (BN == 128 || BN == 256), "tile shape");
    extern __shared__ char raw[];
    char* a_tile = aligned_smem(raw);       // BM rows x 128 bytes
    char* b_tile = a_tile + BM * K_TILE;    // BN rows x 128 bytes
    __shared__ u64 full;
    Timeline tl{timeline};

    const int tiles_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / tiles_n * BM, col0 = blockIdx.x % tiles_n * BN;
    const int k_tiles = (K * int(sizeof(a_t)) + K_TILE - 1) / K_TILE;
    if (k_tiles == 0) return;  // C = 0: wgmma.py fills it without a launch
    if (threadIdx.x == 0) {
        mbar_init(&full, 1);
        fence_barrier_init();
    }
    __syncthreads();

    float d[BM / 64][BN / 2];
    for (int kt = 0; kt < k_tiles; ++kt) {
        const u64 t0 = now();
        if (threadIdx.x == 0) {
            mbar_expect_bytes(&full, (BM + BN) * K_TILE);
            tma_load(a_tile, tma_a, kt * K_TILE, row0, &full);
            tma_load(b_tile, tma_b, kt * K_TILE, col0, &full);
        }
        mbar_wait(&full, kt & 1);
        const u64 t1 = now();
        wgmma_fence();
#pragma unroll
        for (int m = 0; m < BM / 64; ++m) wgmma_k_tile<BN>(d[m], a_tile + m * 64 * K_TILE, b_tile, kt == 0);
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();  // every warp has finished reading before thread 0 refills the tiles
        if (threadIdx.x == 0) {
            tl.record(0, LOAD, 0, kt, t0, t0);
            tl.record(1, WAIT_DATA, 0, kt, t0, t1);
            tl.record(1, COMPUTE, 0, kt, t1, now());
        }
    }
#pragma unroll
    for (int m = 0; m < BM / 64; ++m) store_tile<BN>(d[m], c, M, N, row0 + 64 * m, col0);
}

// =================================================================================================
// Step 2: a ring of STAGES slots. full[s]: the bytes of slot s have landed (TMA completes it);
// empty[s]: the 4 warps are done reading slot s (each warp's lane 0 arrives). Thread 0 is still
// both producer and consumer: it refills a slot as soon as the slot is released, STAGES - 1
// tiles ahead of the one being multiplied. wgmma for tile k runs while tile k - 1's group drains.
// =================================================================================================
template <int BM, int BN, int STAGES>
__global__ void __launch_bounds__(WARPGROUP)
wgmma_pipelined(const __grid_constant__ CUtensorMap tma_a,
                const __grid_constant__ CUtensorMap tma_b, out_t* __restrict__ c, int M, int N,
                int K, u64* timeline) {
    static_assert(BM % 64 == 0 && BM <= 256 && (BN == 128 || BN == 256) && STAGES >= 2, "shape");
    constexpr int SLOT = (BM + BN) * K_TILE;  // bytes per ring slot: A tile, then B tile
    extern __shared__ char raw[];
    char* ring = aligned_smem(raw);
    __shared__ u64 full[STAGES], empty[STAGES];
    Timeline tl{timeline};

    const int tiles_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / tiles_n * BM, col0 = blockIdx.x % tiles_n * BN;
    const int k_tiles = (K * int(sizeof(a_t)) + K_TILE - 1) / K_TILE;
    if (k_tiles == 0) return;  // C = 0: wgmma.py fills it without a launch
    const bool producer = threadIdx.x == 0, warp_leader = threadIdx.x % 32 == 0;
    if (producer) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], WARPGROUP / 32);
        }
        fence_barrier_init();
    }
    __syncthreads();

    // load tile kt into slot kt % STAGES once the slot's previous tile has been released
    auto load = [&](int kt) {
        const int s = kt % STAGES;
        const u64 t0 = now();
        mbar_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);  // first pass: a fresh barrier lets us in
        const u64 t1 = now();
        char* slot = ring + s * SLOT;
        mbar_expect_bytes(&full[s], SLOT);
        tma_load(slot, tma_a, kt * K_TILE, row0, &full[s]);
        tma_load(slot + BM * K_TILE, tma_b, kt * K_TILE, col0, &full[s]);
        tl.record(0, WAIT_SLOT, s, kt, t0, t1);
        tl.record(0, LOAD, s, kt, t1, now());
    };
    if (producer) {
        for (int kt = 0; kt < min(STAGES - 1, k_tiles); ++kt) load(kt);
    }

    float d[BM / 64][BN / 2];
    u64 busy_since = 0;  // (timeline) when the tensor cores started on the last K tile
    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        const u64 t0 = now();
        mbar_wait(&full[s], (kt / STAGES) & 1);
        const u64 ready = now();
        const char* slot = ring + s * SLOT;
        wgmma_fence();
#pragma unroll
        for (int m = 0; m < BM / 64; ++m) wgmma_k_tile<BN>(d[m], slot + m * 64 * K_TILE, slot + BM * K_TILE, kt == 0);
        wgmma_commit();
        wgmma_wait<1>();  // the group of tile kt - 1 is done: release its slot
        if (kt > 0 && warp_leader) mbar_arrive(&empty[(kt - 1) % STAGES]);
        if (producer) {
            const u64 released = now();
            tl.record(1, WAIT_DATA, s, kt, t0, ready);
            if (kt > 0) tl.record(1, COMPUTE, (kt - 1) % STAGES, kt - 1, busy_since, released);
            busy_since = ready > released || kt == 0 ? ready : released;
            if (kt + STAGES - 1 < k_tiles) load(kt + STAGES - 1);
        }
        __syncwarp();
    }
    wgmma_wait<0>();
    if (producer) tl.record(1, COMPUTE, (k_tiles - 1) % STAGES, k_tiles - 1, busy_since, now());
    const u64 t0 = now();
#pragma unroll
    for (int m = 0; m < BM / 64; ++m) store_tile<BN>(d[m], c, M, N, row0 + 64 * m, col0);
    if (producer) tl.record(1, STORE, 0, k_tiles, t0, now());
}

// =================================================================================================
// Steps 3 and 4: warp specialisation, persistent. Warpgroup 0 is the producer: one thread walks
// the same tiles and K tiles as the consumers and keeps the ring full; it needs few registers,
// so it gives them up (setmaxnreg.dec) and the CONSUMERS warpgroups take them (setmaxnreg.inc)
// for their accumulators: each owns BM / CONSUMERS = 64 rows of the tile, BN / 2 registers.
// The ring's position runs on across tiles: iteration `it` uses slot it % STAGES with parity
// (it / STAGES) & 1, so a block's producer loads the next tile while its consumers store.
// TMA_STORE (step 4): the epilogue stages the tile in shared memory and TMA writes it out while
// the consumers start the next tile; otherwise each thread stores its registers to C.
// =================================================================================================
template <int BM, int BN, int STAGES, int CONSUMERS, int GROUP_M, bool TMA_STORE>
__global__ void __launch_bounds__(WARPGROUP * (CONSUMERS + 1), 1)
wgmma_specialized(const __grid_constant__ CUtensorMap tma_a,
                  const __grid_constant__ CUtensorMap tma_b,
                  const __grid_constant__ CUtensorMap tma_c, out_t* __restrict__ c, int M, int N,
                  int K, u64* timeline) {
    static_assert(BM == 64 * CONSUMERS && (BN == 128 || BN == 256) && STAGES >= 2, "shape");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    constexpr int SLOT = (BM + BN) * K_TILE;
    // 65536 registers per SM: 128 x 40 + 256 x 232 = 64512 with two consumers
    constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = CONSUMERS == 2 ? 232 : 240;
    extern __shared__ char raw[];
    char* ring = aligned_smem(raw);
    char* staging = ring + STAGES * SLOT;  // TMA_STORE: 64 x BN outputs per consumer
    __shared__ u64 full[STAGES], empty[STAGES];
    Timeline tl{timeline};

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n;
    const int k_tiles = (K * int(sizeof(a_t)) + K_TILE - 1) / K_TILE;
    if (k_tiles == 0) return;  // C = 0: wgmma.py fills it without a launch
    const int role = threadIdx.x / WARPGROUP;  // 0: producer, 1..CONSUMERS: consumers
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CONSUMERS * WARPGROUP / 32);
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (role == 0) {
        registers_shrink<PRODUCER_REGS>();
        if (threadIdx.x != 0) return;  // one thread issues every copy
        int it = 0;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            int tm, tn;
            tile_origin<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % STAGES;
                const u64 t0 = now();
                mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
                const u64 t1 = now();
                char* slot = ring + s * SLOT;
                mbar_expect_bytes(&full[s], SLOT);
                tma_load(slot, tma_a, kt * K_TILE, tm * BM, &full[s]);
                tma_load(slot + BM * K_TILE, tma_b, kt * K_TILE, tn * BN, &full[s]);
                tl.record(0, WAIT_SLOT, s, kt, t0, t1);
                tl.record(0, LOAD, s, kt, t1, now());
            }
        }
    } else {
        registers_grow<CONSUMER_REGS>();
        const int consumer = role - 1;
        const bool leader = threadIdx.x % WARPGROUP == 0, warp_leader = threadIdx.x % 32 == 0;
        float d[BN / 2];
        int it = 0;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            int tm, tn;
            tile_origin<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            u64 busy_since = 0;  // (timeline) when the tensor cores started on the last K tile
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % STAGES;
                const u64 t0 = now();
                mbar_wait(&full[s], (it / STAGES) & 1);
                const u64 ready = now();
                const char* slot = ring + s * SLOT;
                wgmma_fence();
                wgmma_k_tile<BN>(d, slot + consumer * 64 * K_TILE, slot + BM * K_TILE, kt == 0);
                wgmma_commit();
                wgmma_wait<1>();  // tile kt - 1's group is done: its slot can be refilled
                if (kt > 0 && warp_leader) mbar_arrive(&empty[(it - 1) % STAGES]);
                if (leader) {
                    const u64 released = now();
                    tl.record(role, WAIT_DATA, s, kt, t0, ready);
                    if (kt > 0) tl.record(role, COMPUTE, (it - 1) % STAGES, kt - 1, busy_since, released);
                    busy_since = ready > released || kt == 0 ? ready : released;
                }
            }
            wgmma_wait<0>();
            if (warp_leader) mbar_arrive(&empty[(it - 1) % STAGES]);
            fence_registers(d);
            const u64 t0 = now();
            if (leader) tl.record(role, COMPUTE, (it - 1) % STAGES, k_tiles - 1, busy_since, t0);
            if constexpr (TMA_STORE) {
                store_tile_tma<BN>(d, staging + consumer * 64 * BN * int(sizeof(out_t)), tma_c,
                                   tm * BM + consumer * 64, tn * BN, 1 + consumer);
            } else {
                store_tile<BN>(d, c, M, N, tm * BM + consumer * 64, tn * BN);
            }
            if (leader) tl.record(role, STORE, 0, tile, t0, now());
        }
        if (TMA_STORE && leader) {
            asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // before the block exits
        }
    }
}

// =================================================================================================
// The ceiling: CONSUMERS warpgroups per block issue m64nNk* back to back on tiles that are already
// in shared memory: no TMA, no global memory, no epilogue. What a matmul could reach at best.
// =================================================================================================
template <int BN, int CONSUMERS>
__global__ void __launch_bounds__(WARPGROUP * CONSUMERS, 1)
wgmma_ceiling(float* __restrict__ out, int iterations) {
    extern __shared__ char raw[];
    char* a_tile = aligned_smem(raw);                  // CONSUMERS x 64 rows x 128 bytes
    char* b_tile = a_tile + CONSUMERS * 64 * K_TILE;   // BN rows x 128 bytes
    // small values (0 or +-1 in every type), so that accumulating them stays finite
    for (int i = threadIdx.x; i < (CONSUMERS * 64 + BN) * K_TILE / 4; i += blockDim.x) {
        reinterpret_cast<u32*>(a_tile)[i] = (i % 3 == 0) ? 0 : (sizeof(a_t) == 2 ? 0x3c003c00u : 0x38383838u);
    }
    // ordinary stores, read next by the tensor cores (the async proxy): fence, then barrier
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const int consumer = threadIdx.x / WARPGROUP;
    float d[BN / 2];
    for (int i = 0; i < iterations; ++i) {
        wgmma_fence();
        wgmma_k_tile<BN>(d, a_tile + consumer * 64 * K_TILE, b_tile, i == 0);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    fence_registers(d);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) sum += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the work from being optimised away
}
