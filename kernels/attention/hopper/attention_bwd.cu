// Attention backward on Hopper (sm_90a): dQ, dK, dV of O = softmax(Q K^T / sqrt(D)) V, the peer
// of kernels/attention/triton_bwd.py (read its docstring first: the algorithm is the same). The
// forward (attention.cu) kept O and each query's log-sum-exp in base 2, lse2; with them every
// block of P comes back exactly, P = 2^(S * scale_log2 - lse2), and with dO, the gradient of O,
// and Delta_i = sum_d O_id dO_id (one number per query, triton_bwd.delta_kernel):
//
//     dV = P^T dO     dP = dO V^T     dS = P o (dP - Delta)     dQ = dS K / sqrt(D)     dK = dS^T Q / sqrt(D)
//
// Two kernels, as the Triton backward: attention_bwd_dkdv owns a tile of KEYS and walks the
// queries, attention_bwd_dq owns a tile of QUERIES and walks the keys. Why two and not one with
// dQ summed through atomics (FlashAttention-3's choice): each kernel keeps its sums in registers
// and writes every gradient row once, in the input dtype, with no fp32 dQ buffer, no atomics and
// no conversion pass; the price is S = Q K^T and dP = dO V^T computed twice (7 matmuls per block
// pair instead of 5; version 2, attention_bwd_fused.cu, is that one kernel, and its header
// weighs the two). And every matmul is one of the two forms attention.cu already runs:
//
//   from shared memory, both operands K-major (the forward's S = Q K^T, wgmma_box):
//       S^T = K Q^T, dP^T = V dO^T (dK/dV kernel)        S = Q K^T, dP = dO V^T (dQ kernel)
//   A from registers, B MN-major in shared memory (the forward's O += P V, wgmma_rs):
//       dV += P^T dO, dK += dS^T Q (dK/dV kernel)        dQ += dS K (dQ kernel)
//
// The dK/dV kernel computes the TRANSPOSED scores, keys along rows: then P^T and dS^T come out
// of the accumulator in exactly the layout wgmma's A operand takes (as the forward's P does),
// and the Q and dO tiles serve twice, K-major for S^T and dP^T and MN-major (the descriptor of
// the forward's V) for dK and dV. The reduction index of those products is the query, so lse2
// and Delta are per COLUMN there: each warpgroup stages the tile's 64 pairs in shared memory.
//
// Registers. At D = 128 the dK/dV kernel keeps dK and dV (64 + 64 fp32 a thread), S^T and dP^T
// of a 64-query tile (32 + 32) and P^T or dS^T in 16 bits (16): ~210 before addresses. The
// forward's 9 warps get 168 registers a thread (attention.cu says why), so this kernel has 8:
// two consumer warpgroups of 64 keys and NO producer warp; one consumer thread issues the TMA
// copies (8 warps on 4 schedulers: 2 each, 255 registers a thread). The dQ kernel needs dQ (64),
// S and dP (32 + 32), dS (16): it fits the forward's 168 with its producer warp, but waits for
// each tile's dQ before the next tile's matmuls (keeping it in flight needs more).
//
// Tried and measured no faster on the H100 (git 086fc23, docs/results/nvidia-h100-80gb-hbm3-
// hopper-bwd-warpgroups-086fc23.log): a producer WARPGROUP for each kernel with setmaxnreg
// (24 registers for it, 240 for each consumer; ptxas allows the larger count only for consumer
// code that is a loop with nothing after it and no return before setmaxnreg, attention.cu's
// header says more), so that no consumer refills the dK/dV ring and dQ overlaps the next tile.
//
// Layouts: q, o, dO (B, H, Sq, D), k, v (B, H, Sk, D), contiguous; lse2 and Delta (B, H, Sq)
// float32. TMA reads each as B*H*S rows in 128-byte x 64-row boxes, 128-byte swizzled, as the
// forward does. A tile that runs past its head's last row reads the next head's rows (zeros past
// the tensor's end): queries past Sq get lse2 = +inf, so P = 0 and dS = 0 there and they add
// nothing to dK, dV; keys past Sk are masked in the dQ kernel (P = 0) and their dK, dV rows are
// not stored. causal: key j is seen by query i when j <= i (top-left, as SDPA).
//
// Built by kernels/attention/hopper/bwd.py with course_utils.nvrtc for sm_90a; the element type
// comes from the generated header (lesson 16's wgmma.defines). Everything above the marker is
// for the editor.
//
// nvrtc arch: sm_90a
// nvrtc example: attention_bwd_dkdv<128, 64, 2>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
using a_t = __nv_bfloat16;    // q, k, v, o, dO (bf16 or fp16)
using b_t = __nv_bfloat16;    // (the same: hopper.cuh names both operands of a matmul)
using out_t = __nv_bfloat16;  // dQ, dK, dV
constexpr bool TIMELINE = false;       // (hopper.cuh's timeline; the backward records none)
constexpr int TIMELINE_BLOCKS = 8;
constexpr int TIMELINE_EVENTS = 1024;
constexpr int WAIT_LIMIT_MCYCLES = 4000;  // a barrier wait longer than this traps; 0: no limit
// ==== kernel: everything above this line is replaced by the generated header ====

#include "../../matmul/hopper/hopper.cuh"  // lesson 16: mbarriers, TMA, wgmma
#include "attention.cuh"                   // wgmma with A in registers, the MN-major descriptor
#include "attention_bwd.cuh"               // the dK/dV walk's pieces (version 2 shares them)

// ==== dK and dV: one block per (batch x head, 128 keys), walking the query tiles ============
// Two consumer warpgroups of 64 keys each share every Q and dO tile that TMA brings into a ring
// of STAGES slots; thread 0 (a consumer) issues the copies. Per query tile, in each warpgroup:
//   S^T = K Q^T and dP^T = V dO^T are issued together; once S^T is in, P^T (the causal diagonal
//   masked), packed to 16 bits, and dV += P^T dO issued; while it runs, dS^T = P^T o (dP^T -
//   Delta); then dK += dS^T Q, left running into the next tile's S^T and dP^T.
template <int D, int BQ, int STAGES>
__global__ void __launch_bounds__(2 * WARPGROUP, 1)
attention_bwd_dkdv(const __grid_constant__ CUtensorMap tma_q,
                   const __grid_constant__ CUtensorMap tma_k,
                   const __grid_constant__ CUtensorMap tma_v,
                   const __grid_constant__ CUtensorMap tma_do, const float* __restrict__ lse,
                   const float* __restrict__ delta, out_t* __restrict__ dk,
                   out_t* __restrict__ dv, int sq, int sk, int causal, float scale_log2,
                   float scale) {
    static_assert((D == 64 || D == 128) && BQ == 64 && STAGES >= 2, "shape");
    using Walk = KeyWalk<D, BQ, STAGES>;  // the block's K and V, the ring of Q and dO tiles
    extern __shared__ char raw[];
    __shared__ u64 kv_full, full[STAGES], empty[STAGES];
    // (lse2, Delta) of the tile's queries, per warpgroup, two buffers (tile n % 2)
    __shared__ float2 per_query[2][2][BQ];

    const KeyBlock blk = key_block<BQ>(sq, sk, causal);
    const int bh = blk.bh, n0 = blk.n0, first = blk.first, n_tiles = blk.n_tiles;
    const int consumer = threadIdx.x / WARPGROUP, t = threadIdx.x % WARPGROUP, lane = t % 32;
    if (n_tiles == 0) {
        store_zero_gradients<D>(dk, dv, bh, sk, n0 + consumer * 64);
        return;
    }
    const Walk walk(raw, &kv_full, full, empty, tma_q, tma_do, blk, sq);
    walk.start(tma_k, tma_v, sk, n0);

    // ---- a consumer: 64 keys; thread t holds keys key and key + 8 of them ------------------
    const int key = n0 + consumer * 64 + 16 * (t / 32) + lane / 4;
    const char* k_rows = walk.k_tile + consumer * 64 * K_TILE;
    const char* v_rows = walk.v_tile + consumer * 64 * K_TILE;
    // dK and dV are not zeroed: the first tile's products overwrite them (scale_d = 0). They
    // are in flight across the loop's back edge (dK into the next tile), and an accumulator that
    // an ordinary instruction wrote before the loop makes ptxas serialise every wgmma (C7515)
    float dk_acc[D / 2], dv_acc[D / 2];
    float st[BQ / 2];   // S^T of one tile, then P^T (fp32)
    float dpt[BQ / 2];  // dP^T, then dS^T (fp32)
    u32 a[BQ / 16][4];  // P^T, then dS^T, in 16 bits: wgmma's A operand, 16 queries per k step

    mbar_wait(&kv_full, 0);
    for (int n = 0; n < n_tiles; ++n) {
        const int s = n % STAGES, m0 = (first + n) * BQ;
        const char* q_slot = walk.ring + s * Walk::SLOT;
        const char* do_slot = q_slot + Walk::TILE_BYTES;
        float2* pq = per_query[consumer][n % 2];
        stage_query_stats<BQ>(pq, lse, delta, bh, sq, m0, t);
        warpgroup_barrier(1 + consumer);  // (the tile before last read the other buffer)

        mbar_wait(&full[s], (n / STAGES) & 1);
        wgmma_fence();
        issue_scores_t<D, BQ>(st, dpt, k_rows, v_rows, q_slot, do_slot);
        wgmma_wait<1>();  // the last tile's dK and this tile's S^T are done (dP^T may run)

        // P^T, the causal diagonal masked (keys past Sk need no mask: their rows of dK and dV
        // are not stored)
        fence_registers(st);
        probabilities_t<BQ, false>(st, pq, scale_log2, causal && n0 + consumer * 64 + 63 > m0,
                                   causal, key, m0, sk, lane);
        pack_a<BQ>(a, st);
        wgmma_fence();
        wgmma_rs_tile<D, BQ>(dv_acc, a, do_slot, n > 0);  // dV += P^T dO: dO as the forward's V
        wgmma_commit();
        wgmma_wait<1>();  // dP^T is done (dV may run)
        fence_registers(dpt);
        scores_gradient_t<BQ>(dpt, st, pq, lane);
        wgmma_wait<0>();  // dV is done: a is free
        // the last tile's slot is free (its dK finished above): this warp's part of it, and
        // thread 0 refills it with tile n - 1 + STAGES once both warpgroups are done with it.
        // (Here, with no wgmma in flight: a branch beside a running wgmma makes ptxas
        // serialise them all, its note C7520)
        walk.release_previous(n, lane);
        pack_a<BQ>(a, dpt);
        wgmma_fence();
        wgmma_rs_tile<D, BQ>(dk_acc, a, q_slot, n > 0);  // dK += dS^T Q: Q as the forward's V
        wgmma_commit();
    }
    // ---- the epilogue: dK / sqrt(D) and dV, rounded, stored row by row (not past Sk) -------
    wgmma_wait<0>();
    store_key_gradients<D>(dk_acc, dv_acc, dk, dv, bh, sk, n0 + consumer * 64, scale);
}

// ==== dQ: one block per (batch x head, 64 x CONSUMERS queries), walking the key tiles =======
// The forward's step 2 with lse2 known (no online softmax): a producer warp loads Q and dO once,
// then K and V tiles into the ring; per key tile, in each consumer warpgroup: S = Q K^T and
// dP = dO V^T issued together, P (masked past Sk and on the causal diagonal), dS = P o (dP -
// Delta), dQ += dS K with dS from registers and K as the forward's V. The two warpgroups
// overlap each other, as the forward's step 2: one's arithmetic beside the other's matmuls.
template <int D, int BN, int STAGES, int CONSUMERS>
__global__ void __launch_bounds__(WARPGROUP * CONSUMERS + 32, 1)
attention_bwd_dq(const __grid_constant__ CUtensorMap tma_q,
                 const __grid_constant__ CUtensorMap tma_k,
                 const __grid_constant__ CUtensorMap tma_v,
                 const __grid_constant__ CUtensorMap tma_do, const float* __restrict__ lse,
                 const float* __restrict__ delta, out_t* __restrict__ dq, int sq, int sk,
                 int causal, float scale_log2, float scale) {
    static_assert((D == 64 || D == 128) && BN == 64 && STAGES >= 2, "shape");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    constexpr int BM = 64 * CONSUMERS;                       // query rows per block
    constexpr int BOXES = D * int(sizeof(a_t)) / K_TILE;
    constexpr int Q_BYTES = BM * D * int(sizeof(a_t));       // Q (or dO) of the block
    constexpr int KV_BYTES = BN * D * int(sizeof(a_t));      // one K (or V) tile
    constexpr int SLOT = 2 * KV_BYTES;                       // a ring slot: K tile, then V tile
    extern __shared__ char raw[];
    char* q_tile = aligned_smem(raw);   // [BOXES][BM rows][128 bytes]
    char* do_tile = q_tile + Q_BYTES;   // the same
    char* ring = do_tile + Q_BYTES;     // STAGES x ([BOXES][BN][128] of K, then of V)
    __shared__ u64 q_full, k_full[STAGES], v_full[STAGES], empty[STAGES];

    // block b: query tile b % q_tiles of head b / q_tiles, the longest causal tiles first
    const int q_tiles = (sq + BM - 1) / BM;
    const int bh = blockIdx.x / q_tiles, order = blockIdx.x % q_tiles;
    const int m0 = (causal ? q_tiles - 1 - order : order) * BM;
    const int kv_end = causal ? min(sk, m0 + BM) : sk;  // keys past the block's last query: none
    const int n_tiles = (kv_end + BN - 1) / BN;
    const int consumer = threadIdx.x / WARPGROUP;
    if (threadIdx.x == 0) {
        mbar_init(&q_full, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&k_full[s], 1);
            mbar_init(&v_full[s], 1);
            mbar_init(&empty[s], CONSUMERS * WARPGROUP / 32);
        }
        fence_barrier_init();
    }
    __syncthreads();

    // ---- the producer: one thread, Q and dO once, then K and V tile by tile into the ring --
    if (consumer == CONSUMERS) {
        if (threadIdx.x != CONSUMERS * WARPGROUP) return;
        mbar_expect_bytes(&q_full, 2 * Q_BYTES);
        for (int c = 0; c < CONSUMERS; ++c) {
            for (int b = 0; b < BOXES; ++b) {
                const int at = (b * BM + c * 64) * K_TILE, row = bh * sq + m0 + c * 64;
                tma_load(q_tile + at, tma_q, b * K_TILE, row, &q_full);
                tma_load(do_tile + at, tma_do, b * K_TILE, row, &q_full);
            }
        }
        for (int n = 0; n < n_tiles; ++n) {
            const int s = n % STAGES;
            mbar_wait(&empty[s], ((n / STAGES) & 1) ^ 1);  // first pass: fresh barriers let us in
            char* slot = ring + s * SLOT;
            mbar_expect_bytes(&k_full[s], KV_BYTES);
            for (int b = 0; b < BOXES; ++b) {
                tma_load(slot + b * BN * K_TILE, tma_k, b * K_TILE, bh * sk + n * BN, &k_full[s]);
            }
            mbar_expect_bytes(&v_full[s], KV_BYTES);
            for (int b = 0; b < BOXES; ++b) {
                tma_load(slot + KV_BYTES + b * BN * K_TILE, tma_v, b * K_TILE, bh * sk + n * BN,
                         &v_full[s]);
            }
        }
        return;
    }

    // ---- a consumer: 64 query rows; thread t holds rows row and row + 8 of them -------------
    const int t = threadIdx.x % WARPGROUP, lane = t % 32;
    const int row = m0 + consumer * 64 + 16 * (t / 32) + lane / 4;
    const char* q_rows = q_tile + consumer * 64 * K_TILE;
    const char* do_rows = do_tile + consumer * 64 * K_TILE;
    float dq_acc[D / 2];
    float s_acc[BN / 2];   // S, then P
    float dp[BN / 2];      // dP, then dS
    u32 a[BN / 16][4];     // dS in 16 bits: wgmma's A operand, 16 keys per k step
    float lse_row[2], delta_row[2];  // rows past Sq: lse2 = +inf, P = 0
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const bool inside = row + 8 * h < sq;
        const i64 at = i64(bh) * sq + row + 8 * h;
        lse_row[h] = inside ? lse[at] : INF;
        delta_row[h] = inside ? delta[at] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dq_acc[i] = 0.f;
    auto slot = [&](int n) { return ring + (n % STAGES) * SLOT; };

    mbar_wait(&q_full, 0);
    for (int n = 0; n < n_tiles; ++n) {
        // (both waits before the first wgmma: a barrier's spin loop between two in flight
        // makes ptxas serialise them, C7520)
        mbar_wait(&k_full[n % STAGES], (n / STAGES) & 1);
        mbar_wait(&v_full[n % STAGES], (n / STAGES) & 1);
        wgmma_fence();
#pragma unroll
        for (int b = 0; b < BOXES; ++b) {
            wgmma_box<BN>(s_acc, q_rows + b * BM * K_TILE, slot(n) + b * BN * K_TILE, b == 0);
        }
        wgmma_commit();
#pragma unroll
        for (int b = 0; b < BOXES; ++b) {
            wgmma_box<BN>(dp, do_rows + b * BM * K_TILE, slot(n) + KV_BYTES + b * BN * K_TILE,
                          b == 0);
        }
        wgmma_commit();
        wgmma_wait<1>();  // S is done (dP may run)

        // P = 2^(S * scale_log2 - lse2[row]); s_acc[4j + 2h + e]: row + 8h, key
        // n BN + 8j + 2(lane%4) + e. Masked only where needed: past Sk, across the diagonal
        fence_registers(s_acc);
        const bool masked = (n + 1) * BN > sk || (causal && (n + 1) * BN - 1 > m0 + consumer * 64);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
            const int h = (i / 2) % 2;
            float p = exp2_approx(fmaf(s_acc[i], scale_log2, -lse_row[h]));
            if (masked) {
                const int key = n * BN + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
                if (key >= sk || (causal && key > row + 8 * h)) p = 0.f;
            }
            s_acc[i] = p;
        }
        wgmma_wait<0>();  // dP is done
        fence_registers(dp);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) dp[i] = s_acc[i] * (dp[i] - delta_row[(i / 2) % 2]);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
#pragma unroll
            for (int r = 0; r < 4; ++r) a[kk][r] = pack2(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {  // dQ += dS K: K as the forward's V
            wgmma_rs<D>(dq_acc, a[kk], smem_descriptor_mn(slot(n) + kk * 16 * K_TILE,
                                                          BN * K_TILE), 1);
        }
        wgmma_commit();
        // waited for here, not left running into the next tile's S and dP as the dK/dV kernel
        // does: dQ, S, dP and dS live at once need more than 168 registers, and ptxas then
        // serialises every wgmma (C7512)
        wgmma_wait<0>();
        if (lane == 0) mbar_arrive(&empty[n % STAGES]);  // this warp is done with K and V
    }

    // ---- the epilogue: dQ / sqrt(D), rounded, stored row by row (not past Sq) --------------
    fence_registers(dq_acc);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dq_acc[i] *= scale;
    store_tile<D>(dq_acc, dq + i64(bh) * sq * D, sq, D, m0 + consumer * 64, 0);
}
