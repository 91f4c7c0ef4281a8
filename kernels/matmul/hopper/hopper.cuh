// The Hopper primitives lesson 16's kernels are built from (kernels/matmul/hopper/wgmma.cu
// includes this file below its generated header): mbarriers, TMA loads and stores, the wgmma
// instruction and its shared-memory descriptor, setmaxnreg, the two epilogues, the timeline, the
// grouped tile order, (section 2b) the cluster operations of step 5 and (section 5b) split-K's
// partial sums. Each is a few lines of inline PTX with the reason it is there.
//
// It is not compiled on its own: it uses what the generated header of wgmma.cu defines (a_t,
// b_t, out_t, TIMELINE, TIMELINE_BLOCKS, TIMELINE_EVENTS, WAIT_LIMIT_MCYCLES). course_utils.nvrtc
// finds it next to wgmma.cu and counts its text in the cache key, so editing it recompiles.
#pragma once
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

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
    if constexpr (WAIT_LIMIT_MCYCLES > 0) {
        // a lost arrival would hang the GPU (and the notebook): give up after the limit and trap
        const long long start = clock64();
        while (!mbar_try_wait(bar, parity)) {
            // (no printf: a function call here would make ptxas serialise every wgmma, C7510)
            if (clock64() - start > WAIT_LIMIT_MCYCLES * 1000000LL) __trap();
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

// ---- 2b. clusters (step 5): blocks that reach into each other's shared memory ----------------
// A kernel launched with a cluster dimension of 2 (cuLaunchKernelEx's launch attribute, which
// course_utils.nvrtc sets for cluster=2) runs its blocks in pairs (blocks 2i and 2i + 1)
// on two SMs of one GPC, which can read, write and signal each other's shared memory. A
// multicast TMA load reads a box from global memory (and L2) once and writes it into the
// shared memory of every block in `mask`, at the same offset, completing on the barrier at the
// same offset in each: two blocks that need the same tile of B each load half of it.
__device__ __forceinline__ u32 cluster_rank() {  // 0 or 1: this block's place in its cluster
    u32 rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}
// every thread of both blocks arrives, then waits; release/acquire orders the memory operations
// (barrier initialisation, arrivals) before it with those after it, across the cluster
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap& map, int x,
                                                   int y, u64* bar, u32 mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
        :: "r"(smem_addr(dst)), "l"(reinterpret_cast<u64>(&map)), "r"(x), "r"(y),
           "r"(smem_addr(bar)), "h"(static_cast<unsigned short>(mask)) : "memory");
}
// arrive on the barrier at the same offset in block `peer`'s shared memory (mapa translates the
// address). The default .release.cta: what is released is the slot the tensor cores have
// finished reading (wgmma_wait said so), not data another block reads; a .release.cluster
// arrival would first wait for this thread's every earlier memory operation to be visible to
// the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(u64* bar, u32 peer) {
    asm volatile("{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
                 " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}"
                 :: "r"(smem_addr(bar)), "r"(peer) : "memory");
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
// (and + 8) at columns 8 j + 2 (t % 4) (and + 1): lesson 07's m16n8 layout, one per warp.
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

// fp8 with scales, as torch._scaled_mm takes them: C = (scale_a A) @ (scale_b B), applied to the
// fp32 accumulators before they are rounded to C's type. Per tensor, each scale is one value
// (its step is 0: every row and column reads element 0); row-wise, scale_a has one value per row
// of A (M) and scale_b one per column of B (N) (step 1). A row or column past C's edge reads
// nothing (its value is never stored).
template <int BN>
__device__ __forceinline__ void scale_tile(float (&d)[BN / 2], const float* scale_a, int a_step,
                                           const float* scale_b, int b_step, int M, int N,
                                           int row0, int col0) {
    if (a_step == 0 && b_step == 0) {  // per tensor: one product for the whole tile
        const float both = scale_a[0] * scale_b[0];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] *= both;
        return;
    }
    const int t = threadIdx.x % WARPGROUP;
    const int row = row0 + 16 * (t / 32) + (t % 32) / 4;
    float by_row[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int r = row + 8 * half;
        by_row[half] = r < M ? scale_a[i64(r) * a_step] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j + 2 * (t % 4);
        const float x = col < N ? scale_b[i64(col) * b_step] : 0.f;
        const float y = col + 1 < N ? scale_b[i64(col + 1) * b_step] : 0.f;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            d[4 * j + 2 * half] *= by_row[half] * x;
            d[4 * j + 2 * half + 1] *= by_row[half] * y;
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

// ---- 5b. split-K: several blocks sum one output tile ------------------------------------------
// With fewer output tiles than SMs (a decoding step, M = 16: 32 tiles for 132 SMs) most SMs
// would idle while a few stream all of K. Split-K gives each of a tile's `splits` units a range
// of K tiles, on different blocks, and the tile is the sum of their accumulators. Serial split-K
// in the one launch: every unit writes its fp32 partial sums to a workspace in global memory
// and counts itself in on the tile's counter; the unit that arrives last sums the partials and
// runs the epilogue. No unit ever waits for another, so no order in which the blocks run can
// hang, and the last arrival sets the counter back to 0: the next launch finds the workspace
// ready, without a memset.
//
// The workspace of one tile and consumer warpgroup is `splits` partial tiles of 64 x BN floats,
// laid out [split][j][thread][4]: thread t's registers 4j .. 4j + 3 are one 16-byte access, so
// a warp's 32 accesses cover 512 consecutive bytes. The partials go to L2 and come back from it
// (.cg, "cache global"): the reader is on another SM, whose L1 is not kept coherent and could
// still hold the workspace's lines from an earlier launch.
template <int BN>
__device__ __forceinline__ void store_partials(const float (&d)[BN / 2], float* partials,
                                               int split) {
    float4* to = reinterpret_cast<float4*>(partials) + split * (BN / 8) * WARPGROUP +
                 threadIdx.x % WARPGROUP;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float4 p = make_float4(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]);
        __stcg(to + j * WARPGROUP, p);
    }
}

// bar.sync that also ORs a predicate over the warpgroup's 128 threads: one barrier both waits
// for the leader and hands its answer to every thread
__device__ __forceinline__ bool warpgroup_barrier_or(int id, bool p) {
    u32 any;
    asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, 128, p;\n"
                 " selp.u32 %0, 1, 0, q;\n}" : "=r"(any) : "r"(u32(p)), "r"(id) : "memory");
    return any;
}

// Count this warpgroup's partial tile in; true, in all 128 threads, if it was the last of the
// tile's `splits`. The order is the point: a unit that sees the count complete must see every
// partial. The barrier puts all 128 threads' partial stores before the leader's count, and the
// count is an acquire-release atomic at GPU scope: its release half publishes those stores
// (and whatever else the barrier ordered before it) to the whole GPU before the new count, its
// acquire half lets the last arrival see the partials the earlier units published; the second
// barrier passes both the answer and that ordering on to the other threads. (A plain atomicAdd
// is relaxed: it orders nothing, and a __threadfence() in every thread would do the release's
// work 128 times, as a costlier sequentially consistent fence.)
__device__ __forceinline__ int atomic_add_acq_rel(int* p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v)
                 : "memory");
    return old;
}
__device__ __forceinline__ bool arrive_last(int* count, int splits, int barrier_id) {
    warpgroup_barrier(barrier_id);
    bool last = false;
    if (threadIdx.x % WARPGROUP == 0) {
        last = atomic_add_acq_rel(count, 1) == splits - 1;
        if (last) *count = 0;  // all splits are in: nobody counts on this tile again this launch
    }
    return warpgroup_barrier_or(barrier_id, last);
}

// The last arrival: d = the sum of every split's partial tile, its own included (it comes back
// from L2), in split order. The order is the same whichever unit arrives last, so a call's
// result does not depend on which block happened to finish last (floating-point addition is
// not associative: own + the others would round differently for each).
template <int BN>
__device__ __forceinline__ void sum_partials(float (&d)[BN / 2], const float* partials,
                                             int splits) {
    const float4* from = reinterpret_cast<const float4*>(partials) + threadIdx.x % WARPGROUP;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float4 p = __ldcg(from + j * WARPGROUP);
        d[4 * j] = p.x;
        d[4 * j + 1] = p.y;
        d[4 * j + 2] = p.z;
        d[4 * j + 3] = p.w;
    }
    for (int s = 1; s < splits; ++s) {
        from += (BN / 8) * WARPGROUP;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const float4 p = __ldcg(from + j * WARPGROUP);
            d[4 * j] += p.x;
            d[4 * j + 1] += p.y;
            d[4 * j + 2] += p.z;
            d[4 * j + 3] += p.w;
        }
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
