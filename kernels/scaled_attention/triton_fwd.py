"""Lesson 09's FlashAttention forward on fp8 (e4m3) inputs with per-block scales, in Triton
(lesson 19, section 2).

The loop of ``kernels/attention/triton_fwd.py`` (the online softmax in base 2, ``key_range``'s
unmasked and masked ranges, causal block skipping), with what fp8 changes:

* **both matmuls in e4m3.** ``S = dot(q, kᵀ)`` multiplies fp8 values on the tensor cores and
  sums the (exact) products in fp32; ``P V`` takes ``P`` cast to e4m3.
* **the scales, one multiply per tile.** Every tile lies inside one scale block (the tiles
  divide ``SCALE_BLOCK``), so ``Q Kᵀ`` of a tile is ``q_scale · k_scale · dot(q, kᵀ)`` with one
  scale each: the product joins the softmax scale ``log2(e)/√D`` the forward multiplies by
  anyway. ``P V`` of a key block is ``v_scale · dot(p8, v)``: one multiply per accumulator
  element as the block is added.
* **P shifted by 2^8 before the cast.** After the max subtraction the weights ``2^(s - m)`` lie
  in ``[0, 1]``, but e4m3's 3 mantissa bits only start at ``2^-6`` (below, steps of ``2^-9``):
  with random scores a typical weight is ``2^-6`` or less, and would keep 1 or 2 bits. The
  kernel computes ``2^(s - m + 8)`` instead (the 8 joins the subtraction: no extra work), so the
  weights span ``[0, 256]``, under e4m3's 448, and keep 3 bits down to ``2^-14``. ``l`` is
  summed from the same shifted weights, so the factor cancels in ``O = acc / l``.
* **V keys-contiguous.** Hopper's fp8 ``wgmma`` reads its B operand K-major only; in ``P V``
  the reduction runs over the keys, so the kernel loads ``Vᵀ`` tiles ``(D, BLOCK_N)`` from a V
  stored with S contiguous (``quantize.quantize_qkv`` stores it so) and hands ``Vᵀᵀ`` to
  ``tl.dot``, which the compiler feeds to ``wgmma`` without a transpose.

On a CPU it runs in Triton's interpreter, whose fp8 ``tl.dot`` is exact but whose fp32 → e4m3
cast is wrong in Triton 3.8 (a carry out of the mantissa is lost: 126.2 becomes 64, not 128;
weights below ``2^-6`` are truncated). There (``INTERPRETED``) the kernel first rounds ``P`` to
e4m3's grid in fp32, ties to even as the GPU's ``cvt.rn`` does, so that the cast is exact.
Its fp32 → bf16 cast truncates (half a bf16 step more error than the GPU's rounding).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from course_utils import env, nvrtc
from kernels.attention.triton_fwd import LOG2E, Config, check_forward_config, key_range
from kernels.registry import register
from kernels.scaled_attention.quantize import E4M3, SCALE_BLOCK, e4m3_grid
from kernels.triton_launch import Launcher, cdiv

HEAD_DIMS = (32, 64, 128)  # fp8 tensor cores reduce 32 values per instruction: D >= 32
P_SHIFT = tl.constexpr(8.0)  # the weights 2^(s - m + 8) lie in [0, 256], inside e4m3's 448

# The interpreter pays per program and per loop step, not per element: large blocks are cheap.
INTERPRETER = Config(32, 32)

# Candidates for the H100 (``python -m kernels.scaled_attention.tune`` checks, then times them).
# fp8 halves the bytes of a K or V tile, so 128-key tiles fit where bf16 took 64; the two fp32
# tiles a program holds (S and acc, 128 x 128 each) need 8 warps' registers (with 4, 0.65x).
CANDIDATES = (Config(128, 128, num_warps=8, num_stages=3), Config(128, 128, num_warps=8,
              num_stages=2), Config(128, 128, num_warps=8, num_stages=4),
              Config(128, 128, num_warps=4, num_stages=3), Config(128, 64, num_warps=8,
              num_stages=3), Config(64, 64, num_warps=4, num_stages=3))


def gpu_config(head_dim: int, causal: bool) -> Config:
    """The configuration chosen on the H100 (``python -m kernels.scaled_attention.tune`` at
    1dccf0e, B=2, H=16, S=8192, D=128; docs/results/nvidia-h100-80gb-hbm3-fp8-tune-1dccf0e.log):
    128x128, 8 warps, 3 stages, 659 TFLOP/s (598 causal); 4 stages 667 (593 causal), 2 stages
    609 (559), 64x64 590 (552), 128x64 522 (486). A 64x128 tile computed wrong causal outputs
    there (keys past the query unmasked), and is refused since (``check_forward_config``)."""
    return CANDIDATES[0]


@triton.jit
def attend_scaled(acc, m_i, l_i, q, k, vt, q_scale, k_scales, v_scales, start_n, key_ok,
                  MASKED: tl.constexpr, SCALE_BLOCK: tl.constexpr, INTERPRETED: tl.constexpr):
    """One step: fold keys [start_n, start_n + BLOCK_N) into (acc, m_i, l_i). ``q_scale``
    already holds Q's block scale times log2(e)/√D; ``vt`` is the block's Vᵀ, (D, BLOCK_N)."""
    block = start_n // SCALE_BLOCK  # the tile lies inside this scale block of K and V
    s = tl.dot(q, tl.trans(k))  # fp8 x fp8, fp32 sums of exact products
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    scale = q_scale * tl.load(k_scales + block)  # > 0: the max commutes with it
    m_new = tl.maximum(m_i, tl.max(s, 1) * scale)
    p = tl.math.exp2(s * scale - (m_new - P_SHIFT)[:, None])  # in [0, 2^8]
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if INTERPRETED:
        p = e4m3_grid(p)  # the interpreter's cast is exact on grid values only
    pv = tl.dot(p.to(tl.float8e4nv), tl.trans(vt))
    acc = acc * alpha[:, None] + pv * tl.load(v_scales + block)
    return acc, m_new, l_i


@triton.jit
def scaled_attention_fwd_kernel(q_ptr, k_ptr, v_ptr, q_scale_ptr, k_scale_ptr, v_scale_ptr,
                                o_ptr, sqb, sqh, sqs, sqd, skb, skh, sks, skd,
                                svb, svh, svs, svd, sob, soh, sos, sod,
                                n_heads, seq_q, seq_k, qk_scale,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                                BLOCK_N: tl.constexpr, SCALE_BLOCK: tl.constexpr,
                                CAUSAL: tl.constexpr, INTERPRETED: tl.constexpr):
    # causal: each head's longest query tiles first, so that the last wave's tiles are short
    # (+3-5% on the H100; the bf16 forward gained nothing: docs/results/*causal-order-93a1f82.txt)
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    q_start = start_m * BLOCK_M
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < seq_q

    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    # the scales are contiguous (B, H, blocks); the program's queries share one block
    q_scale = tl.load(q_scale_ptr + bh * tl.cdiv(seq_q, SCALE_BLOCK) + q_start // SCALE_BLOCK)
    k_scales = k_scale_ptr + bh * tl.cdiv(seq_k, SCALE_BLOCK)
    v_scales = v_scale_ptr + bh * tl.cdiv(seq_k, SCALE_BLOCK)
    k_ptrs = k_ptr + b * skb + h * skh + cols[:, None] * sks + dims[None, :] * skd
    vt_ptrs = v_ptr + b * svb + h * svh + dims[:, None] * svd + cols[None, :] * svs  # Vᵀ tiles

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    q_scale = q_scale * qk_scale
    full_end, end = key_range(q_start, seq_k, CAUSAL, BLOCK_M, BLOCK_N)
    # the blocks every query sees whole: no mask, no bounds check
    for start_n in range(0, full_end, BLOCK_N):
        k = tl.load(k_ptrs + start_n * sks)
        vt = tl.load(vt_ptrs + start_n * svs)
        acc, m_i, l_i = attend_scaled(acc, m_i, l_i, q, k, vt, q_scale, k_scales, v_scales,
                                      start_n, 0, False, SCALE_BLOCK, INTERPRETED)
    # the causal diagonal and the ragged last block: masked (every query sees key 0, in the
    # first block it runs, so m_i is finite from then on and a masked row never gives NaN)
    for start_n in range(full_end, end, BLOCK_N):
        key = start_n + cols
        key_ok = (key < seq_k)[None, :]
        if CAUSAL:
            key_ok = key_ok & (key[None, :] <= rows[:, None])
        k = tl.load(k_ptrs + start_n * sks, mask=(key < seq_k)[:, None], other=0.0)
        vt = tl.load(vt_ptrs + start_n * svs, mask=(key < seq_k)[None, :], other=0.0)
        acc, m_i, l_i = attend_scaled(acc, m_i, l_i, q, k, vt, q_scale, k_scales, v_scales,
                                      start_n, key_ok, True, SCALE_BLOCK, INTERPRETED)
    o = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + rows[:, None] * sos + dims[None, :] * sod,
             o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


# -- what a machine and a problem allow ---------------------------------------------------------


def reason(q, k, v, q_scale, k_scale, v_scale, causal=False) -> str | None:
    """Why this kernel cannot run the (validated) problem here, in plain words (None: it can)."""
    d = q.shape[-1]
    if d not in HEAD_DIMS:
        return f"head dims {', '.join(map(str, HEAD_DIMS))}; got q with D = {d}"
    if k.shape[1] != q.shape[1]:
        return (f"one K/V head per query head (no grouped-query attention); got q with "
                f"{q.shape[1]} heads, k with {k.shape[1]}")
    if any(t.stride(-1) != 1 and t.shape[-1] > 1 for t in (q, k)):
        return "q and k need the head dim contiguous (stride 1 in the last dimension)"
    if v.stride(2) != 1 and v.shape[2] > 1:
        return ("v must be stored keys-contiguous, a (B, H, D, Sk) buffer viewed as (B, H, Sk, "
                "D): fp8 tensor cores read P V's B operand K-major only (quantize_qkv stores V "
                f"so); got v with strides {tuple(v.stride())}")
    if not all(s.is_contiguous() for s in (q_scale, k_scale, v_scale)):
        return "q_scale, k_scale and v_scale must be contiguous (quantize_qkv makes them so)"
    if env.TRITON_INTERPRET:
        if q.is_cuda:
            return "Triton's interpreter (TRITON_INTERPRET=1) reads CPU tensors; got q on cuda"
        return None
    if not q.is_cuda:
        return f"compiled Triton reads GPU memory: needs CUDA tensors; got q on {q.device.type}"
    major, minor = nvrtc.device_capability(q.get_device())
    if (major, minor) < (8, 9):
        return f"fp8 tensor cores need sm_89+ (Ada, Hopper); this GPU is sm_{major}{minor}"
    return None


def config_for(head_dim: int, causal: bool) -> Config:
    return INTERPRETER if env.TRITON_INTERPRET else gpu_config(head_dim, causal)


def forward(q, k, v, q_scale, k_scale, v_scale, causal: bool = False, *,
            config: Config | None = None) -> torch.Tensor:
    """The attention output (B, H, Sq, D) in bfloat16. Inputs are validated and checked by the
    caller (the registry); ``config`` overrides the tile choice (the tuning sweep)."""
    b, h, seq_q, d = q.shape
    seq_k = k.shape[2]
    c = config or config_for(d, causal)
    check_forward_config(c)
    if SCALE_BLOCK % c.block_m or SCALE_BLOCK % c.block_n:
        raise ValueError(f"config expected tiles that divide SCALE_BLOCK = {SCALE_BLOCK} (each "
                         f"tile inside one scale block), got {c}")
    o = torch.empty((b, h, seq_q, d), dtype=torch.bfloat16, device=q.device)
    if o.numel() == 0:
        return o
    if seq_k == 0:  # no keys: the weighted sum of nothing, as the eager reference gives
        return o.zero_()

    def make():  # once per problem (the key below): grid, scalars, constexprs
        launch = {} if env.TRITON_INTERPRET else {"num_warps": c.num_warps,
                                                  "num_stages": c.num_stages}
        return (cdiv(seq_q, c.block_m), b * h), (
            *q.stride(), *k.stride(), *v.stride(), *o.stride(), h, seq_q, seq_k,
            LOG2E / math.sqrt(d)), {
            "HEAD_DIM": d, "BLOCK_M": c.block_m, "BLOCK_N": c.block_n,
            "SCALE_BLOCK": SCALE_BLOCK, "CAUSAL": causal, "INTERPRETED": env.TRITON_INTERPRET,
            **launch}

    _launch((q.shape, k.shape, q.stride(), k.stride(), v.stride(), causal, c),
            (q, k, v, q_scale, k_scale, v_scale, o), make)
    return o


# a problem's grid, strides and compiled kernel, worked out once (kernels/triton_launch.py)
_launch = Launcher(scaled_attention_fwd_kernel)


@register("scaled_attention", "triton", dtypes=(E4M3,), needs=("triton",), check=reason,
          meta={"fused": True, "head_dims": HEAD_DIMS, "scale_block": SCALE_BLOCK},
          description="FlashAttention forward in Triton on e4m3 inputs, per-block scales")
def scaled_attention_triton(q, k, v, q_scale, k_scale, v_scale,
                            causal: bool = False) -> torch.Tensor:
    """FlashAttention's forward in Triton on e4m3 Q, K, V with per-block scales."""
    return forward(q, k, v, q_scale, k_scale, v_scale, causal)
