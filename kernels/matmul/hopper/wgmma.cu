// C = A @ B on Hopper (sm_90a): TMA, wgmma and warp specialisation, in three kernels that make
// the five steps of lesson 16. Read them in order; each adds one idea to the one before.
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
//                      instead of storing it themselves. Step 5 launches the same kernel in
//                      clusters of two blocks (CLUSTER = 2) on vertically adjacent tiles: they
//                      need the same tile of B, so each loads half of it and TMA multicasts
//                      that half into both blocks' shared memory. With few output tiles (a
//                      decoding step), `splits` > 1 also divides K among blocks (split-K).
//   wgmma_ceiling      the instruction's own ceiling: wgmma on operands already in shared memory
//
// Operands are K-major, as in lesson 07: A is [M, K] row-major, B is [K, N] column-major (B^T is
// [N, K] row-major). C is [M, N] row-major. The kernels are written in BYTES: a K tile is 128
// bytes of every row (64 bf16/fp16 values or 128 fp8 values), the width of the 128-byte swizzle,
// and one wgmma reads 32 bytes of K (k16 for 16-bit types, k32 for fp8). So TMA, the shared-memory
// layout and the descriptors are the same for every type; only the instruction differs.
//
// Built by kernels/matmul/hopper/wgmma.py with course_utils.nvrtc for sm_90a (the "a" enables
// the arch-specific wgmma and setmaxnreg). Tile shapes are template arguments, so the kernel's
// name says its configuration, e.g. wgmma_specialized<128, 256, 3, 2, 16, true, 1>. Everything above the
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
constexpr int WAIT_LIMIT_MCYCLES = 4000;  // a barrier wait longer than this (millions of
                                          // cycles, ~2 s) traps instead of hanging; 0: no limit
// ==== kernel: everything above this line is replaced by the generated header ====

// the primitives (mbarriers, TMA, the wgmma instruction and its descriptor, setmaxnreg, the
// epilogues, the timeline): sections 1-6, read them first
#include "hopper.cuh"

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
// splits > 1 (split-K, hopper.cuh section 5b; chosen by tiles.py when the output tiles are fewer
// than the SMs): the blocks walk work units, unit = tile * splits + split, each multiplying one
// range of K tiles; the last of a tile's splits to finish sums their partial tiles (from
// `partials`, counted in `arrivals`) and runs the epilogue. splits = 1: one unit per tile, the
// whole K, no workspace (partials and arrivals are null). Only 128-column tiles without a
// cluster split K (SPLIT_K): summing the partials needs registers beside the accumulators, and
// a 256-column consumer already holds 128 of them (in step 4, of the 168 registers per thread
// the compiler allots a 384-thread block); built into step 4, split-K spilled registers to
// local memory. So every 256-column kernel, step 4's included, compiles exactly as before, and
// tiles.py splits 128-column tiles only: the ones decoding shapes get anyway.
// scale_a / scale_b (fp8 with scales, scaled.py): multiply the accumulators before the store;
// null pointers (every other call) mean unit scales.
// CLUSTER = 2 (step 5): blocks 2i and 2i + 1 form a cluster and always take the two tiles of one
// column of B, one above the other. Each producer loads its own A tile and half of the B tile,
// multicast to both blocks, so each block's full[s] still expects a whole slot of bytes, half of
// them written by the other block's copy. A slot may be refilled only when the consumers of BOTH
// blocks are done with it (the other block's copy writes into it too): every consumer warp
// arrives on empty[s] in each block of the cluster.
// =================================================================================================
template <int BM, int BN, int STAGES, int CONSUMERS, int GROUP_M, bool TMA_STORE, int CLUSTER>
__global__ void __launch_bounds__(WARPGROUP * (CONSUMERS + 1), 1)
wgmma_specialized(const __grid_constant__ CUtensorMap tma_a,
                  const __grid_constant__ CUtensorMap tma_b,
                  const __grid_constant__ CUtensorMap tma_c, out_t* __restrict__ c, int M, int N,
                  int K, const float* __restrict__ scale_a, const float* __restrict__ scale_b,
                  int scale_a_step, int scale_b_step, int splits, float* __restrict__ partials,
                  int* __restrict__ arrivals, u64* timeline) {
    static_assert(BM == 64 * CONSUMERS && (BN == 128 || BN == 256) && STAGES >= 2, "shape");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "blocks per cluster");
    constexpr int SLOT = (BM + BN) * K_TILE;
    constexpr bool SPLIT_K = BN == 128 && CLUSTER == 1;  // wgmma.py refuses splits > 1 otherwise
    // 65536 registers per SM: 128 x 40 + 256 x 232 = 64512 with two consumers
    constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = CONSUMERS == 2 ? 232 : 240;
    extern __shared__ char raw[];
    char* ring = aligned_smem(raw);
    char* staging = ring + STAGES * SLOT;  // TMA_STORE: 64 x BN outputs per consumer
    __shared__ u64 full[STAGES], empty[STAGES];
    Timeline tl{timeline};

    // a cluster computes CLUSTER tiles stacked along M: the grid walks these taller tiles
    const int tiles_m = (M + BM * CLUSTER - 1) / (BM * CLUSTER), tiles_n = (N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n;
    const int k_tiles = (K * int(sizeof(a_t)) + K_TILE - 1) / K_TILE;
    if (k_tiles == 0) return;  // C = 0: wgmma.py fills it without a launch
    // K tiles per split; then only the splits that get any count (9 K tiles in 8 splits: 2
    // each, so 5 splits), so that every unit has K tiles and every tile's count completes
    if constexpr (!SPLIT_K) splits = 1;
    const int per_split = (k_tiles + splits - 1) / splits;
    if constexpr (SPLIT_K) splits = (k_tiles + per_split - 1) / per_split;
    const int units = tiles * splits;
    const int role = threadIdx.x / WARPGROUP;  // 0: producer, 1..CONSUMERS: consumers
    const int rank = CLUSTER > 1 ? cluster_rank() : 0;  // this block's place in its cluster
    const int first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;  // in units
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CLUSTER * CONSUMERS * WARPGROUP / 32);
        }
        fence_barrier_init();
    }
    // the other block's copies and arrivals may come as soon as it starts: wait for its barriers
    if constexpr (CLUSTER > 1) cluster_sync(); else __syncthreads();

    if (role == 0) {
        registers_shrink<PRODUCER_REGS>();
        if (threadIdx.x != 0) return;  // one thread issues every copy
        int it = 0;
        for (int unit = first; unit < units; unit += step) {
            const int tile = unit / splits, k_begin = unit % splits * per_split;
            const int k_end = min(k_begin + per_split, k_tiles);
            int tm, tn;
            tile_origin<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            tm = tm * CLUSTER + rank;  // this block's tile of the cluster's column
            for (int kt = k_begin; kt < k_end; ++kt, ++it) {
                const int s = it % STAGES;
                const u64 t0 = now();
                mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
                const u64 t1 = now();
                char* slot = ring + s * SLOT;
                mbar_expect_bytes(&full[s], SLOT);  // A, and all of B: half of it from the peer
                tma_load(slot, tma_a, kt * K_TILE, tm * BM, &full[s]);
                if constexpr (CLUSTER == 1) {
                    tma_load(slot + BM * K_TILE, tma_b, kt * K_TILE, tn * BN, &full[s]);
                } else {  // rows [rank * BN / 2, (rank + 1) * BN / 2) of B's tile, to both blocks
                    constexpr int HALF = BN / CLUSTER;
                    tma_load_multicast(slot + (BM + rank * HALF) * K_TILE, tma_b, kt * K_TILE,
                                       tn * BN + rank * HALF, &full[s], (1u << CLUSTER) - 1);
                }
                tl.record(0, WAIT_SLOT, s, kt, t0, t1);
                tl.record(0, LOAD, s, kt, t1, now());
            }
        }
    } else {
        registers_grow<CONSUMER_REGS>();
        const int consumer = role - 1;
        const bool leader = threadIdx.x % WARPGROUP == 0;
        // the slot of iteration i is free in this block: tell every block of the cluster (lane
        // p of each warp tells block p, so the arrivals go out side by side)
        const int lane = threadIdx.x % 32;
        auto release = [&](int i) {
            if constexpr (CLUSTER == 1) {
                if (lane == 0) mbar_arrive(&empty[i % STAGES]);
            } else {
                if (lane < CLUSTER) mbar_arrive_cluster(&empty[i % STAGES], lane);
            }
        };
        float d[BN / 2];
        int it = 0;
        for (int unit = first; unit < units; unit += step) {
            const int tile = unit / splits, split = unit % splits;
            const int k_begin = split * per_split, k_end = min(k_begin + per_split, k_tiles);
            int tm, tn;
            tile_origin<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            tm = tm * CLUSTER + rank;
            u64 busy_since = 0;  // (timeline) when the tensor cores started on the last K tile
            for (int kt = k_begin; kt < k_end; ++kt, ++it) {
                const int s = it % STAGES;
                const u64 t0 = now();
                mbar_wait(&full[s], (it / STAGES) & 1);
                const u64 ready = now();
                const char* slot = ring + s * SLOT;
                wgmma_fence();
                const bool first_k = kt == k_begin;
                wgmma_k_tile<BN>(d, slot + consumer * 64 * K_TILE, slot + BM * K_TILE, first_k);
                wgmma_commit();
                wgmma_wait<1>();  // tile kt - 1's group is done: its slot can be refilled
                if (!first_k) release(it - 1);
                if (leader) {
                    const u64 released = now();
                    tl.record(role, WAIT_DATA, s, kt, t0, ready);
                    if (!first_k) tl.record(role, COMPUTE, (it - 1) % STAGES, kt - 1, busy_since, released);
                    busy_since = ready > released || first_k ? ready : released;
                }
            }
            wgmma_wait<0>();
            release(it - 1);
            fence_registers(d);
            const u64 t0 = now();
            if (leader) tl.record(role, COMPUTE, (it - 1) % STAGES, k_end - 1, busy_since, t0);
            if (SPLIT_K && splits > 1) {  // split-K: the last split of the tile stores it
                // this tile's consumer owns `splits` partial tiles and one counter
                const int owner = tile * CONSUMERS + consumer;
                float* own_partials = partials + i64(owner) * splits * 64 * BN;
                store_partials<BN>(d, own_partials, split);
                if (!arrive_last(&arrivals[owner], splits, 1 + consumer)) continue;
                sum_partials<BN>(d, own_partials, splits);
            }
            if (scale_a != nullptr) {  // fp8 with scales (scaled.py); null: unit scales
                scale_tile<BN>(d, scale_a, scale_a_step, scale_b, scale_b_step, M, N,
                               tm * BM + consumer * 64, tn * BN);
            }
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
    // a block's shared memory lives as long as the block: stay until the other block's
    // consumers have made their last arrivals on this block's barriers (the producers have left;
    // a thread that exits no longer holds up a cluster barrier)
    if constexpr (CLUSTER > 1) cluster_sync();
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
