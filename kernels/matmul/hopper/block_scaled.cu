// fp8 with BLOCK scales on Hopper (sm_90a): step 4's kernel with one change in the consumers' K
// loop. Read wgmma.cu's wgmma_specialized first; this file is that kernel, the producer unchanged.
//
// Why block scales. Per-tensor and row-wise scales (scale_tile in hopper.cuh) factor out of the
// sum over K, so the kernel applies them once, to the finished accumulators. The recipe of
// recent fp8-trained models scales finer: A (activations) gets a scale per row and per 128
// values of K ("1 x 128"), B (weights) one per 128 x 128 block. One outlier then costs the range
// of 128 values, not of a whole row. But a scale that changes along K does not factor out:
//
//     C[i, j] = sum over K blocks kb of  scale_a[i, kb] * scale_b[kb, j / 128] * P_kb[i, j],
//     P_kb[i, j] = sum of a[i, k] * b[k, j] for the 128 k of block kb  (exact in fp32)
//
// A K tile is 128 bytes = 128 fp8 values = exactly one scale block. So each K tile's product P
// goes into a fresh accumulator `part` (the tensor cores overwrite it), and the consumer adds it,
// scaled, to the running sum `d` in ordinary fp32 FMAs ("promotion"). Two costs against step 4:
//   - registers: `part` sits beside `d`. 64 rows x 256 columns would need 128 + 128 fp32
//     registers a thread, past the 232 the consumers have, so each K tile is multiplied in
//     halves of 128 columns (m64n128), each promoted before the next: 128 + 64 registers;
//   - overlap: the product must be finished before it is promoted (wgmma_wait<0>, where step 4
//     keeps one group in flight), so each consumer's tensor-core work stops while it promotes.
//     The other consumer warpgroup's wgmma fill that gap: two consumers take turns.
//
// Scales are float32 with any strides (scale_a [M, ceil(K / 128)], scale_b [ceil(K / 128),
// ceil(N / 128)], as torch._scaled_mm takes them); each thread reads its two rows' scales of A
// and its column blocks' scales of B one K tile ahead of the tile that uses them.
//
// Built by kernels/matmul/hopper/scaled.py with course_utils.nvrtc for sm_90a: fp8 types only.
//
// nvrtc arch: sm_90a
// nvrtc example: wgmma_block_scaled<256, 3, 16, true>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
using a_t = __nv_fp8_e4m3;    // storage type of A's elements
using b_t = __nv_fp8_e4m3;    // storage type of B's elements
using out_t = __nv_bfloat16;  // C's type
constexpr bool TIMELINE = false;       // (hopper.cuh's timeline; this kernel records none)
constexpr int TIMELINE_BLOCKS = 8;
constexpr int TIMELINE_EVENTS = 1024;
constexpr int WAIT_LIMIT_MCYCLES = 4000;  // a barrier wait longer than this traps (hopper.cuh)
// ==== kernel: everything above this line is replaced by the generated header ====

#include "hopper.cuh"

static_assert(sizeof(a_t) == 1, "block scales are an fp8 recipe: one K tile is one scale block");
constexpr int SCALE_BLOCK = 128;  // values of K (and columns of B) per scale

// ---- promote: begin (exercise hopper_measured.promote has the student write this function) ----
// d[64 h + i] += part[i] x (A's scale of the register's row) x (B's scale of the block): half h
// of the running sum takes the product of columns 128 h ... 128 h + 127. Thread t's registers
// hold rows as in store_tile: register 4 j + e is row r for e = 0, 1 and row r + 8 for e = 2, 3.
// constexpr, so that the exercise's check can evaluate a student's version with NVRTC alone.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;  // two products, not 64
    for (int j = 0; j < 16; ++j) {
        d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;
        d[64 * h + 4 * j + 1] += part[4 * j + 1] * lo;
        d[64 * h + 4 * j + 2] += part[4 * j + 2] * hi;
        d[64 * h + 4 * j + 3] += part[4 * j + 3] * hi;
    }
}
// ---- promote: end ----

// BM = 128 (two consumer warpgroups of 64 rows), BN = 128 or 256, persistent, grouped tile order;
// TMA_STORE as in step 4 (false when C's rows are not 16-byte aligned).
template <int BN, int STAGES, int GROUP_M, bool TMA_STORE>
__global__ void __launch_bounds__(WARPGROUP * 3, 1)
wgmma_block_scaled(const __grid_constant__ CUtensorMap tma_a,
                   const __grid_constant__ CUtensorMap tma_b,
                   const __grid_constant__ CUtensorMap tma_c, out_t* __restrict__ c, int M, int N,
                   int K, const float* __restrict__ scale_a, int a_row_step, int a_k_step,
                   const float* __restrict__ scale_b, int b_k_step, int b_col_step) {
    constexpr int BM = 128, CONSUMERS = 2, HALVES = BN / 128;
    static_assert(BN == 128 || BN == 256, "tile width");
    constexpr int SLOT = (BM + BN) * K_TILE;
    constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;  // as step 4
    extern __shared__ char raw[];
    char* ring = aligned_smem(raw);
    char* staging = ring + STAGES * SLOT;
    __shared__ u64 full[STAGES], empty[STAGES];

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n;
    const int k_tiles = (K + K_TILE - 1) / K_TILE;  // = scale blocks along K
    const int col_blocks = (N + SCALE_BLOCK - 1) / SCALE_BLOCK;
    if (k_tiles == 0) return;  // C = 0: scaled.py fills it without a launch
    const int role = threadIdx.x / WARPGROUP;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CONSUMERS * WARPGROUP / 32);
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (role == 0) {  // the producer: step 4's, word for word
        registers_shrink<PRODUCER_REGS>();
        if (threadIdx.x != 0) return;
        int it = 0;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            int tm, tn;
            tile_origin<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
                char* slot = ring + s * SLOT;
                mbar_expect_bytes(&full[s], SLOT);
                tma_load(slot, tma_a, kt * K_TILE, tm * BM, &full[s]);
                tma_load(slot + BM * K_TILE, tma_b, kt * K_TILE, tn * BN, &full[s]);
            }
        }
        return;
    }

    registers_grow<CONSUMER_REGS>();
    const int consumer = role - 1, t = threadIdx.x % WARPGROUP;
    float d[BN / 2];  // the running sum of scaled K blocks
    float part[64];   // one K block's product, 128 columns at a time
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm, tn;
        tile_origin<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
        const int row0 = tm * BM + consumer * 64;
        // this thread's two rows of A's scales (rows past M read the last row: never stored)
        const int row = row0 + 16 * (t / 32) + (t % 32) / 4;
        const float* a_lo = scale_a + i64(min(row, M - 1)) * a_row_step;
        const float* a_hi = scale_a + i64(min(row + 8, M - 1)) * a_row_step;
        const float* b_col[HALVES];
#pragma unroll
        for (int h = 0; h < HALVES; ++h) {
            b_col[h] = scale_b + i64(min(tn * HALVES + h, col_blocks - 1)) * b_col_step;
        }
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;

        // the scales of K tile kt + 1 are loaded during tile kt: an L2 read takes longer than
        // one K tile's wgmma, and the promotion would stall on it (measured: 0.69x -> 0.76x of
        // the per-tensor kernel at 8192³)
        float next_lo = a_lo[0], next_hi = a_hi[0], next_block[HALVES];
#pragma unroll
        for (int h = 0; h < HALVES; ++h) next_block[h] = b_col[h][0];
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            const int s = it % STAGES;
            const float row_lo = next_lo, row_hi = next_hi;
            float block[HALVES];
#pragma unroll
            for (int h = 0; h < HALVES; ++h) block[h] = next_block[h];
            if (kt + 1 < k_tiles) {
                next_lo = a_lo[i64(kt + 1) * a_k_step];
                next_hi = a_hi[i64(kt + 1) * a_k_step];
#pragma unroll
                for (int h = 0; h < HALVES; ++h) next_block[h] = b_col[h][i64(kt + 1) * b_k_step];
            }
            mbar_wait(&full[s], (it / STAGES) & 1);
            const char* slot = ring + s * SLOT;
#pragma unroll
            for (int h = 0; h < HALVES; ++h) {
                wgmma_fence();  // `part` was just read by the last promotion
                wgmma_k_tile<128>(part, slot + consumer * 64 * K_TILE,
                                  slot + (BM + 128 * h) * K_TILE, true);
                wgmma_commit();
                wgmma_wait<0>();  // the product is needed now: nothing stays in flight
                if (h == HALVES - 1 && t % 32 == 0) mbar_arrive(&empty[s]);  // slot read
                fence_registers(part);
                promote<BN>(d, part, h, row_lo, row_hi, block[h]);
            }
        }
        if constexpr (TMA_STORE) {
            store_tile_tma<BN>(d, staging + consumer * 64 * BN * int(sizeof(out_t)), tma_c, row0,
                               tn * BN, 1 + consumer);
            // the block's last tile: its stores must leave shared memory before the block exits.
            // (Waiting here, not after the loop: with any instruction after the loop ptxas keeps
            // the consumers to the kernel's 168 registers, not setmaxnreg's 232, and spills.)
            if (tile + int(gridDim.x) >= tiles && t == 0) {
                asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
            }
        } else {
            store_tile<BN>(d, c, M, N, row0, tn * BN);
        }
    }
}
