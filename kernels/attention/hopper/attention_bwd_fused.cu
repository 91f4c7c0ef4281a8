// Attention backward on Hopper, version 2: ONE kernel, dQ summed through atomics
// (FlashAttention-3's design). Read attention_bwd.cu (version 1) first: the math, the layouts,
// the transposed scores and the 8-warp shape are the same, and so is most of the code
// (attention_bwd.cuh holds the pieces both versions use).
//
// What changed, and why. Version 1 is two kernels: dK/dV (a block owns 128 keys and walks the
// query tiles) and dQ (a block owns queries and walks the key tiles). Each recomputes S = Q K^T
// and dP = dO V^T, so a (query tile, key tile) pair costs 7 matmuls; on an H100 forward +
// backward ran at 0.70-0.77x cuDNN's at D = 128 (docs/results/nvidia-h100-80gb-hbm3-hopper-bwd-
// check-cb58732.log). Here the dK/dV walk also computes dQ: per query tile, each warpgroup has
// dS^T of its 64 keys anyway, so the block adds dQ_tile += dS K for its 128 keys into an fp32
// buffer in global memory that every key block of the head adds into:
//
//     S^T = K Q^T    dP^T = V dO^T    dV += P^T dO    dK += dS^T Q    dQ_partial = dS K
//
// five matmuls per pair, the two recomputed ones gone. The price:
//   - dQ_partial leaves through atomics: red.global.add.v2.f32, two neighbouring columns of a
//     row per instruction (PTX ISA 8.1+, sm_90), one per fragment pair, in L2 (a reduction
//     returns nothing, so the warp does not wait for it). FlashAttention-3 stages dQ in shared
//     memory and lets one warp hand it to TMA's bulk reduce-add (cp.reduce.async.bulk .add.f32),
//     which moves whole lines; the registers' atomics are the simpler first version.
//   - an fp32 buffer (B, H, Sq, D), zeroed before the kernel, and a pass after it that rounds
//     it to the input dtype (kernels/attention/hopper/bwd.py launches all three on one stream,
//     so each starts after the one before has finished).
//   - dQ is not deterministic: fp32 addition is not associative and the key blocks of a head
//     add their partial sums in whatever order they run, so two runs may differ in the last
//     bits (dK and dV do not: each is summed in one block's registers). FlashAttention-3 has a
//     deterministic mode (each key block waits for its turn on a semaphore); not here.
//
// dS must be wgmma's A operand for dQ = dS K, with the QUERIES along its rows (M), but each
// warpgroup holds dS^T, keys along rows. wgmma takes A from registers only in the accumulator
// layout (rows = M), so dS^T goes through shared memory: every thread stores its 16-bit pairs
// into a [128 keys][64 queries] tile (one 128-byte row per key, 128-byte swizzled as TMA would
// write it) and wgmma reads it back TRANSPOSED: an MN-major A descriptor (imm-trans-a = 1),
// the same descriptor the forward uses for V as an MN-major B. K is already in shared memory
// as [keys][D]: for dQ it is an MN-major B (imm-trans-b = 1), as V is in the forward.
//
// Which warpgroup computes what: the dQ tile (64 queries x D) needs dS of all 128 keys. At
// D = 128, warpgroup c computes columns 64c .. 64c + 63 over all 128 keys (one 128-byte box of
// K; both warpgroups' dS^T must be in shared memory first: a block barrier); at D = 64, where
// half of D would start mid-box, warpgroup c computes all 64 columns over its own 64 keys and
// the two warpgroups add into the same addresses. Either way a 64 x 64 fp32 accumulator, 32
// registers a thread, on top of version 1's dK/dV kernel; the dS^T tile is double-buffered
// (tile n writes one buffer while the other warpgroup may still read the other for tile n - 1).
// ptxas (CUDA 13 NVRTC, sm_90a): 255 registers a thread at D = 128 (version 1's dK/dV: 248),
// 203 at D = 64, no local memory, no serialised wgmma: dQ's accumulator is live only where S^T
// and dP^T are not. Shared memory: K, V, the ring and the two dS^T tiles, 161 KB at D = 128.
//
// Per query tile, in each warpgroup (what is new against version 1 is starred):
//   S^T, dP^T issued; P^T (causal diagonal *and keys past Sk* masked: dQ reads every key of the
//   block, where version 1 simply did not store those keys' dK, dV rows); dV += P^T dO; dS^T;
//   * dS^T stored to shared memory, fenced for the tensor cores, block barrier;
//   * dQ_partial = dS K issued, then dK += dS^T Q; * wait for dQ only (dK runs on into the next
//   tile's S^T and dP^T, as in version 1), scale by 1/sqrt(D), add into the fp32 buffer.
//
// Layouts as version 1; dq_sum (B, H, Sq, D) float32, zeroed by the caller. Built by
// kernels/attention/hopper/bwd.py (version 2) with course_utils.nvrtc for sm_90a. Everything
// above the marker is for the editor.
//
// nvrtc arch: sm_90a
// nvrtc example: attention_bwd_fused<128, 64, 2>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
using a_t = __nv_bfloat16;    // q, k, v, o, dO (bf16 or fp16)
using b_t = __nv_bfloat16;    // (the same: hopper.cuh names both operands of a matmul)
using out_t = __nv_bfloat16;  // dK, dV (dQ: float32, rounded by the pass after)
constexpr bool TIMELINE = false;       // (hopper.cuh's timeline; the backward records none)
constexpr int TIMELINE_BLOCKS = 8;
constexpr int TIMELINE_EVENTS = 1024;
constexpr int WAIT_LIMIT_MCYCLES = 4000;  // a barrier wait longer than this traps; 0: no limit
// ==== kernel: everything above this line is replaced by the generated header ====

#include "../../matmul/hopper/hopper.cuh"  // lesson 16: mbarriers, TMA, wgmma
#include "attention.cuh"                   // wgmma with A in registers, the MN-major descriptor
#include "attention_bwd.cuh"               // the dK/dV walk's pieces (version 1 shares them)

// ---- what version 2 adds ---------------------------------------------------------------------
// one atomic addition of two neighbouring floats (8-byte aligned), done in L2; returns nothing
__device__ __forceinline__ void red_add2(float* p, float x, float y) {
    asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};"
                 :: "l"(p), "f"(x), "f"(y) : "memory");
}

// dS^T's A fragments (pack_a's a[kk][r]: key row + 8 (r % 2), queries 16 kk + 8 (r / 2) +
// 2 (lane % 4) + {0, 1}) into the [keys][64 queries] tile, one 128-byte row per key, 128-byte
// swizzled (16-byte chunk c of row r at chunk c ^ (r % 8)): the 8 rows a warp writes at once
// fall in 8 different chunks, so its 32 stores hit 32 different banks
template <int BQ>
__device__ __forceinline__ void store_scores_gradient_t(char* tile, const u32 (&a)[BQ / 16][4],
                                                        int row, int lane) {
    static_assert(BQ * int(sizeof(a_t)) == K_TILE, "one 128-byte row of queries per key");
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int key = row + 8 * (r % 2), chunk = 2 * kk + r / 2;
            *reinterpret_cast<u32*>(tile + key * K_TILE + ((chunk ^ (key % 8)) << 4) +
                                    4 * (lane % 4)) = a[kk][r];
        }
    }
}

// ==== dK, dV and dQ: one block per (batch x head, 128 keys), walking the query tiles ==========
template <int D, int BQ, int STAGES>
__global__ void __launch_bounds__(2 * WARPGROUP, 1)
attention_bwd_fused(const __grid_constant__ CUtensorMap tma_q,
                    const __grid_constant__ CUtensorMap tma_k,
                    const __grid_constant__ CUtensorMap tma_v,
                    const __grid_constant__ CUtensorMap tma_do, const float* __restrict__ lse,
                    const float* __restrict__ delta, float* __restrict__ dq_sum,
                    out_t* __restrict__ dk, out_t* __restrict__ dv, int sq, int sk, int causal,
                    float scale_log2, float scale) {
    static_assert((D == 64 || D == 128) && BQ == 64 && STAGES >= 2, "shape");
    constexpr int BK = BWD_KEYS;                             // keys per block: 2 warpgroups
    using Walk = KeyWalk<D, BQ, STAGES>;                     // K, V and the ring: as version 1
    constexpr int DS_BYTES = BK * BQ * int(sizeof(a_t));     // dS^T of the block, one tile
    extern __shared__ char raw[];
    // after K, V and the ring: 2 x [BK keys][128 bytes of queries], swizzled
    char* ds_tiles = aligned_smem(raw) + Walk::BYTES;
    __shared__ u64 kv_full, full[STAGES], empty[STAGES];
    __shared__ float2 per_query[2][2][BQ];  // as version 1

    const KeyBlock blk = key_block<BQ>(sq, sk, causal);
    const int bh = blk.bh, n0 = blk.n0, first = blk.first, n_tiles = blk.n_tiles;
    const int consumer = threadIdx.x / WARPGROUP, t = threadIdx.x % WARPGROUP, lane = t % 32;
    if (n_tiles == 0) {  // (and no query adds anything to dQ)
        store_zero_gradients<D>(dk, dv, bh, sk, n0 + consumer * 64);
        return;
    }
    const Walk walk(raw, &kv_full, full, empty, tma_q, tma_do, blk, sq);
    walk.start(tma_k, tma_v, sk, n0);

    // ---- a consumer: 64 keys; thread t holds keys key and key + 8 of them ------------------
    const int row_in_block = consumer * 64 + 16 * (t / 32) + lane / 4;
    const int key = n0 + row_in_block;
    const char* k_rows = walk.k_tile + consumer * 64 * K_TILE;
    const char* v_rows = walk.v_tile + consumer * 64 * K_TILE;
    // this warpgroup's part of each dQ tile (the header says why): keys dq_key0 .. + DQ_KEYS
    // of the block, columns dq_col0 .. + 63 of D
    constexpr int DQ_KEYS = D == 128 ? BK : 64;
    const int dq_key0 = D == 128 ? 0 : consumer * 64, dq_col0 = D == 128 ? consumer * 64 : 0;
    const char* k_for_dq = walk.k_tile + (dq_col0 / 64) * BK * K_TILE + dq_key0 * K_TILE;
    float dk_acc[D / 2], dv_acc[D / 2];  // (not zeroed: version 1 says why)
    float st[BQ / 2];   // S^T of one tile, then P^T (fp32)
    float dpt[BQ / 2];  // dP^T, then dS^T (fp32)
    float dq_acc[32];   // this warpgroup's 64 x 64 of the tile's dQ_partial
    u32 a[BQ / 16][4];  // P^T, then dS^T, in 16 bits

    mbar_wait(&kv_full, 0);
    for (int n = 0; n < n_tiles; ++n) {
        const int s = n % STAGES, m0 = (first + n) * BQ;
        const char* q_slot = walk.ring + s * Walk::SLOT;
        const char* do_slot = q_slot + Walk::TILE_BYTES;
        char* ds_tile = ds_tiles + (n % 2) * DS_BYTES;
        float2* pq = per_query[consumer][n % 2];
        stage_query_stats<BQ>(pq, lse, delta, bh, sq, m0, t);
        warpgroup_barrier(1 + consumer);  // (the tile before last read the other buffer)

        mbar_wait(&full[s], (n / STAGES) & 1);
        wgmma_fence();
        issue_scores_t<D, BQ>(st, dpt, k_rows, v_rows, q_slot, do_slot);
        wgmma_wait<1>();  // the last tile's dK and this tile's S^T are done (dP^T may run)

        // P^T, masked across the causal diagonal and past Sk
        fence_registers(st);
        const int last_key = n0 + consumer * 64 + 63;
        probabilities_t<BQ, true>(st, pq, scale_log2, (causal && last_key > m0) || last_key >= sk,
                                  causal, key, m0, sk, lane);
        pack_a<BQ>(a, st);
        wgmma_fence();
        wgmma_rs_tile<D, BQ>(dv_acc, a, do_slot, n > 0);  // dV += P^T dO
        wgmma_commit();
        wgmma_wait<1>();  // dP^T is done (dV may run)
        fence_registers(dpt);
        scores_gradient_t<BQ>(dpt, st, pq, lane);
        wgmma_wait<0>();  // dV is done: a is free
        walk.release_previous(n, lane);  // (here: version 1 says why)
        pack_a<BQ>(a, dpt);
        // dS^T into shared memory for dQ; the fence makes these ordinary stores visible to the
        // tensor cores (the async proxy), the barrier waits for the other warpgroup's half.
        // (Buffer n % 2 was last read by tile n - 2's dQ, which both warpgroups waited for
        // before tile n - 1's barrier)
        store_scores_gradient_t<BQ>(ds_tile, a, row_in_block, lane);
        fence_async_shared();
        __syncthreads();
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < DQ_KEYS / 16; ++kk) {  // dQ_partial = dS K: 16 keys a step
            const char* at = ds_tile + (dq_key0 + 16 * kk) * K_TILE;
            // both operands MN-major (imm-trans-a = imm-trans-b = 1): A = dS read through
            // dS^T's tile, B = K read as [keys][D]
            wgmma_ss<64, 1, 1>(dq_acc, smem_descriptor_mn(at, DS_BYTES),
                               smem_descriptor_mn(k_for_dq + 16 * kk * K_TILE, BK * K_TILE),
                               kk > 0);
        }
        wgmma_commit();
        wgmma_rs_tile<D, BQ>(dk_acc, a, q_slot, n > 0);  // dK += dS^T Q
        wgmma_commit();
        wgmma_wait<1>();  // dQ_partial is done (dK runs on into the next tile)

        // dQ_partial / sqrt(D) added into the fp32 buffer (exercise hopper_backward.dq_add of lesson 19 is
        // the code between the markers: the check splices a student's in its place)
        fence_registers(dq_acc);
        // ==== dq add: begin
        // dq_acc[4j + 2h + e]: query m0 + 16 (t / 32) + lane / 4 + 8h, column
        // dq_col0 + 8j + 2 (lane % 4) + e; rows past Sq left out
        const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (q_row + 8 * h < sq) {
                float* out = dq_sum + (i64(bh) * sq + q_row + 8 * h) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale,
                             dq_acc[4 * j + 2 * h + 1] * scale);
                }
            }
        }
        // ==== dq add: end
    }
    wgmma_wait<0>();
    store_key_gradients<D>(dk_acc, dv_acc, dk, dv, bh, sk, n0 + consumer * 64, scale);
}
