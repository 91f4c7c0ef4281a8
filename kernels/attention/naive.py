"""Attention as three kernels, the ``S × S`` matrix written to memory and read back.

1. ``S = Q Kᵀ``: a batched matmul (cuBLAS on a GPU) writes every score, ``B·H·Sq·Sk`` floats
   (float32, so 16-bit inputs lose nothing before the softmax);
2. ``P = softmax(S / √D)`` (causal mask included): :func:`softmax_kernel` below, one Triton
   program per row, reads the scores and writes the probabilities in the input's dtype;
3. ``O = P V``: a second batched matmul reads ``P`` again.

For B=4, H=16, S=4096 that is 4·16·4096² · (4 + 2) bytes = 6.4 GB of scores and probabilities,
written and read back, to produce a 0.5 GB output. ``notebooks/09_attention.ipynb`` measures
the peak memory and the profile; the fused kernel of ``triton_fwd.py`` keeps the scores on chip.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.attention.problem import variant_reason
from kernels.registry import OPS, register

MAX_KEYS = 1 << 15  # a row of scores lives in registers (as in lesson 02's softmax)


@triton.jit
def softmax_kernel(s_ptr, p_ptr, n_rows, seq_q, seq_k, scale, CAUSAL: tl.constexpr,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """ROWS rows of P = softmax(scale · S), keys after the query masked when causal."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)  # (b·H + h)·Sq + i
    query = rows % seq_q
    cols = tl.arange(0, BLOCK)
    inside = (rows < n_rows)[:, None] & (cols < seq_k)[None, :]
    ok = inside
    if CAUSAL:
        ok = ok & (cols[None, :] <= query[:, None])  # top-left aligned, as SDPA's is_causal
    offsets = rows[:, None] * seq_k + cols[None, :]
    s = tl.load(s_ptr + offsets, mask=ok, other=float("-inf")).to(tl.float32) * scale
    top = tl.max(s, 1)
    top = tl.where(top == float("-inf"), 0.0, top)  # padding rows past the last: no NaN
    e = tl.exp(s - top[:, None])
    total = tl.sum(e, 1)  # >= 1 for a real row (its maximum gives e^0); 0 for padding
    total = tl.where(total == 0.0, 1.0, total)
    tl.store(p_ptr + offsets, (e / total[:, None]).to(p_ptr.dtype.element_ty),
             mask=inside)


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Kernel 1: every score Q Kᵀ, float32, shape (B·H, Sq, Sk)."""
    b, h, seq_q, d = q.shape
    q3, k3 = q.reshape(b * h, seq_q, d), k.reshape(b * h, k.shape[2], d)
    if q.is_cuda and q.dtype != torch.float32:  # cuBLAS: 16-bit inputs, fp32 output
        return torch.bmm(q3, k3.transpose(1, 2), out_dtype=torch.float32)
    return torch.bmm(q3.float(), k3.float().transpose(1, 2))  # (CPU: no 16-bit→32 bmm)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              causal: bool = False, window: int | None = None) -> torch.Tensor:
    """The three kernels; ValueError, in words, for a problem they cannot run."""
    OPS["attention"].validate(q, k, v, causal, window)
    if why := reason(q, k, v, causal, window):
        raise ValueError(f"attention/naive: {why}")
    return _attention(q, k, v, causal)


def _attention(q, k, v, causal=False, window=None):  # (the registry's call, having checked)
    b, h, seq_q, d = q.shape
    seq_k = k.shape[2]
    if q.numel() == 0 or seq_k == 0:
        return q.new_zeros(b, h, seq_q, d)
    s = scores(q, k)
    p = torch.empty(s.shape, dtype=v.dtype, device=q.device)
    block = triton.next_power_of_2(seq_k)
    # the interpreter pays per program: many rows each; a GPU: one long row per program
    rows = 16 if env.TRITON_INTERPRET else max(1, 2048 // block)
    launch = {} if env.TRITON_INTERPRET else {"num_warps": 16 if block >= 16384 else
                                              8 if block >= 4096 else 4}
    n_rows = b * h * seq_q
    softmax_kernel[(triton.cdiv(n_rows, rows),)](s, p, n_rows, seq_q, seq_k, 1.0 / math.sqrt(d),
                                                 CAUSAL=causal, ROWS=rows, BLOCK=block,
                                                 **launch)
    o = torch.bmm(p, v.reshape(b * h, seq_k, d))  # kernel 3
    return o.view(b, h, seq_q, d)


def reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
           window: int | None = None) -> str | None:
    from kernels.gelu.triton_gelu import triton_device_check

    if why := variant_reason(q, k, window, gqa=False, windows=False):
        return why
    if why := triton_device_check(q):
        return why.replace("needs x", "needs q").replace("got x", "got q")
    if k.shape[2] > MAX_KEYS:
        return (f"keeps a row of scores in registers: at most {MAX_KEYS} keys, "
                f"got k with {k.shape[2]}")
    return None


register("attention", "naive", fn=_attention, dtypes=(torch.float32, torch.float16, torch.bfloat16),
         needs=("triton",), check=reason,
         meta={"fused": False, "scores_bytes_per_element": "4 (float32 S) + the input's (P)"},
         description="three kernels: QKᵀ (cuBLAS), a Triton softmax, PV; S×S in memory")
