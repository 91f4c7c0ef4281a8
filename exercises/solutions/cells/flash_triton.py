import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # exp(x) = exp2(x · log2 e): the GPU's exp is exp2


def tiles(q):
    """(BLOCK_M, BLOCK_N, num_warps) for q: on a GPU, chosen on an H100 (bf16, S = 4096); in
    the interpreter (a CPU tensor), the square tiles it runs fastest."""
    if q.is_cuda and q.shape[-1] <= 64:
        return 128, 64, 8
    return 64, 64, 4


def precision(q):
    """tl.dot's input_precision: exact products for float32 (not tf32); 16-bit inputs are
    multiplied exactly whatever it says."""
    return "ieee" if q.dtype == torch.float32 else "tf32"


@triton.jit
def fwd_kernel(Q, K, V, O, L, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,  # noqa: E741 (the paper's names: O, l)
               n_heads, seq_q, seq_k, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """One tile of BLOCK_M queries of one (batch, head): out, and L in base 2."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)  # 64-bit offsets: B·H·S·D passes 2^31 at scale
    h = (bh % n_heads).to(tl.int64)
    rows = start_m + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    row_ok = rows < seq_q
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqm + dims[None, :],
                mask=row_ok[:, None], other=0.0)
    k_ptrs = K + b * skb + h * skh + cols[:, None] * skn + dims[None, :]
    v_ptrs = V + b * svb + h * svh + cols[:, None] * svn + dims[None, :]
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_M,), tl.float32)  # noqa: E741 (the paper's names: O, l)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    # keys every query of the tile sees, in whole tiles, need no mask; the causal diagonal and
    # the ragged last tile do; causal, keys past the tile's last query are never read. Every
    # row sees key 0 in the first tile, so m is finite from then on (Sk = 0 never launches)
    end = tl.minimum(seq_k, start_m + BLOCK_M) if CAUSAL else seq_k
    full = (tl.minimum(start_m, seq_k) if CAUSAL else seq_k) // BLOCK_N * BLOCK_N
    k_step, v_step = BLOCK_N * skn, BLOCK_N * svn
    for start_n in range(0, end, BLOCK_N):
        masked = start_n >= full
        keys = start_n + cols
        k = tl.load(k_ptrs, mask=(keys < seq_k)[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=(keys < seq_k)[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        if masked:
            visible = keys[None, :] < seq_k
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None])
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.math.exp2(m - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)  # noqa: E741 (the paper's names: O, l)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m = m_new
        k_ptrs += k_step
        v_ptrs += v_step
    tl.store(O + b * sob + h * soh + rows[:, None] * som + dims[None, :],
             (acc / l[:, None]).to(O.dtype.element_ty), mask=row_ok[:, None])
    tl.store(L + bh.to(tl.int64) * seq_q + rows, m + tl.math.log2(l), mask=row_ok)


@triton.jit
def dq_kernel(Q, K, V, O, DO, L, DELTA, DQ, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn,  # noqa: E741 (the paper's names: O, l)
              sob, soh, som, sdb, sdh, sdm, n_heads, seq_q, seq_k, qk_scale, sm_scale,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """dQ of one tile of queries, walking the keys it sees; first it stores the tile's
    Δ = rowsum(dO ∘ O), which the dK/dV kernel (launched after) reads."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    rows = start_m + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    row_ok = rows < seq_q
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqm + dims[None, :],
                mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + rows[:, None] * sdm + dims[None, :],
                 mask=row_ok[:, None], other=0.0)
    o = tl.load(O + b * sob + h * soh + rows[:, None] * som + dims[None, :],
                mask=row_ok[:, None], other=0.0)
    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)
    tl.store(DELTA + bh.to(tl.int64) * seq_q + rows, delta, mask=row_ok)
    lse = tl.load(L + bh.to(tl.int64) * seq_q + rows, mask=row_ok, other=0.0)
    k_ptrs = K + b * skb + h * skh + cols[:, None] * skn + dims[None, :]
    v_ptrs = V + b * svb + h * svh + cols[:, None] * svn + dims[None, :]
    dq = tl.zeros((BLOCK_M, D), tl.float32)
    end = tl.minimum(seq_k, start_m + BLOCK_M) if CAUSAL else seq_k
    k_step, v_step = BLOCK_N * skn, BLOCK_N * svn
    for start_n in range(0, end, BLOCK_N):
        keys = start_n + cols
        k = tl.load(k_ptrs, mask=(keys < seq_k)[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=(keys < seq_k)[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        visible = keys[None, :] < seq_k
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None])
        p = tl.where(visible, tl.math.exp2(s * qk_scale - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)
        k_ptrs += k_step
        v_ptrs += v_step
    tl.store(DQ + bh.to(tl.int64) * seq_q * D + rows[:, None] * D + dims[None, :],
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def dkdv_kernel(Q, K, V, DO, L, DELTA, DK, DV, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn,
                sdb, sdh, sdm, n_heads, seq_q, seq_k, qk_scale, sm_scale, D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                PRECISION: tl.constexpr):
    """dK and dV of one tile of keys, walking the queries that see them; transposed (keys
    along the rows), so Pᵀ is computed as it is used. A padded query row (past Sq) has
    q, dO and Δ zero: it adds nothing, whatever its P."""
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    keys = start_n + tl.arange(0, BLOCK_N)
    rows0 = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    key_ok = keys < seq_k
    k = tl.load(K + b * skb + h * skh + keys[:, None] * skn + dims[None, :],
                mask=key_ok[:, None], other=0.0)
    v = tl.load(V + b * svb + h * svh + keys[:, None] * svn + dims[None, :],
                mask=key_ok[:, None], other=0.0)
    dk = tl.zeros((BLOCK_N, D), tl.float32)
    dv = tl.zeros((BLOCK_N, D), tl.float32)
    first = start_n // BLOCK_M * BLOCK_M if CAUSAL else 0  # earlier queries see none of them
    q_ptrs = Q + b * sqb + h * sqh + (first + rows0)[:, None] * sqm + dims[None, :]
    do_ptrs = DO + b * sdb + h * sdh + (first + rows0)[:, None] * sdm + dims[None, :]
    lse_ptrs = L + bh.to(tl.int64) * seq_q + first + rows0
    delta_ptrs = DELTA + bh.to(tl.int64) * seq_q + first + rows0
    q_step, do_step = BLOCK_M * sqm, BLOCK_M * sdm
    for start_m in range(first, seq_q, BLOCK_M):
        rows = start_m + rows0
        row_ok = rows < seq_q
        q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
        do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0)
        lse = tl.load(lse_ptrs, mask=row_ok, other=0.0)
        delta = tl.load(delta_ptrs, mask=row_ok, other=0.0)
        st = tl.dot(k, tl.trans(q), input_precision=PRECISION)
        pt = tl.math.exp2(st * qk_scale - lse[None, :])
        if CAUSAL:
            pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        dst = pt * (dpt - delta[None, :])
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PRECISION)
        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PRECISION)
        q_ptrs += q_step
        do_ptrs += do_step
        lse_ptrs += BLOCK_M
        delta_ptrs += BLOCK_M
    out = bh.to(tl.int64) * seq_k * D + keys[:, None] * D + dims[None, :]
    tl.store(DK + out, (dk * sm_scale).to(DK.dtype.element_ty), mask=key_ok[:, None])
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=key_ok[:, None])


def unit_last(t):
    """t with its last dimension of stride 1 (the kernels step through D one by one)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def strides(*tensors):
    """(batch, head, row) strides of each (B, H, S, D) tensor, in order."""
    return [s for t in tensors for s in t.stride()[:3]]


class TritonFlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        b, h, sq, d = q.shape
        sk = k.shape[2]
        if d not in (16, 32, 64, 128):
            raise ValueError(f"q: expected a head dim of 16, 32, 64 or 128, got {d}")
        q, k, v = unit_last(q), unit_last(k), unit_last(v)
        out = torch.empty(b, h, sq, d, device=q.device, dtype=q.dtype)
        lse = torch.empty(b, h, sq, device=q.device, dtype=torch.float32)  # base 2
        if sk == 0:  # no key: output 0, L = -inf
            out.zero_()
            lse.fill_(float("-inf"))
        elif sq:
            block_m, block_n, warps = tiles(q)
            fwd_kernel[(triton.cdiv(sq, block_m), b * h)](
                q, k, v, out, lse, *strides(q, k, v, out), h, sq, sk, LOG2E / math.sqrt(d),
                D=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                PRECISION=precision(q), num_warps=warps)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, out, lse = ctx.saved_tensors
        b, h, sq, d = q.shape
        sk = k.shape[2]
        do = unit_last(do)
        dq = torch.empty(b, h, sq, d, device=q.device, dtype=q.dtype)
        dk = torch.empty(b, h, sk, d, device=q.device, dtype=k.dtype)
        dv = torch.empty(b, h, sk, d, device=q.device, dtype=v.dtype)
        if sk == 0 or sq == 0:  # no key or no query: every gradient is 0
            return dq.zero_(), dk.zero_(), dv.zero_(), None
        block_m, block_n, warps = tiles(q)
        delta = torch.empty(b, h, sq, device=q.device, dtype=torch.float32)
        scale = 1.0 / math.sqrt(d)
        common = dict(D=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=ctx.causal,
                      PRECISION=precision(q), num_warps=warps)
        dq_kernel[(triton.cdiv(sq, block_m), b * h)](
            q, k, v, out, do, lse, delta, dq, *strides(q, k, v, out, do), h, sq, sk,
            scale * LOG2E, scale, **common)
        dkdv_kernel[(triton.cdiv(sk, block_n), b * h)](
            q, k, v, do, lse, delta, dk, dv, *strides(q, k, v, do), h, sq, sk,
            scale * LOG2E, scale, **common)
        return dq, dk, dv, None
