// The dK/dV walk's pieces, shared by both versions of the Hopper backward: attention_bwd.cu
// (version 1, two kernels) and attention_bwd_fused.cu (version 2, one kernel that also sums dQ).
// A block owns 128 keys of one head (two consumer warpgroups of 64) and walks the query tiles
// that see them; per tile each warpgroup computes the TRANSPOSED scores S^T = K Q^T and
// dP^T = V dO^T, then P^T and dS^T, which are wgmma's A operand for dV += P^T dO and dK += dS^T
// Q (attention_bwd.cu's header says why). Both walk the same ring (KeyWalk: the block's K and
// V, then Q and dO tiles refilled by thread 0); the schedule (what waits for what) stays in each
// kernel: it is what the two versions differ in. Included after hopper.cuh and attention.cuh.
#pragma once

constexpr int BWD_KEYS = 2 * 64;  // keys per block: two warpgroups of 64

// Which keys and query tiles a block owns. Block b: key tile b % k_tiles of head b / k_tiles.
// Causal: query tiles before the one holding the block's first key see none of its keys (the
// first key tiles have the most work: they come first). n_tiles is 0 when causal and every key
// is past the last query (block-uniform: the block stores zeros and leaves before any barrier).
struct KeyBlock {
    int bh, n0, first, n_tiles;
};
template <int BQ>
__device__ __forceinline__ KeyBlock key_block(int sq, int sk, int causal) {
    const int k_tiles = (sk + BWD_KEYS - 1) / BWD_KEYS;
    const int bh = blockIdx.x / k_tiles, n0 = (blockIdx.x % k_tiles) * BWD_KEYS;
    const int q_tiles = (sq + BQ - 1) / BQ;
    const int first = causal ? min(n0 / BQ, q_tiles) : 0;
    return {bh, n0, first, q_tiles - first};
}

// The block's K and V once: per warpgroup c, 64 rows into each 128-byte box of D
template <int D>
__device__ __forceinline__ void load_keys(char* k_tile, char* v_tile, const CUtensorMap& tma_k,
                                          const CUtensorMap& tma_v, u64* kv_full, int row0) {
    constexpr int BOXES = D * int(sizeof(a_t)) / K_TILE;
    mbar_expect_bytes(kv_full, 2 * BWD_KEYS * D * int(sizeof(a_t)));
    for (int c = 0; c < 2; ++c) {
        for (int b = 0; b < BOXES; ++b) {
            const int at = (b * BWD_KEYS + c * 64) * K_TILE, row = row0 + c * 64;
            tma_load(k_tile + at, tma_k, b * K_TILE, row, kv_full);
            tma_load(v_tile + at, tma_v, b * K_TILE, row, kv_full);
        }
    }
}

// One query tile's Q, then dO, into a ring slot ([BOXES][BQ][128] each), completing on `full`
template <int D, int BQ>
__device__ __forceinline__ void load_query_tile(char* slot, const CUtensorMap& tma_q,
                                                const CUtensorMap& tma_do, u64* full, int row) {
    constexpr int BOXES = D * int(sizeof(a_t)) / K_TILE, TILE_BYTES = BQ * D * int(sizeof(a_t));
    mbar_expect_bytes(full, 2 * TILE_BYTES);
    for (int b = 0; b < BOXES; ++b) {
        tma_load(slot + b * BQ * K_TILE, tma_q, b * K_TILE, row, full);
        tma_load(slot + TILE_BYTES + b * BQ * K_TILE, tma_do, b * K_TILE, row, full);
    }
}

// The walk's shared memory and its ring, the same in both versions: the block's K and V, loaded
// once, then STAGES slots, each one query tile's Q then its dO, refilled as the walk goes.
// Thread 0 (a consumer: the kernels have no producer warp, attention_bwd.cu's header says why)
// issues every copy. The barriers are the kernel's own __shared__ variables: kv_full (K and V
// are in) and, per slot, full (its two tiles are in) and empty (each of the 8 warps is done).
template <int D, int BQ, int STAGES>
struct KeyWalk {
    static constexpr int KV_BYTES = BWD_KEYS * D * int(sizeof(a_t));  // the block's K (or V)
    static constexpr int TILE_BYTES = BQ * D * int(sizeof(a_t));      // one Q (or dO) tile
    static constexpr int SLOT = 2 * TILE_BYTES;  // a ring slot: Q tile, then dO tile
    static constexpr int BYTES = 2 * KV_BYTES + STAGES * SLOT;  // all of it, from aligned_smem
    char* k_tile;  // [BOXES][BWD_KEYS rows][128 bytes]
    char* v_tile;  // the same
    char* ring;    // STAGES x ([BOXES][BQ][128] of Q, then of dO); version 2's dS^T tiles follow
    u64 *kv_full, *full, *empty;
    const CUtensorMap &tma_q, &tma_do;
    int bh, sq, first, n_tiles;
    bool producer;  // thread 0

    __device__ __forceinline__ KeyWalk(char* raw, u64* kv_full, u64* full, u64* empty,
                                       const CUtensorMap& tma_q, const CUtensorMap& tma_do,
                                       const KeyBlock& blk, int sq)
        : k_tile(aligned_smem(raw)), v_tile(k_tile + KV_BYTES), ring(v_tile + KV_BYTES),
          kv_full(kv_full), full(full), empty(empty), tma_q(tma_q), tma_do(tma_do), bh(blk.bh),
          sq(sq), first(blk.first), n_tiles(blk.n_tiles), producer(threadIdx.x == 0) {}

    // query tile first + n: Q and dO into slot n % STAGES
    __device__ __forceinline__ void load_tile(int n) const {
        load_query_tile<D, BQ>(ring + (n % STAGES) * SLOT, tma_q, tma_do, &full[n % STAGES],
                               bh * sq + (first + n) * BQ);
    }

    // the barriers set up, then K and V once and the first STAGES query tiles on their way
    __device__ __forceinline__ void start(const CUtensorMap& tma_k, const CUtensorMap& tma_v,
                                          int sk, int n0) const {
        if (producer) {
            mbar_init(kv_full, 1);
            for (int s = 0; s < STAGES; ++s) {
                mbar_init(&full[s], 1);
                mbar_init(&empty[s], 2 * WARPGROUP / 32);  // each warp releases
            }
            fence_barrier_init();
        }
        __syncthreads();
        if (producer) {
            load_keys<D>(k_tile, v_tile, tma_k, tma_v, kv_full, bh * sk + n0);
            for (int n = 0; n < min(STAGES, n_tiles); ++n) load_tile(n);
        }
    }

    // tile n - 1's slot is free (both warpgroups are past its last matmul): this warp says so,
    // and thread 0 refills it with tile n - 1 + STAGES once all 8 warps have
    __device__ __forceinline__ void release_previous(int n, int lane) const {
        if (n > 0) {
            if (lane == 0) mbar_arrive(&empty[(n - 1) % STAGES]);
            if (producer && n - 1 + STAGES < n_tiles) {
                mbar_wait(&empty[(n - 1) % STAGES], ((n - 1) / STAGES) & 1);
                load_tile(n - 1 + STAGES);
            }
        }
    }
};

// This tile's (lse2, Delta) per query, staged in shared memory by the warpgroup (the reduction
// index of dV and dK is the query: they are per COLUMN of S^T); +inf past Sq: P = 2^-inf = 0
template <int BQ>
__device__ __forceinline__ void stage_query_stats(float2* pq, const float* lse,
                                                  const float* delta, int bh, int sq, int m0,
                                                  int t) {
    if (t < BQ) {
        const i64 at = i64(bh) * sq + m0 + t;
        pq[t] = m0 + t < sq ? make_float2(lse[at], delta[at]) : make_float2(INF, 0.f);
    }
}

// S^T = K Q^T, then dP^T = V dO^T, each its own commit group (both operands K-major: the
// forward's S = Q K^T with the roles swapped)
template <int D, int BQ>
__device__ __forceinline__ void issue_scores_t(float (&st)[BQ / 2], float (&dpt)[BQ / 2],
                                               const char* k_rows, const char* v_rows,
                                               const char* q_slot, const char* do_slot) {
    constexpr int BOXES = D * int(sizeof(a_t)) / K_TILE;
#pragma unroll
    for (int b = 0; b < BOXES; ++b) {
        wgmma_box<BQ>(st, k_rows + b * BWD_KEYS * K_TILE, q_slot + b * BQ * K_TILE, b == 0);
    }
    wgmma_commit();
#pragma unroll
    for (int b = 0; b < BOXES; ++b) {
        wgmma_box<BQ>(dpt, v_rows + b * BWD_KEYS * K_TILE, do_slot + b * BQ * K_TILE, b == 0);
    }
    wgmma_commit();
}

// P^T = 2^(S^T * scale_log2 - lse2[query]) in place; st[4j + 2h + e]: key + 8h, query
// m0 + 8j + 2(lane%4) + e. Only tiles that need it are masked: across the causal diagonal and,
// with PAST_SK (version 2, whose dQ reads every key of the block), keys at or past Sk
template <int BQ, bool PAST_SK>
__device__ __forceinline__ void probabilities_t(float (&st)[BQ / 2], const float2* pq,
                                                float scale_log2, bool masked, int causal,
                                                int key, int m0, int sk, int lane) {
#pragma unroll
    for (int i = 0; i < BQ / 2; ++i) {
        const int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2, k = key + 8 * ((i / 2) % 2);
        float p = exp2_approx(fmaf(st[i], scale_log2, -pq[col].x));
        if constexpr (PAST_SK) {
            if (masked && (k >= sk || (causal && k > m0 + col))) p = 0.f;
        } else {
            if (masked && k > m0 + col) p = 0.f;
        }
        st[i] = p;
    }
}

// dS^T = P^T o (dP^T - Delta[query]), in place of dP^T
template <int BQ>
__device__ __forceinline__ void scores_gradient_t(float (&dpt)[BQ / 2], const float (&pt)[BQ / 2],
                                                  const float2* pq, int lane) {
#pragma unroll
    for (int i = 0; i < BQ / 2; ++i) {
        dpt[i] = pt[i] * (dpt[i] - pq[8 * (i / 4) + 2 * (lane % 4) + i % 2].y);
    }
}

// accumulator pairs rounded to 16 bits are wgmma's A fragments, 16 queries per k step
template <int BQ>
__device__ __forceinline__ void pack_a(u32 (&a)[BQ / 16][4], const float (&x)[BQ / 2]) {
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r) a[kk][r] = pack2(x[8 * kk + 2 * r], x[8 * kk + 2 * r + 1]);
    }
}

// acc (+)= A (64 keys x BQ queries, registers) x a query tile of the ring (BQ x D, read
// MN-major as the forward's V): dV += P^T dO, dK += dS^T Q. accumulate = false overwrites acc
template <int D, int BQ>
__device__ __forceinline__ void wgmma_rs_tile(float (&acc)[D / 2], const u32 (&a)[BQ / 16][4],
                                              const char* tile, bool accumulate) {
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
        wgmma_rs<D>(acc, a[kk], smem_descriptor_mn(tile + kk * 16 * K_TILE, BQ * K_TILE),
                    accumulate || kk > 0);
    }
}

// the epilogue: dK / sqrt(D) and dV, rounded, stored row by row (not past Sk)
template <int D>
__device__ __forceinline__ void store_key_gradients(float (&dk_acc)[D / 2], float (&dv_acc)[D / 2],
                                                    out_t* dk, out_t* dv, int bh, int sk,
                                                    int row0, float scale) {
    fence_registers(dk_acc);
    fence_registers(dv_acc);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dk_acc[i] *= scale;
    store_tile<D>(dk_acc, dk + i64(bh) * sk * D, sk, D, row0, 0);
    store_tile<D>(dv_acc, dv + i64(bh) * sk * D, sk, D, row0, 0);
}

// no query sees these keys (causal): dK = dV = 0, and nothing to load
template <int D>
__device__ __forceinline__ void store_zero_gradients(out_t* dk, out_t* dv, int bh, int sk,
                                                     int row0) {
    const float zeros[D / 2] = {};
    store_tile<D>(zeros, dk + i64(bh) * sk * D, sk, D, row0, 0);
    store_tile<D>(zeros, dv + i64(bh) * sk * D, sk, D, row0, 0);
}
