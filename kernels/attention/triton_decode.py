"""The forward for few queries (decoding): the query heads of a group packed into one program,
the keys split across programs (FlashAttention-3's PackGQA, and split-KV "flash decoding").

:func:`triton_fwd.forward` gives each query head its own programs, each ``BLOCK_M`` queries
tall. When a model decodes, ``Sq`` is 1 (or a few speculative tokens) and that layout wastes
two things:

* **K/V read once per query head.** With grouped-query attention the ``group = H_q / H_kv``
  query heads of a K/V head each load the same K and V blocks: ``group`` reads of the only
  tensors that matter (the second and later ones from L2, if they are still there).
  **PackGQA** stacks the group's query heads (and their few queries) along the program's rows:
  packed row ``r`` is query ``r % Sq`` of query head ``kv_h · group + r // Sq``. One ``tl.dot``
  then scores a K block against every query head that needs it, and each K/V block is loaded
  once per group.
* **Too few programs.** ``B · H_kv`` programs (64 for B = 8, H_kv = 8) would each walk all
  ``Sk`` keys, on a GPU of 132 SMs. **Split-KV** cuts the keys into ``splits`` ranges, one
  program each; every program writes its partial output (normalised) and log-sum-exp, and
  :func:`combine_kernel` merges the ranges (:func:`combine_splits`) by the online softmax's
  rule:
  ``lse = log2 Σ_s 2^lse_s``, ``O = Σ_s 2^(lse_s − lse) · O_s``.

The result is what :func:`triton_fwd.forward` returns (``O`` and ``lse2`` in the same layouts),
so the backward is unchanged. :func:`packs` says when this path runs (``autograd`` asks it):
when ``group · Sq`` fits one block of rows. Causal and window masks are applied per packed row
(a packed row's query position is ``r % Sq``) on every block, which costs little at this size.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.attention.triton_fwd import LOG2E, attend_block, masked_step
from kernels.triton_launch import Launcher, cdiv, next_power_of_2

PACK_ROWS = 64  # the most packed rows (group · Sq) one program holds


@dataclass(frozen=True)
class Config:
    block_n: int  # keys per step of the loop
    programs_per_sm: int  # split the keys until there are about this many programs per SM
    num_warps: int = 4
    num_stages: int = 3

    def __str__(self) -> str:
        return (f"{self.block_n} keys a step, {self.programs_per_sm} programs/SM, "
                f"{self.num_warps} warps, {self.num_stages} stages")


# the interpreter pays per program and per step: few, and splits of two blocks, so a ragged
# Sk of a few dozen keys already takes several splits and a ragged last one
INTERPRETER = Config(block_n=16, programs_per_sm=1)
INTERPRETER_KEYS_PER_SPLIT = 32


def gpu_config(head_dim: int, dtype: torch.dtype) -> Config:
    """Chosen on the H100 by ``python -m kernels.attention.gpu_check --decode``."""
    if dtype == torch.float32:
        return Config(block_n=32, programs_per_sm=4, num_warps=4, num_stages=2)
    return Config(block_n=64 if head_dim >= 128 else 128, programs_per_sm=4, num_warps=4,
                  num_stages=3)


@functools.cache
def sm_count(device: torch.device) -> int:
    """The GPU's streaming multiprocessors (asked once per device: a call's host time counts
    when decoding takes tens of microseconds)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def packs(q: torch.Tensor, k: torch.Tensor) -> bool:
    """True when the packed path runs the problem: the group's query heads times the queries
    fit one program's rows (decoding: Sq = 1 and a group of up to 64)."""
    return q.shape[2] * (q.shape[1] // k.shape[1]) <= PACK_ROWS


def keys_per_split(batch_kv: int, seq_k: int, config: Config, n_sm: int) -> int:
    """Keys per program: enough splits for about ``programs_per_sm · n_sm`` programs, each a
    whole number of ``block_n`` blocks (so only the last split of a row has a ragged block)."""
    splits = max(1, min(cdiv(config.programs_per_sm * n_sm, batch_kv),
                        cdiv(seq_k, config.block_n)))
    return cdiv(cdiv(seq_k, splits), config.block_n) * config.block_n


@triton.jit
def packed_fwd_kernel(q_ptr, k_ptr, v_ptr, part_o_ptr, part_lse_ptr,
                      sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                      kv_heads, group, seq_q, seq_k, keys_per_split, rows_total, window,
                      qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
                      IEEE: tl.constexpr):
    split = tl.program_id(0)
    bkv = tl.program_id(1)  # one program per (batch, K/V head) and range of keys
    b = (bkv // kv_heads).to(tl.int64)
    kv_h = (bkv % kv_heads).to(tl.int64)
    r = tl.arange(0, BLOCK_M)  # packed rows: query i of the group's query head g
    g = r // seq_q
    i = r % seq_q
    row_ok = r < group * seq_q
    h = kv_h * group + g
    dims = tl.arange(0, HEAD_DIM)
    cols = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b * sqb + h[:, None] * sqh + i[:, None] * sqs + dims[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    k_ptrs = k_ptr + b * skb + kv_h * skh + cols[:, None] * sks + dims[None, :] * skd
    v_ptrs = v_ptr + b * svb + kv_h * svh + cols[:, None] * svs + dims[None, :] * svd

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, seq_k)
    if CAUSAL:  # no query of the program sees a key past its last position, Sq - 1
        hi = tl.minimum(hi, seq_q)
    # whole blocks run unmasked; with a causal or window mask every block is masked per row
    full_end = lo + (hi - lo) // BLOCK_N * BLOCK_N
    if CAUSAL or WINDOW:
        full_end = lo
    for start_n in range(lo, full_end, BLOCK_N):
        k = tl.load(k_ptrs + start_n * sks)
        v = tl.load(v_ptrs + start_n * svs)
        acc, m_i, l_i = attend_block(acc, m_i, l_i, q, k, v, qk_scale, 0, False, IEEE)
    # `hi` bounds the keys of this split (the masked step loads and sees keys below it)
    for start_n in range(full_end, hi, BLOCK_N):
        acc, m_i, l_i = masked_step(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, i, cols, sks,
                                     svs, hi, window, qk_scale, CAUSAL, WINDOW, IEEE)
    # a row that saw no key in this range: output 0, lse2 = -inf (it weighs nothing below)
    l_i = tl.where(l_i == 0.0, 1.0, l_i)
    # partial results, (splits, B·H·Sq) rows: the row of (b, h, i) is (b·H + h)·Sq + i
    out_row = split * rows_total + (b * kv_heads * group + h) * seq_q + i
    tl.store(part_o_ptr + out_row[:, None] * HEAD_DIM + dims[None, :], acc / l_i[:, None],
             mask=row_ok[:, None])
    tl.store(part_lse_ptr + out_row, m_i + tl.math.log2(l_i), mask=row_ok)


# ---- the splits merged, one query row at a time
# (what exercise attention_variants.combine_splits writes) ----


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row ``row``'s output and base-2 log-sum-exp, merged from its ``splits`` partial
    results (split s: ``O_s`` at ``(s·rows_total + row)·HEAD_DIM``, ``lse_s`` at
    ``s·rows_total + row``): ``lse = log2 Σ 2^lse_s``, ``O = Σ 2^(lse_s − lse)·O_s``."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    # the lanes past the last split (BLOCK_S is a power of 2) weigh 2^-inf = 0
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=s < splits, other=float("-inf"))
    m = tl.max(lse, 0)  # subtracted before exp2: lse_s may be far outside float32's exponents
    m_sub = tl.where(m == float("-inf"), 0.0, m)  # every split empty: weights 0, not NaN
    w = tl.math.exp2(lse - m_sub)
    total = tl.sum(w, 0)
    total = tl.where(total == 0.0, 1.0, total)  # and then O = 0, lse = -inf
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=(s < splits)[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / total
    return o, m + tl.math.log2(total)


@triton.jit
def combine_kernel(part_o_ptr, part_lse_ptr, o_ptr, lse_ptr, n_heads, seq_q, splits, rows_total,
                   sob, soh, sos, sod, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr):
    """One program per query row: merge its ``splits`` partial outputs by their log-sum-exps."""
    row = tl.program_id(0).to(tl.int64)  # (b·H + h)·Sq + i
    o, lse = combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM,
                            BLOCK_S)
    bh = row // seq_q
    i = row % seq_q
    b = bh // n_heads
    h = bh % n_heads
    dims = tl.arange(0, HEAD_DIM)
    tl.store(o_ptr + b * sob + h * soh + i * sos + dims * sod, o.to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + row, lse)


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
            window: int | None = None, *, config: Config | None = None,
            split_keys: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(O, lse2)`` as :func:`triton_fwd.forward` returns them, for a problem where
    :func:`packs` holds. ``split_keys`` fixes the keys per program (default: by the GPU's SM
    count). Inputs are validated and checked by the caller."""
    b, h, seq_q, d = q.shape
    kv_heads, seq_k = k.shape[1], k.shape[2]
    group = h // kv_heads
    if seq_q * group > PACK_ROWS:
        raise ValueError(f"triton_decode.forward: q expected group · Sq <= {PACK_ROWS} packed "
                         f"rows, got {group} · {seq_q}")
    o = torch.empty((b, h, seq_q, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, seq_q), dtype=torch.float32, device=q.device)
    if o.numel() == 0:
        return o, lse
    if seq_k == 0:  # no keys: the weighted sum of nothing, as the eager reference gives
        return o.zero_(), lse.fill_(float("-inf"))
    if config is None:
        config = INTERPRETER if env.TRITON_INTERPRET else gpu_config(d, q.dtype)
    if split_keys is None and env.TRITON_INTERPRET:
        split_keys = INTERPRETER_KEYS_PER_SPLIT
    elif split_keys is None:
        split_keys = keys_per_split(b * kv_heads, seq_k, config, sm_count(q.device))
    if not isinstance(split_keys, int) or split_keys < 1:
        raise ValueError(f"triton_decode.forward: split_keys expected a number of keys >= 1, "
                         f"got {split_keys!r}")
    splits = cdiv(seq_k, split_keys)
    rows_total = b * h * seq_q
    part_o = torch.empty((splits, rows_total, d), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((splits, rows_total), dtype=torch.float32, device=q.device)
    launch = {} if env.TRITON_INTERPRET else {"num_warps": config.num_warps,
                                              "num_stages": config.num_stages}
    # a decoding step is tens of microseconds of GPU time: both launches go through a plan per
    # problem (kernels/triton_launch.py), not kernel[grid]'s per-call binding
    key = (q.shape, k.shape, q.stride(), k.stride(), v.stride(), q.dtype, causal, window,
           config, split_keys)
    _packed(key, (q, k, v, part_o, part_lse), lambda: (
        (splits, b * kv_heads), (*q.stride(), *k.stride(), *v.stride(), kv_heads, group, seq_q,
                                 seq_k, split_keys, rows_total, window or 0,
                                 LOG2E / math.sqrt(d)),
        {"HEAD_DIM": d, "BLOCK_M": max(16, next_power_of_2(group * seq_q)),
         "BLOCK_N": config.block_n, "CAUSAL": causal, "WINDOW": window is not None,
         "IEEE": q.dtype == torch.float32, **launch}))
    _combine(key, (part_o, part_lse, o, lse), lambda: (
        (rows_total,), (h, seq_q, splits, rows_total, *o.stride()),
        {"HEAD_DIM": d, "BLOCK_S": max(2, next_power_of_2(splits))}))
    return o, lse


# each kernel's plans per problem: grid, arguments and compiled kernel, worked out once
_packed = Launcher(packed_fwd_kernel)
_combine = Launcher(combine_kernel)
