"""FlashAttention-2's backward in Triton: recompute the scores instead of storing them.

The forward kept only ``O`` and the log-sum-exp of each query (``lse2``, base 2). With it any
block of the softmax comes back exactly, ``P = 2^(S·log2(e)/√D − lse2)``, so the backward walks
the same blocks again and never holds the ``S × S`` matrix. With ``dO`` the gradient of the
output and ``Δ_i = Σ_d O_id · dO_id`` (one number per query, :func:`delta_kernel`):

    dV = Pᵀ dO     dP = dO Vᵀ     dS = P ∘ (dP − Δ)     dQ = dS K / √D     dK = dSᵀ Q / √D

Two kernels share the work without atomics:

* :func:`dkdv_kernel`, one program per block of **keys**: it holds that block's ``K``, ``V`` and
  its ``dK``, ``dV`` accumulators and walks the queries (only those at or after the block's
  first key when causal), one block of them per step (:func:`dkdv_block`);
* :func:`dq_kernel`, one program per block of **queries**: it holds ``Q``, ``dO``, ``dQ`` and
  walks the keys (only up to the diagonal when causal), as the forward does.

Both recompute ``QKᵀ`` (seven matmuls per block pair against the forward's two: a backward costs
about 2.5 forwards, counted ``2.5 · 4·B·H·S²·D`` FLOPs by convention). As in the forward, only
the causal diagonal takes a mask; the ragged ends are loaded as zeros, which add nothing
(a zero query row or ``dO`` row contributes nothing to ``dK`` or ``dV``, a zero key row nothing to
``dQ``) and whose own gradient rows are not stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.attention.triton_fwd import LOG2E, key_range, window_range
from kernels.triton_launch import Launcher, cdiv


@dataclass(frozen=True)
class Config:
    block_m: int  # queries per step (dK/dV kernel) or per program (dQ kernel)
    block_n: int  # keys per program (dK/dV kernel) or per step (dQ kernel)
    num_warps: int = 4
    num_stages: int = 2

    def __str__(self) -> str:
        return (f"{self.block_m}x{self.block_n}, {self.num_warps} warps, "
                f"{self.num_stages} stages")


INTERPRETER = (Config(32, 32), Config(32, 32))  # (dK/dV, dQ)


def gpu_configs(head_dim: int, dtype: torch.dtype, causal: bool) -> tuple[Config, Config]:
    """(dK/dV, dQ) configurations chosen on the H100 (``gpu_check.py`` times candidates; bf16,
    B=4, S=4096, D=128). A dK/dV key block that is a multiple of its query step, and a dQ query
    block that is a multiple of its key step, keep the causal diagonal exact."""
    if dtype == torch.float32:
        return Config(32, 32, 4, 1), Config(32, 32, 4, 1)
    kv = Config(64, 128, 8, 2) if causal else Config(32, 64, 4, 3)
    return kv, Config(128, 64, 8, 3)


@triton.jit
def delta_kernel(o_ptr, do_ptr, delta_ptr, sob, soh, sos, sod, sdb, sdh, sds, sdd,
                 n_heads, seq_q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Δ_i = Σ_d O_id · dO_id in float32: the softmax's share of dS, one number per query."""
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    ok = (rows < seq_q)[:, None]
    o = tl.load(o_ptr + b * sob + h * soh + rows[:, None] * sos + dims[None, :] * sod,
                mask=ok, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * sdd,
                 mask=ok, other=0.0).to(tl.float32)
    tl.store(delta_ptr + bh.to(tl.int64) * seq_q + rows, tl.sum(o * do, 1), mask=rows < seq_q)


@triton.jit
def dot(a, b, IEEE: tl.constexpr):
    """``a @ b`` on the tensor cores, fp32 accumulation; exact products (not tf32) when IEEE."""
    if IEEE:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """Fold BLOCK_M queries (q, do, their lse2 and Δ) into one key block's float32 (dk, dv)."""
    # the transposed problem: keys along rows, queries along columns (Pᵀ, no transpose of P)
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if MASKED:  # causal diagonal: key j (row) is seen by query i (column) when j <= i
        pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv


@triton.jit
def dkdv_window_block(dk, dv, k, v, q, do, lse, delta, keys, rows, window, qk_scale,
                      IEEE: tl.constexpr):
    """:func:`dkdv_block` on a block that a sliding window's edge (or the diagonal) crosses:
    key j (row) is seen by query i (column) when i - window < j <= i. (A copy of
    ``dkdv_block`` with the window's mask, so that exercise attention.backward_dkdv keeps its
    signature.)"""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    seen = (keys[:, None] <= rows[None, :]) & (keys[:, None] > rows[None, :] - window)
    pt = tl.where(seen, pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv


@triton.jit
def dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_ptr, delta_ptr, start_m, rows0, keys,
               sqs, sds, seq_q, window, qk_scale, MASKED: tl.constexpr, WINDOW: tl.constexpr,
               IEEE: tl.constexpr):
    rows = start_m + rows0
    ok = rows < seq_q
    q = tl.load(q_ptrs + start_m * sqs, mask=ok[:, None], other=0.0)
    do = tl.load(do_ptrs + start_m * sds, mask=ok[:, None], other=0.0)
    lse = tl.load(lse_ptr + rows, mask=ok, other=0.0)
    delta = tl.load(delta_ptr + rows, mask=ok, other=0.0)
    if WINDOW:  # a query that sees no key (lse = -inf): P = 2^(s - inf) = 0 on every key
        lse = tl.where(lse == float("-inf"), float("inf"), lse)
    if WINDOW and MASKED:
        return dkdv_window_block(dk, dv, k, v, q, do, lse, delta, keys, rows, window, qk_scale,
                                 IEEE)
    else:
        return dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED, IEEE)


@triton.jit
def dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                sdb, sdh, sds, sdd, sdkb, sdkh, sdks, sdkd, sdvb, sdvh, sdvs, sdvd,
                kv_heads, group, seq_q, seq_k, window, sm_scale, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr, WINDOW: tl.constexpr, IEEE: tl.constexpr):
    k_start = tl.program_id(0) * BLOCK_N
    bkv = tl.program_id(1)  # one program per block of keys of one K/V head
    b = (bkv // kv_heads).to(tl.int64)
    kv_h = (bkv % kv_heads).to(tl.int64)
    keys = k_start + tl.arange(0, BLOCK_N)
    rows0 = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    key_ok = (keys < seq_k)[:, None]
    k = tl.load(k_ptr + b * skb + kv_h * skh + keys[:, None] * sks + dims[None, :] * skd,
                mask=key_ok, other=0.0)
    v = tl.load(v_ptr + b * svb + kv_h * svh + keys[:, None] * svs + dims[None, :] * svd,
                mask=key_ok, other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    # grouped-query attention: these keys serve `group` query heads, and their gradients are
    # the sums over all of them. One program walks every query head of the group in turn, so
    # the sums stay in its registers (no atomics, no second pass)
    for g in range(group):
        h = kv_h * group + g
        bh = b * kv_heads * group + h  # the query head's row of lse and delta
        q_ptrs = q_ptr + b * sqb + h * sqh + rows0[:, None] * sqs + dims[None, :] * sqd
        do_ptrs = do_ptr + b * sdb + h * sdh + rows0[:, None] * sds + dims[None, :] * sdd
        lse_h = lse_ptr + bh * seq_q
        delta_h = delta_ptr + bh * seq_q
        if CAUSAL:
            # queries before k_start see none of these keys; [k_start, k_start + BLOCK_N) is
            # the diagonal (masked); from there on every query sees the whole block, up to
            # the window's edge if there is one
            diag_end = tl.minimum(k_start + BLOCK_N, seq_q)
            for start_m in range(k_start, diag_end, BLOCK_M):
                dk, dv = dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_h, delta_h, start_m,
                                    rows0, keys, sqs, sds, seq_q, window, qk_scale, True,
                                    WINDOW, IEEE)
            first = k_start + BLOCK_N
        else:
            first = 0
        full_end = seq_q
        if WINDOW:
            # query i sees every key of the block while i - window < k_start: whole query
            # blocks up to k_start + window; after, the window's edge crosses them (masked),
            # until the last query that sees the block's last key (k_start + BLOCK_N - 2 +
            # window); later queries are skipped
            full_end = tl.minimum(tl.maximum((k_start + window) // BLOCK_M * BLOCK_M, first),
                                  seq_q)
        for start_m in range(first, full_end, BLOCK_M):
            dk, dv = dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_h, delta_h, start_m,
                                rows0, keys, sqs, sds, seq_q, window, qk_scale, False, WINDOW,
                                IEEE)
        if WINDOW:
            edge_end = tl.minimum(k_start + BLOCK_N - 1 + window, seq_q)
            for start_m in range(full_end, edge_end, BLOCK_M):
                dk, dv = dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_h, delta_h, start_m,
                                    rows0, keys, sqs, sds, seq_q, window, qk_scale, True,
                                    WINDOW, IEEE)
    tl.store(dk_ptr + b * sdkb + kv_h * sdkh + keys[:, None] * sdks + dims[None, :] * sdkd,
             (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=key_ok)
    tl.store(dv_ptr + b * sdvb + kv_h * sdvh + keys[:, None] * sdvs + dims[None, :] * sdvd,
             dv.to(dv_ptr.dtype.element_ty), mask=key_ok)


@triton.jit
def dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs, seq_k,
             window, qk_scale, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
             WINDOW: tl.constexpr, IEEE: tl.constexpr):
    keys = start_n + cols
    if MASKED:
        k = tl.load(k_ptrs + start_n * sks, mask=(keys < seq_k)[:, None], other=0.0)
        v = tl.load(v_ptrs + start_n * svs, mask=(keys < seq_k)[:, None], other=0.0)
    else:
        k = tl.load(k_ptrs + start_n * sks)
        v = tl.load(v_ptrs + start_n * svs)
    s = dot(q, tl.trans(k), IEEE)
    p = tl.math.exp2(s * qk_scale - lse[:, None])
    if MASKED:
        ok = (keys < seq_k)[None, :]
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None])
        if WINDOW:
            ok = ok & (keys[None, :] > rows[:, None] - window)
        p = tl.where(ok, p, 0.0)
    dp = dot(do, tl.trans(v), IEEE)
    ds = p * (dp - delta[:, None])
    dq += dot(ds.to(k.dtype), k, IEEE)
    return dq


@triton.jit
def dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
              sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
              sdb, sdh, sds, sdd, sdqb, sdqh, sdqs, sdqd,
              n_heads, group, seq_q, seq_k, window, sm_scale, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, WINDOW: tl.constexpr, IEEE: tl.constexpr):
    q_start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    kv_h = h // group
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    ok = rows < seq_q
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,
                mask=ok[:, None], other=0.0)
    do = tl.load(do_ptr + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :] * sdd,
                 mask=ok[:, None], other=0.0)
    lse = tl.load(lse_ptr + bh.to(tl.int64) * seq_q + rows, mask=ok, other=0.0)
    delta = tl.load(delta_ptr + bh.to(tl.int64) * seq_q + rows, mask=ok, other=0.0)
    if WINDOW:  # a query that sees no key (lse = -inf): P = 0 on every key, dQ = 0
        lse = tl.where(lse == float("-inf"), float("inf"), lse)
    k_ptrs = k_ptr + b * skb + kv_h * skh + cols[:, None] * sks + dims[None, :] * skd
    v_ptrs = v_ptr + b * svb + kv_h * svh + cols[:, None] * svs + dims[None, :] * svd
    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    full_end, end = key_range(q_start, seq_k, CAUSAL, BLOCK_M, BLOCK_N)
    start, window_end = 0, 0
    if WINDOW:  # the same three ranges as the forward's
        start, window_end = window_range(q_start, window, BLOCK_M, BLOCK_N)
        window_end = tl.maximum(start, tl.minimum(window_end, full_end))
        for start_n in range(start, window_end, BLOCK_N):
            dq = dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs,
                          seq_k, window, qk_scale, True, CAUSAL, WINDOW, IEEE)
    for start_n in range(window_end, full_end, BLOCK_N):
        dq = dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs,
                      seq_k, window, qk_scale, False, CAUSAL, WINDOW, IEEE)
    for start_n in range(tl.maximum(full_end, window_end), end, BLOCK_N):
        dq = dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs,
                      seq_k, window, qk_scale, True, CAUSAL, WINDOW, IEEE)
    tl.store(dq_ptr + b * sdqb + h * sdqh + rows[:, None] * sdqs + dims[None, :] * sdqd,
             (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=ok[:, None])


def backward(q, k, v, o, lse, do, causal: bool, window: int | None = None, *,
             configs: tuple[Config, Config] | None = None):
    """``(dQ, dK, dV)`` from the forward's ``O`` and ``lse2`` and the output's gradient ``dO``;
    ``k`` and ``v`` may have fewer heads than ``q`` (dK, dV summed over each group)."""
    b, h, seq_q, d = q.shape
    kv_heads, seq_k = k.shape[1], k.shape[2]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    key = (q.shape, k.shape, q.stride(), k.stride(), v.stride(), o.stride(), do.stride(),
           causal, window, configs)
    delta = delta_of(o, do)

    def common():  # what the dK/dV and dQ launches share (called once per problem)
        sm_scale = 1.0 / math.sqrt(d)
        kv_cfg, q_cfg = configs or (INTERPRETER if env.TRITON_INTERPRET
                                    else gpu_configs(d, q.dtype, causal))
        scalars = (h // kv_heads, seq_q, seq_k, window or 0, sm_scale, sm_scale * LOG2E)
        flags = {"HEAD_DIM": d, "CAUSAL": causal, "WINDOW": window is not None,
                 "IEEE": q.dtype == torch.float32}
        return kv_cfg, q_cfg, scalars, flags

    # each launch's grid and arguments are worked out on the first call of a problem (the key
    # holds every shape, stride and flag they are computed from; kernels/triton_launch.py)
    def dkdv_plan():
        kv_cfg, _, scalars, flags = common()
        return ((cdiv(seq_k, kv_cfg.block_n), b * kv_heads),
                (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(),
                 *dv.stride(), kv_heads, *scalars),
                {"BLOCK_M": kv_cfg.block_m, "BLOCK_N": kv_cfg.block_n, **flags,
                 **_options(kv_cfg)})

    def dq_plan():
        _, q_cfg, scalars, flags = common()
        return ((cdiv(seq_q, q_cfg.block_m), b * h),
                (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride(), h,
                 *scalars),
                {"BLOCK_M": q_cfg.block_m, "BLOCK_N": q_cfg.block_n, **flags,
                 **_options(q_cfg)})

    _dkdv_launch(key, (q, k, v, do, lse, delta, dk, dv), dkdv_plan)
    _dq_launch(key, (q, k, v, do, lse, delta, dq), dq_plan)
    return dq, dk, dv


def delta_of(o: torch.Tensor, do: torch.Tensor) -> torch.Tensor:
    """``Δ = Σ_d O ∘ dO`` per query, float32 (B, H, Sq): :func:`delta_kernel`, the first launch
    of every backward (this one's and the Hopper backward's, ``hopper/bwd.py``)."""
    b, h, seq_q, d = o.shape
    delta = torch.empty((b, h, seq_q), dtype=torch.float32, device=o.device)

    def plan():
        block = 64 if d <= 64 else 32
        return ((cdiv(seq_q, block), b * h), (*o.stride(), *do.stride(), h, seq_q),
                {"HEAD_DIM": d, "BLOCK_M": block})

    _delta_launch((o.shape, o.stride(), do.stride()), (o, do, delta), plan)
    return delta


def _options(c: Config) -> dict:
    """Launch options of a configuration (the interpreter takes none)."""
    return {} if env.TRITON_INTERPRET else {"num_warps": c.num_warps,
                                            "num_stages": c.num_stages}


_delta_launch = Launcher(delta_kernel)
_dkdv_launch = Launcher(dkdv_kernel)
_dq_launch = Launcher(dq_kernel)
