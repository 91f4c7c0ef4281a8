// Attention forward on Hopper (sm_90a): O = softmax(Q K^T / sqrt(D)) V per (batch, head), in one
// kernel template whose flags make the five steps of lesson 18. Read them in order; each adds
// one idea of FlashAttention-3 (the last, of FlashAttention-4) to the one before.
//
//   step 1  a producer WARP (one thread issues every TMA copy: Q once, then K and V tiles into
//           a ring of STAGES slots guarded by full/empty mbarriers) and ONE consumer
//           warpgroup: S = Q K^T with wgmma from shared memory, the online softmax in
//           registers, O += P V with P straight from registers (wgmma's A operand), in turn
//   step 2  TWO consumer warpgroups, 64 query rows each: every K and V tile TMA brings serves
//           128 queries, so half the loads per query
//   step 3  within a warpgroup, the software pipeline: tile n's S = Q K^T and tile n-1's
//           O += P V are issued together, and the softmax of tile n runs while the tensor cores
//           still work on P V. S of one tile, P of the last and O are then live at once: with
//           128-key tiles at D = 128 that is more than the 168 registers a thread gets (below),
//           so the overlapped steps use 64-key tiles there; at D = 64, O is half as big and
//           128-key tiles fit (fwd.Step.key_tile)
//   step 4  across warpgroups, the ping-pong: named barriers make the two consumers take turns
//           at the tensor cores, so one's softmax runs while the other's matmuls do
//   step 5  lazy rescaling (FlashAttention-4's): a row's running max m moves only when a tile's
//           max exceeds it by more than 2^LAZY_GROWTH. Any m gives the right answer (O / l and
//           lse = m + log2 l do not depend on it) as long as 2^(S - m) stays in range, so P may
//           grow to 2^8 and O and l need no rescaling; after the first tiles most rows' maxima
//           stop growing, and a warp whose rows all kept theirs skips the D / 2 multiplies of
//           O (a vote). At D = 64 that multiply is half as long and the vote costs more than it
//           saves: step 5 is step 4 there (fwd.Step.rescales_lazily)
//
// Why a producer warp and not lesson 16's producer warpgroup with setmaxnreg: 9 or 12 warps on
// an SM's 4 schedulers put 3 on one of them, so the launch bound gives ptxas 168 registers a
// thread either way. setmaxnreg can move a producer warpgroup's registers to the consumers, but
// ptxas allocates the consumers' code for the larger count only when that code is a loop with
// nothing after it (lesson 17's block_scaled.cu met the same rule; the epilogue here follows the
// loop). A trial that met the rule (a loop that runs once) gave the consumers 240 registers and
// ran step 4 with 128-key tiles without spills: correct on the H100, and no faster than step 4
// (git c39b7ae, docs/results/nvidia-h100-80gb-hbm3-attention-step5-trial-c39b7ae.log). A warp
// costs the consumers nothing more and needs no register shuffling.
//
// Why no D = 256: the registers do not allow it in this design. A consumer thread's O
// would be 64 rows x 256 / 128 threads = 128 fp32 registers, and S and P of one 64-key
// tile 32 + 16 more: 176 of the 168 a thread gets beside the producer warp, before the
// statistics and addresses. FlashAttention-3 runs D = 256 with a producer warpgroup that
// hands the consumers 240 registers by setmaxnreg, the design tried above at D = 128 (no
// faster there); the registry refuses D = 256 with the reason (fwd.reason).
//
// Also tried, correct and slower (git 438cdc5, docs/results/nvidia-h200-attention-step5-
// persistent-trial-438cdc5.log): a persistent step 4, one block per SM walking the tiles
// blockIdx.x, blockIdx.x + gridDim.x, ..., the next tile's Q loaded once the last S is done.
// Launching a block per tile lets the hardware hand the next tile to whichever SM frees first;
// a fixed stride gave some blocks every long causal tile (0.52x cuDNN against step 4's 0.81x
// at S = 16384) and was slower without the mask too (0.76x against 0.85x).
//
// Layout: q (B, H, Sq, D), k and v (B, H_kv, Sk, D), contiguous; out (B, H, Sq, D). TMA sees each
// as a 2-D tensor of B*H*S rows of D*2 bytes, in boxes of 128 bytes (64 values of D) x 64 or BN
// rows, 128-byte swizzled (kernels/matmul/hopper/tma.py encodes them; D = 128 is two boxes side
// by side). A tile that runs past its head's last key reads the next head's rows (zeros past
// the tensor's end): their scores are masked to -inf, so P is 0 there and P V adds nothing. Rows
// past Sq are computed and not stored. causal masks key j > query i (top-left, as SDPA).
//
// The variants models run are runtime arguments (kernels/attention/__init__.py defines them):
//   group   grouped-query attention: query head h reads K/V head h / group, and the group's
//           heads are neighbours on the grid, so their blocks load the same K/V tiles together
//   window  a sliding window (0: none): query i sees keys i - window < j <= i; the key loop
//           starts at the first tile the block's first query sees, and masks only the tiles
//           that cross the window's edge, as it masks the diagonal
//   cu_q, cu_k  variable length (nullptr: dense): sequences packed end to end, q (tokens, H, D)
//           read as a 2-D tensor of tokens rows of H*D*2 bytes (head h from byte h*D*2 on); a
//           block's sequence and lengths come from the cumulative lengths, its tiles past the
//           sequence's end read the next sequence's rows, masked for keys and never stored
// Why runtime arguments and not template flags: group = 1, window = 0 and cu_q = nullptr cost the
// dense path a few integer operations and a branch once per block, and one comparison per key
// tile in the test of whether it needs a mask; nothing per score. The mask itself is two
// comparisons a score against bounds worked out per tile (lo < key <= hi), which made the key
// loop smaller than the dense-only kernel's: 554 SASS instructions against 614 at step 4, D = 128
// (NVRTC 13.0), with no spill and within the 168 registers (tests/test_attention_hopper_variants.py
// checks those). Template flags would double the builds to save a few integer instructions.
//
// Built by kernels/attention/hopper/fwd.py with course_utils.nvrtc for sm_90a; the head dim and
// the step's flags are template arguments (attention_fwd<128, 64, 4, 2, true, true, false> is
// step 4 at D = 128), the element type and the debug flags come from the generated header
// (lesson 16's wgmma.defines). Everything above the marker is for the editor.
//
// nvrtc arch: sm_90a
// nvrtc example: attention_fwd<128, 64, 4, 2, true, true, true>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
using a_t = __nv_bfloat16;    // q, k, v (bf16 or fp16)
using b_t = __nv_bfloat16;    // (the same: hopper.cuh names both operands of a matmul)
using out_t = __nv_bfloat16;  // out
constexpr bool TIMELINE = false;       // record when each role waits and works (timeline.py)
constexpr int TIMELINE_BLOCKS = 8;     // blocks that record
constexpr int TIMELINE_EVENTS = 1024;  // events per role and block
constexpr int WAIT_LIMIT_MCYCLES = 4000;  // a barrier wait longer than this traps; 0: no limit
// ==== kernel: everything above this line is replaced by the generated header ====

#include "../../matmul/hopper/hopper.cuh"  // lesson 16: mbarriers, TMA, wgmma, timeline
#include "attention.cuh"                   // wgmma with A in registers, V's descriptor, turns

template <int D, int BN, int STAGES, int CONSUMERS, bool OVERLAP, bool PINGPONG, bool LAZY>
__global__ void __launch_bounds__(WARPGROUP * CONSUMERS + 32, 1)
attention_fwd(const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
              const __grid_constant__ CUtensorMap tma_v, out_t* __restrict__ out,
              float* __restrict__ lse, int sq, int sk, int causal, float scale_log2,
              int group, int window, int heads, const int* __restrict__ cu_q,
              const int* __restrict__ cu_k, u64* timeline) {
    static_assert((D == 64 || D == 128) && (BN == 64 || BN == 128) && STAGES >= 2, "shape");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(!PINGPONG || (CONSUMERS == 2 && OVERLAP), "the ping-pong takes turns of step 3");
    constexpr float LAZY_GROWTH = 8.f;  // log2 of how far P may grow above 1 (step 5)
    constexpr int BM = 64 * CONSUMERS;                       // query rows per block
    constexpr int BOXES = D * int(sizeof(a_t)) / K_TILE;     // 128-byte boxes per row: 1 or 2
    constexpr int Q_BYTES = BM * D * int(sizeof(a_t));
    constexpr int KV_BYTES = BN * D * int(sizeof(a_t));      // one K (or V) tile
    constexpr int SLOT = 2 * KV_BYTES;                       // a ring slot: K tile, then V tile
    extern __shared__ char raw[];
    char* q_tile = aligned_smem(raw);  // [BOXES][BM rows][128 bytes]
    char* ring = q_tile + Q_BYTES;     // STAGES x ([BOXES][BN][128] of K, then of V)
    __shared__ u64 q_full, k_full[STAGES], v_full[STAGES], empty[STAGES];
    Timeline tl{timeline};

    // block b: query tile `order` of query head bh (causal: the longest tiles first), the
    // `group` query heads of one K/V head side by side (GQA). Neighbouring blocks run at the same
    // time: the group's heads, then one head's query tiles, read the same K and V, which then
    // come from L2 (heads of different K/V heads side by side: from DRAM)
    const int q_tiles = (sq + BM - 1) / BM;
    const int tile = blockIdx.x / group, order = tile % q_tiles, kv_bh = tile / q_tiles;
    const int bh = kv_bh * group + blockIdx.x % group;
    const int m0 = (causal ? q_tiles - 1 - order : order) * BM;
    // where the head's rows are in the 2-D views TMA reads: row q_y + i is query i, from byte
    // q_x on; ld: out's row length. Dense (B*H*S rows of D): head bh's rows from row bh * S
    int q_y, kv_y, q_x = 0, kv_x = 0, ld = D;
    if (cu_q == nullptr) {
        q_y = bh * sq, kv_y = kv_bh * sk;
    } else {  // varlen: (tokens, H*D) rows; sequence bh / heads from row cu_q[b] on
        const int b = bh / heads, h = bh % heads;
        q_y = cu_q[b], sq = cu_q[b + 1] - q_y;  // sq, sk: this sequence's lengths
        kv_y = cu_k[b], sk = cu_k[b + 1] - kv_y;
        q_x = h * D * int(sizeof(a_t)), kv_x = h / group * D * int(sizeof(a_t)), ld = heads * D;
        if (m0 >= sq) return;  // the grid is sized by the longest sequence: no queries here
    }
    const int kv_end = causal ? min(sk, m0 + BM) : sk;  // keys past the block's last query: none
    // a sliding window: the key tiles before the first query's window are skipped. Tile n of
    // the loops holds keys from (first + n) * BN on (a window past the keys leaves none)
    const int first = window > 0 ? max(m0 - window + 1, 0) / BN : 0;
    const int n_tiles = max((kv_end + BN - 1) / BN - first, 0);
    // warpgroups 0..CONSUMERS-1 consume; the last warp produces (timeline rows: producer 0,
    // consumer c at c + 1)
    const int consumer = threadIdx.x / WARPGROUP, role = (consumer + 1) % (CONSUMERS + 1);
    if (threadIdx.x == 0) {
        mbar_init(&q_full, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&k_full[s], 1);
            mbar_init(&v_full[s], 1);
            mbar_init(&empty[s], CONSUMERS * WARPGROUP / 32);  // each consumer warp releases
        }
        fence_barrier_init();
    }
    __syncthreads();

    // ---- the producer: one thread, Q once, then K and V tile by tile into the ring ----------
    if (consumer == CONSUMERS) {
        if (threadIdx.x != CONSUMERS * WARPGROUP) return;
        u64 t0 = now();
        mbar_expect_bytes(&q_full, Q_BYTES);
        for (int c = 0; c < CONSUMERS; ++c) {
            for (int b = 0; b < BOXES; ++b) {
                tma_load(q_tile + (b * BM + c * 64) * K_TILE, tma_q, q_x + b * K_TILE,
                         q_y + m0 + c * 64, &q_full);
            }
        }
        tl.record(0, LOAD, 0, 0, t0, now());
        for (int n = 0; n < n_tiles; ++n) {
            const int s = n % STAGES;
            t0 = now();
            mbar_wait(&empty[s], ((n / STAGES) & 1) ^ 1);  // first pass: fresh barriers let us in
            const u64 t1 = now();
            char* slot = ring + s * SLOT;
            const int key_y = kv_y + (first + n) * BN;
            mbar_expect_bytes(&k_full[s], KV_BYTES);
            for (int b = 0; b < BOXES; ++b) {
                tma_load(slot + b * BN * K_TILE, tma_k, kv_x + b * K_TILE, key_y, &k_full[s]);
            }
            mbar_expect_bytes(&v_full[s], KV_BYTES);
            for (int b = 0; b < BOXES; ++b) {
                tma_load(slot + KV_BYTES + b * BN * K_TILE, tma_v, kv_x + b * K_TILE, key_y,
                         &v_full[s]);
            }
            tl.record(0, WAIT_SLOT, s, n, t0, t1);
            tl.record(0, LOAD, s, n, t1, now());
        }
        return;
    }

    // ---- a consumer: 64 query rows; thread t holds rows row and row + 8 of them --------------
    const int t = threadIdx.x % WARPGROUP, lane = t % 32;
    const bool leader = t == 0, warp_leader = lane == 0;
    const int row = m0 + consumer * 64 + 16 * (t / 32) + lane / 4;  // the query of rows [0]
    const char* q_rows = q_tile + consumer * 64 * K_TILE;
    float s_acc[BN / 2];  // S = Q K^T of one tile (then P, exponentiated in place)
    float o[D / 2];       // O, unnormalised
    u32 p[BN / 16][4];    // P in 16 bits: wgmma's A operand, 16 keys per k step
    float m_run[2] = {-INF, -INF}, l_run[2] = {0.f, 0.f}, corr[2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    auto slot = [&](int n) { return ring + (n % STAGES) * SLOT; };

    // S = Q K^T: 4 wgmma per 128-byte box of D (k16 each), both operands K-major in shared memory
    auto issue_s = [&](int n) {
        mbar_wait(&k_full[n % STAGES], (n / STAGES) & 1);
        wgmma_fence();
#pragma unroll
        for (int b = 0; b < BOXES; ++b) {
            wgmma_box<BN>(s_acc, q_rows + b * BM * K_TILE, slot(n) + b * BN * K_TILE, b == 0);
        }
        wgmma_commit();
    };
    // O += P V: BN / 16 wgmma, A = P from registers, B = V (MN-major) from shared memory
    auto issue_pv = [&](int n) {
        mbar_wait(&v_full[n % STAGES], (n / STAGES) & 1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            const char* v_rows = slot(n) + KV_BYTES + kk * 16 * K_TILE;
            wgmma_rs<D>(o, p[kk], smem_descriptor_mn(v_rows, BN * K_TILE), 1);
        }
        wgmma_commit();
    };
    auto release = [&](int n) {  // this warp is done with tile n's K and V
        if (warp_leader) mbar_arrive(&empty[n % STAGES]);
    };
    // the online softmax of tile n, in place: s_acc becomes exp2(S * scale * log2 e - m), the
    // running max m and sum l are updated and corr says how much to shrink O by
    auto softmax = [&](int n) {
        fence_registers(s_acc);  // (the wgmma that wrote s_acc is done: read it after the wait)
        // masks only where needed: the tile that runs past Sk, the tiles that cross the diagonal
        // or the window's edge (query i sees key j when i - window < j <= i)
        const int k0 = (first + n) * BN, r0 = m0 + consumer * 64;  // first key, first query
        const bool masked = k0 + BN > sk || (causal && k0 + BN - 1 > r0) ||
                            (window > 0 && k0 <= r0 + 63 - window);
        int lo[2], hi[2];  // query row + 8h sees the keys lo < j <= hi
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            hi[h] = causal ? min(row + 8 * h, sk - 1) : sk - 1;
            lo[h] = window > 0 ? row + 8 * h - window : -1;
        }
        float mx[2] = {-INF, -INF};
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
            const int h = (i / 2) % 2;  // s_acc[4j + 2h + e]: row + 8h, key 8j + 2(lane%4) + e
            if (masked) {
                const int key = k0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
                if (key > hi[h] || key <= lo[h]) s_acc[i] = -INF;
            }
            mx[h] = fmaxf(mx[h], s_acc[i]);
        }
        float base[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float m_new = fmaxf(m_run[h], quad_max(mx[h]) * scale_log2);
            // step 5: keep the old max while the new one is at most LAZY_GROWTH above it (P
            // stays below 2^LAZY_GROWTH, and O and l need no rescaling); the four threads of a
            // row decide alike, their maxima being equal after quad_max
            if (LAZY && m_new - m_run[h] <= LAZY_GROWTH) m_new = m_run[h];
            base[h] = m_new == -INF ? 0.f : m_new;  // a row with no key yet: exp2(-inf) = 0
            corr[h] = exp2_approx(m_run[h] - base[h]);
            m_run[h] = m_new;
            l_run[h] *= corr[h];
        }
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
            const int h = (i / 2) % 2;
            s_acc[i] = exp2_approx(fmaf(s_acc[i], scale_log2, -base[h]));
            l_run[h] += s_acc[i];  // this thread's share; the 4 of a row are summed at the end
        }
    };
    auto rescale_and_pack = [&]() {
        fence_registers(o);
        // step 5: most tiles leave every max of the warp where it was: no multiply at all
        const bool rescale = !LAZY || __any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f);
        if (rescale) {
#pragma unroll
            for (int i = 0; i < D / 2; ++i) o[i] *= corr[(i / 2) % 2];
        }
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {  // S's accumulator pairs are P's A fragments
#pragma unroll
            for (int r = 0; r < 4; ++r) p[kk][r] = pack2(s_acc[8 * kk + 2 * r], s_acc[8 * kk + 2 * r + 1]);
        }
    };

    mbar_wait(&q_full, 0);
    if constexpr (!OVERLAP) {
        // steps 1-2: one thing at a time. S, wait, softmax, P V, wait.
        for (int n = 0; n < n_tiles; ++n) {
            const u64 t0 = now();
            issue_s(n);
            const u64 t1 = now();
            wgmma_wait<0>();
            const u64 t2 = now();
            softmax(n);
            rescale_and_pack();
            const u64 t3 = now();
            issue_pv(n);
            wgmma_wait<0>();
            release(n);
            if (leader) {
                tl.record(role, WAIT_DATA, n % STAGES, n, t0, t1);
                tl.record(role, COMPUTE, n % STAGES, n, t1, t2);
                tl.record(role, SOFTMAX, n % STAGES, n, t2, t3);
                tl.record(role, COMPUTE, n % STAGES, n, t3, now());
            }
        }
    } else if (n_tiles > 0) {  // (no tile: O = 0)
        // steps 3-4: tile n's S and tile n-1's P V are issued together (one "turn" at the tensor
        // cores); the softmax of tile n runs while P V is still in flight.
        if constexpr (PINGPONG) {
            if (consumer == 1) turn_pass(consumer);  // consumer 0 takes the first turn
        }
        auto take_turn = [&]() {
            if constexpr (PINGPONG) turn_wait(consumer);
        };
        auto end_turn = [&](bool last) {
            // the other consumer's last turn is not waited for: consumer 1 skips its last pass
            if constexpr (PINGPONG) {
                if (!(last && consumer == 1)) turn_pass(consumer);
            }
        };
        u64 t0 = now();
        take_turn();
        u64 t1 = now();
        issue_s(0);
        end_turn(false);
        u64 t2 = now();
        wgmma_wait<0>();
        u64 t3 = now();
        softmax(0);
        rescale_and_pack();
        if (leader) {
            tl.record(role, WAIT_TURN, 0, 0, t0, t1);
            tl.record(role, WAIT_DATA, 0, 0, t1, t2);
            tl.record(role, COMPUTE, 0, 0, t2, t3);
            tl.record(role, SOFTMAX, 0, 0, t3, now());
        }
        for (int n = 1; n < n_tiles; ++n) {
            t0 = now();
            take_turn();
            t1 = now();
            issue_s(n);
            issue_pv(n - 1);
            end_turn(false);
            t2 = now();
            wgmma_wait<1>();  // S of tile n is done (P V of tile n - 1 may still run)
            t3 = now();
            softmax(n);
            const u64 t4 = now();
            wgmma_wait<0>();  // P V of tile n - 1 is done: its slot is free, O is complete
            release(n - 1);
            rescale_and_pack();
            if (leader) {
                tl.record(role, WAIT_TURN, n % STAGES, n, t0, t1);
                tl.record(role, WAIT_DATA, n % STAGES, n, t1, t2);
                tl.record(role, COMPUTE, n % STAGES, n, t2, t3);
                tl.record(role, SOFTMAX, n % STAGES, n, t3, t4);
                tl.record(role, COMPUTE, (n - 1) % STAGES, n - 1, t4, now());
            }
        }
        t0 = now();
        take_turn();
        t1 = now();
        issue_pv(n_tiles - 1);
        end_turn(true);
        t2 = now();
        wgmma_wait<0>();
        release(n_tiles - 1);
        if (leader) {
            tl.record(role, WAIT_TURN, 0, n_tiles, t0, t1);
            tl.record(role, COMPUTE, (n_tiles - 1) % STAGES, n_tiles - 1, t2, now());
        }
    }

    // ---- the epilogue: O / l, rounded, stored row by row (rows past Sq are not written: with
    // varlen they are the next sequence's, whose own block writes them) ---------------------
    // For training, lse (not nullptr) gets each row's log-sum-exp in base 2, m + log2(l) (the
    // scores scaled by log2(e) / sqrt(D)): the backward rebuilds P = 2^(S * scale_log2 - lse)
    // from it (attention_bwd.cu). One thread of the four that share a row writes it.
    fence_registers(o);
    const u64 t0 = now();
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float l = quad_sum(l_run[h]);
        inv[h] = l > 0.f ? 1.f / l : 0.f;
        if (lse != nullptr && lane % 4 == 0 && row + 8 * h < sq) {
            lse[i64(bh) * sq + row + 8 * h] = m_run[h] + log2f(l);
        }
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] *= inv[(i / 2) % 2];
    store_tile<D>(o, out + i64(q_y) * ld + q_x / int(sizeof(a_t)), sq, ld, m0 + consumer * 64, 0);
    if (leader) tl.record(role, STORE, 0, n_tiles, t0, now());
}
