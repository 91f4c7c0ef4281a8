// Exercise hopper_matmul.parity: step 1 of lesson 16 (wgmma_basic in kernels/matmul/hopper/wgmma.cu) with a
// ring of two slots, so that TMA fills the next K tile while wgmma multiplies this one.
//
// Each slot has a "full" mbarrier: thread 0 announces the slot's bytes and starts two TMA copies
// that complete on it. A barrier completes one *phase* per tile it receives, and a wait names
// the phase it waits for by its parity (0, 1, 0, 1, ...). Slot kt % 2 receives tiles kt % 2,
// kt % 2 + 2, ...: tile kt is phase kt / 2 of its slot's barrier. The slot of tile kt + 1 is
// free at iteration kt: its last tile, kt - 1, was read before the __syncthreads that ended the
// previous iteration. Your code: tile_parity and ring_wait.
//
// nvrtc arch: sm_90a
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
using a_t = __nv_bfloat16;
using b_t = __nv_bfloat16;
using out_t = __nv_bfloat16;
constexpr bool TIMELINE = false;
constexpr int TIMELINE_BLOCKS = 8;
constexpr int TIMELINE_EVENTS = 1024;
constexpr int WAIT_LIMIT_MCYCLES = 4000;
// ==== kernel: everything above this line is replaced by the generated header ====

// mbarriers, TMA, wgmma and the epilogue: kernels/matmul/hopper/hopper.cuh
#include "hopper.cuh"

// ==== your code: tile_parity and ring_wait ====

template <int BM, int BN>
__global__ void __launch_bounds__(WARPGROUP)
wgmma_ring2(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
            out_t* __restrict__ c, int M, int N, int K) {
    static_assert(BM % 64 == 0 && BM <= 256 && (BN == 128 || BN == 256), "tile shape");
    constexpr int SLOT = (BM + BN) * K_TILE;  // bytes per slot: the A tile, then the B tile
    extern __shared__ char raw[];
    char* ring = aligned_smem(raw);           // 2 slots
    __shared__ u64 full[2];

    const int tiles_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / tiles_n * BM, col0 = blockIdx.x % tiles_n * BN;
    const int k_tiles = (K * int(sizeof(a_t)) + K_TILE - 1) / K_TILE;
    if (k_tiles == 0) return;
    if (threadIdx.x == 0) {
        mbar_init(&full[0], 1);
        mbar_init(&full[1], 1);
        fence_barrier_init();
    }
    __syncthreads();

    auto load = [&](int kt) {  // thread 0: K tile kt into slot kt % 2
        char* slot = ring + (kt % 2) * SLOT;
        mbar_expect_bytes(&full[kt % 2], SLOT);
        tma_load(slot, tma_a, kt * K_TILE, row0, &full[kt % 2]);
        tma_load(slot + BM * K_TILE, tma_b, kt * K_TILE, col0, &full[kt % 2]);
    };
    if (threadIdx.x == 0) load(0);

    float d[BM / 64][BN / 2];
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (threadIdx.x == 0 && kt + 1 < k_tiles) load(kt + 1);  // runs while we multiply
        ring_wait(&full[kt % 2], tile_parity(kt));               // tile kt has landed
        const char* slot = ring + (kt % 2) * SLOT;
        wgmma_fence();
#pragma unroll
        for (int m = 0; m < BM / 64; ++m) {
            wgmma_k_tile<BN>(d[m], slot + m * 64 * K_TILE, slot + BM * K_TILE, kt == 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();  // every warp is done with this slot before thread 0 refills it
    }
#pragma unroll
    for (int m = 0; m < BM / 64; ++m) store_tile<BN>(d[m], c, M, N, row0 + 64 * m, col0);
}
