"""Variable-length sequences packed in one batch: FlashAttention's ``varlen`` API in Triton,
forward and backward.

A batch of sequences of different lengths is usually padded to the longest, and the padding is
computed and thrown away. Packed, the sequences lie end to end with no padding::

    q: (total_q, H, D)   k, v: (total_k, H_kv, D)   cu_seqlens_q, cu_seqlens_k: int32 (B + 1,)

Sequence ``b`` is ``q[cu_seqlens_q[b]:cu_seqlens_q[b + 1]]`` against
``k[cu_seqlens_k[b]:cu_seqlens_k[b + 1]]`` (the cumulative lengths, from 0 to the total), and it
never sees another sequence's keys. The kernels are lesson 09's with one change of addressing
(:func:`locate`, exercise attention_variants.varlen_locate): a program reads its sequence's start
and length
from ``cu_seqlens`` (two loads each) where the dense kernels compute ``b · stride``, and a
program whose block starts past its sequence's end does nothing (the grid is sized by
``max_seqlen``, the longest sequence). The loop bodies, masks
and the backward's recomputation are the dense kernels' own (:func:`triton_fwd.masked_step`,
:func:`triton_fwd.attend_block`, :func:`triton_bwd.dkdv_step`, :func:`triton_bwd.dq_step`).

``causal`` is aligned top-left within each sequence, as in :func:`attention` and SDPA's
``is_causal``: query ``i`` of a sequence sees its keys ``j <= i``. (``flash_attn_varlen_func``
aligns bottom-right since FlashAttention 2.1; the two agree when a sequence has as many queries
as keys, the packed-training case.) Grouped-query attention as in :func:`attention`. No window.

**Why a separate entry point, not a provider of the registry's ``attention`` op.** That op's
problems are ``(B, H, S, D)`` tensors with arguments ``(q, k, v, causal, window)``, and every
provider answers the same call; here the tensors are 3-D and the batch lives in two extra index
tensors, so no provider could take the other's arguments, and the eager reference would be a
different function. :func:`varlen_attention` validates its own arguments (the cumulative
lengths are read on the host once per call, to check them) and is checked against SDPA run on
each sequence in turn. Lesson 18's Hopper forward takes the same arguments, validated by the same
function, forward only: :func:`kernels.attention.hopper.fwd.varlen_attention`.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.attention import triton_bwd, triton_fwd
from kernels.attention.problem import check_kv
from kernels.attention.triton_bwd import delta_kernel, dkdv_step, dq_step
from kernels.attention.triton_fwd import LOG2E, attend_block, key_range, masked_step

# -- the kernels ----------------------------------------------------------------------------------


@triton.jit
def sequence(cu_ptr, b):
    """(start, length) of sequence ``b`` from its cumulative lengths; start as int64 (an offset
    into a tensor of ``total · H · D`` elements)."""
    start = tl.load(cu_ptr + b)
    return start.to(tl.int64), tl.load(cu_ptr + b + 1) - start


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Where the program of sequence ``b``, query head ``h`` and the sequence's queries
    ``[q_start, q_start + BLOCK_M)`` finds its data: ``(q_lo, seq_q, k_lo, seq_k, kv_h)``, its
    sequence's first row and length in q and in k/v, and the K/V head it reads. A program
    whose block starts past its sequence's end gets ``seq_k = 0``: its loops run nothing."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    # the grid is sized by the longest sequence: a shorter one's extra programs have no queries
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    # int64 offsets: (q_lo + row) · stride indexes total · H · D elements, past 2^31 in a large
    # batch; grouped-query attention: `group` neighbouring query heads share one K/V head
    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h // group


@triton.jit
def varlen_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, cu_q_ptr, cu_k_ptr,
                      sqs, sqh, sqd, sks, skh, skd, svs, svh, svd, sos, soh, sod, slh,
                      n_heads, group, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, IEEE: tl.constexpr):
    q_start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // n_heads
    h = (bh % n_heads).to(tl.int64)
    q_lo, seq_q, k_lo, seq_k, kv_h = locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start)
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < seq_q
    q = tl.load(q_ptr + (q_lo + rows[:, None]) * sqs + h * sqh + dims[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    k_ptrs = k_ptr + (k_lo + cols[:, None]) * sks + kv_h * skh + dims[None, :] * skd
    v_ptrs = v_ptr + (k_lo + cols[:, None]) * svs + kv_h * svh + dims[None, :] * svd
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    full_end, end = key_range(q_start, seq_k, CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in range(0, full_end, BLOCK_N):
        k = tl.load(k_ptrs + start_n * sks)
        v = tl.load(v_ptrs + start_n * svs)
        acc, m_i, l_i = attend_block(acc, m_i, l_i, q, k, v, qk_scale, 0, False, IEEE)
    for start_n in range(full_end, end, BLOCK_N):
        acc, m_i, l_i = masked_step(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, rows, cols, sks,
                                     svs, seq_k, 0, qk_scale, CAUSAL, False, IEEE)
    l_i = tl.where(l_i == 0.0, 1.0, l_i)  # a sequence with no keys: output 0, lse2 = -inf
    tl.store(o_ptr + (q_lo + rows[:, None]) * sos + h * soh + dims[None, :] * sod,
             (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(lse_ptr + h * slh + q_lo + rows, m_i + tl.math.log2(l_i), mask=row_ok)


@triton.jit
def varlen_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                       cu_q_ptr, cu_k_ptr, sqs, sqh, sqd, sks, skh, skd, svs, svh, svd,
                       sds, sdh, sdd, sdks, sdkh, sdkd, sdvs, sdvh, sdvd, slh,
                       kv_heads, group, sm_scale, qk_scale, HEAD_DIM: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                       IEEE: tl.constexpr):
    k_start = tl.program_id(0) * BLOCK_N
    bkv = tl.program_id(1)
    b = bkv // kv_heads
    kv_h = (bkv % kv_heads).to(tl.int64)
    q_lo, seq_q = sequence(cu_q_ptr, b)
    k_lo, seq_k = sequence(cu_k_ptr, b)
    seq_q = tl.where(k_start < seq_k, seq_q, 0)  # a block past the sequence: nothing to do
    keys = k_start + tl.arange(0, BLOCK_N)
    rows0 = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    key_ok = (keys < seq_k)[:, None]
    k = tl.load(k_ptr + (k_lo + keys[:, None]) * sks + kv_h * skh + dims[None, :] * skd,
                mask=key_ok, other=0.0)
    v = tl.load(v_ptr + (k_lo + keys[:, None]) * svs + kv_h * svh + dims[None, :] * svd,
                mask=key_ok, other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)
    for g in range(group):  # the group's query heads in turn (triton_bwd.dkdv_kernel's sums)
        h = kv_h * group + g
        q_ptrs = q_ptr + (q_lo + rows0[:, None]) * sqs + h * sqh + dims[None, :] * sqd
        do_ptrs = do_ptr + (q_lo + rows0[:, None]) * sds + h * sdh + dims[None, :] * sdd
        lse_h = lse_ptr + h * slh + q_lo
        delta_h = delta_ptr + h * slh + q_lo
        first = 0
        if CAUSAL:  # the diagonal masked, the queries after it whole, those before skipped
            for start_m in range(k_start, tl.minimum(k_start + BLOCK_N, seq_q), BLOCK_M):
                dk, dv = dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_h, delta_h, start_m,
                                    rows0, keys, sqs, sds, seq_q, 0, qk_scale, True, False,
                                    IEEE)
            first = k_start + BLOCK_N
        for start_m in range(first, seq_q, BLOCK_M):
            dk, dv = dkdv_step(dk, dv, k, v, q_ptrs, do_ptrs, lse_h, delta_h, start_m, rows0,
                                keys, sqs, sds, seq_q, 0, qk_scale, False, False, IEEE)
    tl.store(dk_ptr + (k_lo + keys[:, None]) * sdks + kv_h * sdkh + dims[None, :] * sdkd,
             (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=key_ok)
    tl.store(dv_ptr + (k_lo + keys[:, None]) * sdvs + kv_h * sdvh + dims[None, :] * sdvd,
             dv.to(dv_ptr.dtype.element_ty), mask=key_ok)


@triton.jit
def varlen_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, cu_q_ptr,
                     cu_k_ptr, sqs, sqh, sqd, sks, skh, skd, svs, svh, svd, sds, sdh, sdd,
                     sdqs, sdqh, sdqd, slh, n_heads, group, sm_scale, qk_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, IEEE: tl.constexpr):
    q_start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // n_heads
    h = (bh % n_heads).to(tl.int64)
    q_lo, seq_q, k_lo, seq_k, kv_h = locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start)
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    ok = rows < seq_q
    q = tl.load(q_ptr + (q_lo + rows[:, None]) * sqs + h * sqh + dims[None, :] * sqd,
                mask=ok[:, None], other=0.0)
    do = tl.load(do_ptr + (q_lo + rows[:, None]) * sds + h * sdh + dims[None, :] * sdd,
                 mask=ok[:, None], other=0.0)
    lse = tl.load(lse_ptr + h * slh + q_lo + rows, mask=ok, other=0.0)
    delta = tl.load(delta_ptr + h * slh + q_lo + rows, mask=ok, other=0.0)
    k_ptrs = k_ptr + (k_lo + cols[:, None]) * sks + kv_h * skh + dims[None, :] * skd
    v_ptrs = v_ptr + (k_lo + cols[:, None]) * svs + kv_h * svh + dims[None, :] * svd
    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    full_end, end = key_range(q_start, seq_k, CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in range(0, full_end, BLOCK_N):
        dq = dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs,
                      seq_k, 0, qk_scale, False, CAUSAL, False, IEEE)
    for start_n in range(full_end, end, BLOCK_N):
        dq = dq_step(dq, q, do, lse, delta, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs,
                      seq_k, 0, qk_scale, True, CAUSAL, False, IEEE)
    tl.store(dq_ptr + (q_lo + rows[:, None]) * sdqs + h * sdqh + dims[None, :] * sdqd,
             (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=ok[:, None])


# -- the launches ---------------------------------------------------------------------------------


def _launch(config) -> dict:
    return {} if env.TRITON_INTERPRET else {"num_warps": config.num_warps,
                                            "num_stages": config.num_stages}


def forward(q, k, v, cu_q, cu_k, max_q: int, causal: bool):
    """``(O, lse2)``: O ``(total_q, H, D)``, lse2 ``(H, total_q)`` float32 (base 2)."""
    total_q, h, d = q.shape
    batch = cu_q.numel() - 1
    o = torch.empty_like(q)
    lse = torch.empty((h, total_q), dtype=torch.float32, device=q.device)
    if o.numel() == 0 or max_q == 0:
        return o, lse
    config = triton_fwd.config_for(q, causal)
    varlen_fwd_kernel[(triton.cdiv(max_q, config.block_m), batch * h)](
        q, k, v, o, lse, cu_q, cu_k, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        lse.stride(0), h, h // k.shape[1], LOG2E / math.sqrt(d), HEAD_DIM=d,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=causal,
        IEEE=q.dtype == torch.float32, **_launch(config))
    return o, lse


def backward(q, k, v, o, lse, do, cu_q, cu_k, max_q: int, max_k: int, causal: bool):
    """``(dQ, dK, dV)`` of the packed sequences, in their shapes."""
    total_q, h, d = q.shape
    kv_heads = k.shape[1]
    batch = cu_q.numel() - 1
    # every row belongs to a sequence, and every sequence's rows to some program: all are stored
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    kv_cfg, q_cfg = (triton_bwd.INTERPRETER if env.TRITON_INTERPRET
                     else triton_bwd.gpu_configs(d, q.dtype, causal))
    # Δ = rowsum(O ∘ dO) by the dense backward's kernel: (total_q, H, D) read as one
    # (1, H, total_q, D) batch gives Δ in lse's (H, total_q) layout
    delta = torch.empty_like(lse)
    o4, do4 = (t.permute(1, 0, 2).unsqueeze(0) for t in (o, do))
    block = 64 if d <= 64 else 32
    delta_kernel[(triton.cdiv(total_q, block), h)](
        o4, do4, delta, *o4.stride(), *do4.stride(), h, total_q, HEAD_DIM=d, BLOCK_M=block)
    sm_scale = 1.0 / math.sqrt(d)
    flags = {"HEAD_DIM": d, "CAUSAL": causal, "IEEE": q.dtype == torch.float32}
    if max_k:
        varlen_dkdv_kernel[(triton.cdiv(max_k, kv_cfg.block_n), batch * kv_heads)](
            q, k, v, do, lse, delta, dk, dv, cu_q, cu_k, *q.stride(), *k.stride(), *v.stride(),
            *do.stride(), *dk.stride(), *dv.stride(), lse.stride(0), kv_heads, h // kv_heads,
            sm_scale, sm_scale * LOG2E, BLOCK_M=kv_cfg.block_m, BLOCK_N=kv_cfg.block_n,
            **flags, **_launch(kv_cfg))
    if max_q:
        varlen_dq_kernel[(triton.cdiv(max_q, q_cfg.block_m), batch * h)](
            q, k, v, do, lse, delta, dq, cu_q, cu_k, *q.stride(), *k.stride(), *v.stride(),
            *do.stride(), *dq.stride(), lse.stride(0), h, h // kv_heads, sm_scale,
            sm_scale * LOG2E, BLOCK_M=q_cfg.block_m, BLOCK_N=q_cfg.block_n, **flags,
            **_launch(q_cfg))
    return dq, dk, dv


# -- the public function --------------------------------------------------------------------------


def validate_args(q, k, v, cu_q, cu_k, max_q, max_k, causal) -> tuple[list[int], list[int]]:
    """ValueError naming the argument for a malformed problem; the lengths of the sequences."""
    from kernels.registry import expect_tensor

    op = "varlen_attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect_tensor(op, name, t, ndim=3, floating=True)
    total_q, _, d = q.shape
    check_kv(op, q, k, v, ("total_k", "H_kv", d))  # the dense op's checks, in this layout
    if not isinstance(causal, bool):
        raise ValueError(f"{op}: causal expected True or False, got {causal!r}")
    lengths = []
    for name, cu, total, longest in (("cu_seqlens_q", cu_q, total_q, max_q),
                                     ("cu_seqlens_k", cu_k, k.shape[0], max_k)):
        expect_tensor(op, name, cu, ndim=1)
        if cu.dtype != torch.int32:
            raise ValueError(f"{op}: {name} expected int32 cumulative lengths, got "
                             f"{str(cu.dtype).removeprefix('torch.')}")
        if cu.device != q.device:
            raise ValueError(f"{op}: {name} expected the device of q ({q.device}), got "
                             f"{cu.device}")
        if cu.numel() != cu_q.numel() or cu.numel() < 2:
            raise ValueError(f"{op}: {name} expected B + 1 >= 2 entries, as many as "
                             f"cu_seqlens_q, got {cu.numel()} (cu_seqlens_q has {cu_q.numel()})")
        offsets = cu.tolist()  # (on a GPU: one copy to the host, to check them)
        if offsets[0] != 0 or offsets[-1] != total:
            raise ValueError(f"{op}: {name} expected to run from 0 to the {total} rows of "
                             f"{'q' if name.endswith('q') else 'k'}, got {offsets[0]} ... "
                             f"{offsets[-1]}")
        steps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
        if min(steps) < 0:
            raise ValueError(f"{op}: {name} expected non-decreasing offsets, got {offsets}")
        name_max = "max_seqlen_" + name[-1]
        if isinstance(longest, bool) or not isinstance(longest, int) or longest < max(steps):
            raise ValueError(f"{op}: {name_max} expected an int >= the longest sequence "
                             f"({max(steps)}), got {longest!r}")
        lengths.append(steps)
    return lengths[0], lengths[1]


class VarlenAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, causal):
        o, lse = forward(q, k, v, cu_q, cu_k, max_q, causal)
        ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
        ctx.max_q, ctx.max_k, ctx.causal = max_q, max_k, causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
        dq, dk, dv = backward(q, k, v, o, lse, do.contiguous(), cu_q, cu_k, ctx.max_q,
                              ctx.max_k, ctx.causal)
        return dq, dk, dv, None, None, None, None, None


def cumulative(lengths, device=None) -> torch.Tensor:
    """``cu_seqlens`` for sequences of ``lengths``: int32 ``[0, n_0, n_0 + n_1, ..., total]``."""
    return torch.tensor([0, *torch.tensor(list(lengths)).cumsum(0).tolist()], dtype=torch.int32,
                        device=device)


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                     max_seqlen_q: int, max_seqlen_k: int, causal: bool = False) -> torch.Tensor:
    """Attention over sequences packed end to end (``flash_attn_varlen_func``'s arguments):
    q ``(total_q, H, D)``, k and v ``(total_k, H_kv, D)``, ``cu_seqlens_*`` the int32
    cumulative lengths ``[0, len_0, len_0 + len_1, ..., total]``, ``max_seqlen_*`` the longest
    sequence. Returns ``(total_q, H, D)``, differentiable in q, k and v. ``causal`` is aligned
    top-left in each sequence. ValueError, naming the argument, for a malformed problem or one
    the kernels cannot run here."""
    validate_args(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal)
    if why := triton_fwd.reason(q, k, v, causal):
        raise ValueError(f"varlen_attention: {why}")
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return VarlenAttention.apply(*args)
    return forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal)[0]


def per_sequence(fn, q, k, v, cu_seqlens_q, cu_seqlens_k, causal: bool = False):
    """The reference: ``fn(q, k, v, causal)``, a ``(B, H, S, D)`` attention (eager, SDPA), run
    on each sequence in turn and packed back to ``(total_q, H, D)``. The offsets may be lists
    (no copy from the GPU per call: a benchmark's baseline) or the int32 tensors."""
    cu_q, cu_k = (c.tolist() if isinstance(c, torch.Tensor) else list(c)
                  for c in (cu_seqlens_q, cu_seqlens_k))
    outs = []
    for a, b, c, e in zip(cu_q, cu_q[1:], cu_k, cu_k[1:], strict=False):
        qs, ks, vs = (t[lo:hi].transpose(0, 1).unsqueeze(0)
                      for t, lo, hi in ((q, a, b), (k, c, e), (v, c, e)))
        outs.append(fn(qs, ks, vs, causal)[0].transpose(0, 1))
    return torch.cat(outs) if outs else q.new_empty(q.shape)
