"""Wrong answers to exercise attention_variants.flash_triton, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

from exercises.solutions.blind import edited

ID = "attention_variants.flash_triton"
# The first answer whole; each other one is it with its own mistake in place of the first's
# (edited: each old text occurs once in the first answer).
FIRST = 'running maximum m started at 0 instead of -inf (underflows when every score is far below 0)'
BASE = r'''
# ✏️ Exercise attention_variants.flash_triton: edit this cell, run it, then run the check below
import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, l_ptr,
                sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                sob, soh, sos, sod, n_heads, seq_q, seq_k, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr, IEEE: tl.constexpr):
    q_start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < seq_q
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    end = seq_k
    if CAUSAL:
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    for start_n in range(0, end, BLOCK_N):
        keys = start_n + cols
        kin = keys < seq_k
        k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * skd,
                    mask=kin[:, None], other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * svd,
                    mask=kin[:, None], other=0.0)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = s * qk_scale
        ok = (keys < seq_k)[None, :]
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None])
        s_max = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s_max, 1))
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_sub[:, None])
        p = tl.where(ok, p, 0.0)
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        if IEEE:
            acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    l_i = tl.where(l_i == 0.0, 1.0, l_i)  # no keys (Sk = 0): output 0, not 0/0
    o = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + rows[:, None] * sos + dims[None, :] * sod,
             o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(l_ptr + bh * seq_q + rows, (m_i + tl.math.log2(l_i)).to(l_ptr.dtype.element_ty), mask=row_ok)


@triton.jit
def _dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, l_ptr, d_ptr, dk_ptr, dv_ptr,
                 sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                 sdb, sdh, sds, sdd, sdkb, sdkh, sdks, sdkd, sdvb, sdvh, sdvs, sdvd,
                 n_heads, seq_q, seq_k, sm_scale, qk_scale,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, IEEE: tl.constexpr):
    k_start = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    keys = k_start + tl.arange(0, BLOCK_N)
    rows0 = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    kin = keys < seq_k
    k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * skd,
                mask=kin[:, None], other=0.0)
    v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * svd,
                mask=kin[:, None], other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    first = 0
    if CAUSAL:
        first = (k_start ) // BLOCK_M * BLOCK_M
    for start_m in range(first, seq_q, BLOCK_M):
        rows = start_m + rows0
        rok = rows < seq_q
        q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,
                    mask=rok[:, None], other=0.0)
        do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * sdd,
                     mask=rok[:, None], other=0.0)
        lse = tl.load(l_ptr + bh * seq_q + rows, mask=rok, other=0.0).to(tl.float32)
        delta = tl.load(d_ptr + bh * seq_q + rows, mask=rok, other=0.0)
        if IEEE:
            st = tl.dot(k, tl.trans(q), input_precision="ieee")
        else:
            st = tl.dot(k, tl.trans(q))
        pt = tl.math.exp2(st * qk_scale - lse[None, :])
        ok = kin[:, None] & rok[None, :]
        if CAUSAL:
            ok = ok & (keys[:, None] <= rows[None, :])
        pt = tl.where(ok, pt, 0.0)
        if IEEE:
            dv += tl.dot(pt, do, input_precision="ieee")
            dpt = tl.dot(v, tl.trans(do), input_precision="ieee")
        else:
            dv += tl.dot(pt.to(do.dtype), do)
            dpt = tl.dot(v, tl.trans(do))
        dst = pt * (dpt - delta[None, :])
        if IEEE:
            dk += tl.dot(dst, q, input_precision="ieee")
        else:
            dk += tl.dot(dst.to(q.dtype), q)
    tl.store(dk_ptr + b * sdkb + h * sdkh + keys[:, None] * sdks + dims[None, :] * sdkd,
             (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=kin[:, None])
    tl.store(dv_ptr + b * sdvb + h * sdvh + keys[:, None] * sdvs + dims[None, :] * sdvd,
             dv.to(dv_ptr.dtype.element_ty), mask=kin[:, None])


@triton.jit
def _dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, l_ptr, d_ptr, dq_ptr, dk_ptr, dv_ptr,
               sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
               sdb, sdh, sds, sdd, sdqb, sdqh, sdqs, sdqd,
               n_heads, seq_q, seq_k, sm_scale, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr, IEEE: tl.constexpr, ATOMIC_KV: tl.constexpr):
    q_start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    rok = rows < seq_q
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,
                mask=rok[:, None], other=0.0)
    do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * sdd,
                 mask=rok[:, None], other=0.0)
    lse = tl.load(l_ptr + bh * seq_q + rows, mask=rok, other=0.0).to(tl.float32)
    delta = tl.load(d_ptr + bh * seq_q + rows, mask=rok, other=0.0)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    end = seq_k
    if CAUSAL:
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    for start_n in range(0, end, BLOCK_N):
        keys = start_n + cols
        kin = keys < seq_k
        k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * skd,
                    mask=kin[:, None], other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * svd,
                    mask=kin[:, None], other=0.0)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        p = tl.math.exp2(s * qk_scale - lse[:, None])
        ok = kin[None, :] & rok[:, None]
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None])
        p = tl.where(ok, p, 0.0)
        if IEEE:
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
        else:
            dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        if IEEE:
            dq += tl.dot(ds, k, input_precision="ieee")
        else:
            dq += tl.dot(ds.to(k.dtype), k)
        if ATOMIC_KV:
            # dK and dV summed over the query tiles straight from here
            if IEEE:
                dv_part = tl.dot(tl.trans(p), do, input_precision="ieee")
                dk_part = tl.dot(tl.trans(ds), q, input_precision="ieee")
            else:
                dv_part = tl.dot(tl.trans(p.to(do.dtype)), do)
                dk_part = tl.dot(tl.trans(ds.to(q.dtype)), q)
            off = bh * seq_k * HEAD_DIM + keys[:, None] * HEAD_DIM + dims[None, :]
            tl.atomic_add(dv_ptr + off, dv_part, mask=kin[:, None])
            tl.atomic_add(dk_ptr + off, dk_part * sm_scale, mask=kin[:, None])
    tl.store(dq_ptr + b * sdqb + h * sdqh + rows[:, None] * sdqs + dims[None, :] * sdqd,
             (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=rok[:, None])


BLOCK_M = 32
BLOCK_N = 32
ATOMIC_KV = False


class TritonFlashAttention(torch.autograd.Function):
    """softmax(q kᵀ / √D) v by Triton kernels: q (B, H, Sq, D), k and v (B, H, Sk, D);
    causal: query i sees key j when j <= i. Called as
    TritonFlashAttention.apply(q, k, v, causal)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        """out (B, H, Sq, D) in q's dtype from your forward kernel (a program per tile of
        queries, the online softmax over tiles of keys); ctx.save_for_backward(q, k, v, out, L),
        L (B, H, Sq) float32, the log-sum-exp of each query's scaled scores (base e or 2)."""
        b, h, seq_q, d = q.shape
        seq_k = k.shape[2]
        if d not in (16, 32, 64, 128):
            raise ValueError(f"q: head dim D must be 16, 32, 64 or 128, got {d}")
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        L = torch.empty((b, h, seq_q), dtype=torch.float32, device=q.device)

        if seq_q > 0:
            grid = (triton.cdiv(seq_q, BLOCK_M), b * h)
            _fwd_kernel[grid](q, k, v, out, L, *q.stride(), *k.stride(), *v.stride(),
                              *out.stride(), h, seq_q, seq_k, LOG2E / math.sqrt(d),
                              HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                              CAUSAL=bool(causal), IEEE=q.dtype == torch.float32)
        ctx.save_for_backward(q, k, v, out, L)
        ctx.causal = bool(causal)
        return out

    @staticmethod
    def backward(ctx, do):
        """(dq, dk, dv, None) from your kernels: dK and dV by a program per tile of keys; dQ
        by a kernel of its own over tiles of queries, or tl.atomic_add."""
        q, k, v, out, L = ctx.saved_tensors
        b, h, seq_q, d = q.shape
        seq_k = k.shape[2]
        dq = torch.zeros(q.shape, dtype=q.dtype, device=q.device)
        dk = torch.zeros(k.shape, dtype=k.dtype, device=k.device)
        dv = torch.zeros(v.shape, dtype=v.dtype, device=v.device)
        if seq_q == 0 or seq_k == 0:
            return dq, dk, dv, None
        delta = (do.float() * out.float()).sum(-1).contiguous()
        sm_scale = 1.0 / math.sqrt(d)
        ieee = q.dtype == torch.float32
        dk32 = torch.zeros((b, h, seq_k, d), dtype=torch.float32, device=q.device)
        dv32 = torch.zeros((b, h, seq_k, d), dtype=torch.float32, device=q.device)
        if not ATOMIC_KV:
            _dkdv_kernel[(triton.cdiv(seq_k, BLOCK_N), b * h)](
                q, k, v, do, L, delta, dk, dv, *q.stride(), *k.stride(), *v.stride(),
                *do.stride(), *dk.stride(), *dv.stride(), h, seq_q, seq_k, sm_scale,
                sm_scale * LOG2E, HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                CAUSAL=ctx.causal, IEEE=ieee)
        _dq_kernel[(triton.cdiv(seq_q, BLOCK_M), b * h)](
            q, k, v, do, L, delta, dq, dk32, dv32, *q.stride(), *k.stride(), *v.stride(),
            *do.stride(), *dq.stride(), h, seq_q, seq_k, sm_scale, sm_scale * LOG2E,
            HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=ctx.causal, IEEE=ieee,
            ATOMIC_KV=ATOMIC_KV)
        if ATOMIC_KV:
            dk.copy_(dk32)
            dv.copy_(dv32)
        return dq, dk, dv, None
'''

BLIND: dict[str, str] = {FIRST: BASE}
BLIND['causal mask aligned bottom-right (key j seen when j <= i + Sk - Sq) instead of top-left'] = edited(BASE, [
    ('                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M, seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n',
     '                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M + (seq_k - seq_q), seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n'),
    ('        if CAUSAL:\n            ok = ok & (keys[None, :] <= rows[:, None])\n        s_max = tl.where(ok, s, float("-inf"))\n',
     '        if CAUSAL:\n            ok = ok & (keys[None, :] <= rows[:, None] + (seq_k - seq_q))\n        s_max = tl.where(ok, s, float("-inf"))\n'),
    ('    if CAUSAL:\n        first = (k_start ) // BLOCK_M * BLOCK_M\n    for start_m in range(first, seq_q, BLOCK_M):\n',
     '    if CAUSAL:\n        first = (k_start  - (seq_k - seq_q)) // BLOCK_M * BLOCK_M\n    for start_m in range(first, seq_q, BLOCK_M):\n'),
    ('        if CAUSAL:\n            ok = ok & (keys[:, None] <= rows[None, :])\n        pt = tl.where(ok, pt, 0.0)\n',
     '        if CAUSAL:\n            ok = ok & (keys[:, None] <= rows[None, :] + (seq_k - seq_q))\n        pt = tl.where(ok, pt, 0.0)\n'),
    ('    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M, seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n',
     '    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M + (seq_k - seq_q), seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n'),
    ('        if CAUSAL:\n            ok = ok & (keys[None, :] <= rows[:, None])\n        p = tl.where(ok, p, 0.0)\n',
     '        if CAUSAL:\n            ok = ok & (keys[None, :] <= rows[:, None] + (seq_k - seq_q))\n        p = tl.where(ok, p, 0.0)\n'),
])
BLIND["forward's score mask off by one on the ragged last tile (key <= Sk instead of key < Sk: one zero-padded key enters l)"] = edited(BASE, [
    ('                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n',
     '                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n'),
    ('        s = s * qk_scale\n        ok = (keys < seq_k)[None, :]\n        if CAUSAL:\n',
     '        s = s * qk_scale\n        ok = (keys <= seq_k)[None, :]\n        if CAUSAL:\n'),
])
BLIND["stride along D assumed 1 (head-dim offsets not multiplied by the inputs' D strides)"] = edited(BASE, [
    ('    row_ok = rows < seq_q\n    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,\n                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M, seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n        k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * skd,\n                    mask=kin[:, None], other=0.0)\n        v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * svd,\n                    mask=kin[:, None], other=0.0)\n        if IEEE:\n            s = tl.dot(q, tl.trans(k), input_precision="ieee")\n        else:\n            s = tl.dot(q, tl.trans(k))\n        s = s * qk_scale\n',
     '    row_ok = rows < seq_q\n    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * 1,\n                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M, seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n        k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * 1,\n                    mask=kin[:, None], other=0.0)\n        v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * 1,\n                    mask=kin[:, None], other=0.0)\n        if IEEE:\n            s = tl.dot(q, tl.trans(k), input_precision="ieee")\n        else:\n            s = tl.dot(q, tl.trans(k))\n        s = s * qk_scale\n'),
    ('    kin = keys < seq_k\n    k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * skd,\n                mask=kin[:, None], other=0.0)\n    v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * svd,\n                mask=kin[:, None], other=0.0)\n',
     '    kin = keys < seq_k\n    k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * 1,\n                mask=kin[:, None], other=0.0)\n    v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * 1,\n                mask=kin[:, None], other=0.0)\n'),
    ('        rok = rows < seq_q\n        q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,\n                    mask=rok[:, None], other=0.0)\n        do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * sdd,\n                     mask=rok[:, None], other=0.0)\n',
     '        rok = rows < seq_q\n        q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * 1,\n                    mask=rok[:, None], other=0.0)\n        do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * 1,\n                     mask=rok[:, None], other=0.0)\n'),
    ('    rok = rows < seq_q\n    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,\n                mask=rok[:, None], other=0.0)\n    do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * sdd,\n                 mask=rok[:, None], other=0.0)\n',
     '    rok = rows < seq_q\n    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * 1,\n                mask=rok[:, None], other=0.0)\n    do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * 1,\n                 mask=rok[:, None], other=0.0)\n'),
    ('    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M, seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n        k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * skd,\n                    mask=kin[:, None], other=0.0)\n        v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * svd,\n                    mask=kin[:, None], other=0.0)\n        if IEEE:\n            s = tl.dot(q, tl.trans(k), input_precision="ieee")\n        else:\n            s = tl.dot(q, tl.trans(k))\n        p = tl.math.exp2(s * qk_scale - lse[:, None])\n',
     '    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)\n    end = seq_k\n    if CAUSAL:\n        end = tl.minimum(q_start + BLOCK_M, seq_k)\n    for start_n in range(0, end, BLOCK_N):\n        keys = start_n + cols\n        kin = keys < seq_k\n        k = tl.load(k_ptr + b * skb + h * skh + keys[:, None] * sks + dims[None, :] * 1,\n                    mask=kin[:, None], other=0.0)\n        v = tl.load(v_ptr + b * svb + h * svh + keys[:, None] * svs + dims[None, :] * 1,\n                    mask=kin[:, None], other=0.0)\n        if IEEE:\n            s = tl.dot(q, tl.trans(k), input_precision="ieee")\n        else:\n            s = tl.dot(q, tl.trans(k))\n        p = tl.math.exp2(s * qk_scale - lse[:, None])\n'),
])
BLIND['no guard for Sk = 0: l stays 0 and the output is 0/0 = NaN'] = edited(BASE, [
    ('                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n',
     '                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n'),
    ('        m_i = m_new\n    l_i = tl.where(l_i == 0.0, 1.0, l_i)  # no keys (Sk = 0): output 0, not 0/0\n    o = acc / l_i[:, None]\n',
     '        m_i = m_new\n\n    o = acc / l_i[:, None]\n'),
])
BLIND['dK/dV accumulated with tl.atomic_add from the dQ kernel (nondeterministic summation order)'] = edited(BASE, [
    ('                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n',
     '                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n'),
    ('BLOCK_N = 32\nATOMIC_KV = False\n\n',
     'BLOCK_N = 32\nATOMIC_KV = True\n\n'),
])
BLIND["L saved in the inputs' dtype (float16 log-sum-exp) instead of float32"] = edited(BASE, [
    ('                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n',
     '                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n'),
    ('        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)\n        L = torch.empty((b, h, seq_q), dtype=torch.float32, device=q.device)\n\n',
     '        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)\n        L = torch.empty((b, h, seq_q), dtype=q.dtype, device=q.device)\n\n'),
])
BLIND['masked-off lanes (padding, causal) filled with 0 instead of -inf in the row maximum'] = edited(BASE, [
    ('                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), 0.0, tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n',
     '                mask=row_ok[:, None], other=0.0)\n    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)\n    l_i = tl.zeros((BLOCK_M,), tl.float32)\n'),
    ('            ok = ok & (keys[None, :] <= rows[:, None])\n        s_max = tl.where(ok, s, float("-inf"))\n        m_new = tl.maximum(m_i, tl.max(s_max, 1))\n',
     '            ok = ok & (keys[None, :] <= rows[:, None])\n        s_max = tl.where(ok, s, 0.0)\n        m_new = tl.maximum(m_i, tl.max(s_max, 1))\n'),
])

