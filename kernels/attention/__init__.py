"""Attention, ``softmax(Q Kᵀ · scale) V`` per batch and head: lesson 08.

Shapes follow ``F.scaled_dot_product_attention``: ``q`` is ``(B, H, Sq, D)``, ``k`` and ``v``
are ``(B, H, Sk, D)``, the output is ``(B, H, Sq, D)`` in the dtype of ``q``, and ``scale`` is
``1/sqrt(D)``. ``causal=True`` masks key ``j`` for query ``i`` when ``j > i`` (top-left aligned,
as SDPA's ``is_causal``). A kernel is called ``kernel(q, k, v)`` or ``kernel(q, k, v, causal)``.

Naively it is three kernels and an ``Sq × Sk`` matrix in memory (``4·B·H·S²·D`` FLOPs on
``B·H·S²`` scores written and read back); fused, the scores never leave the chip and the bytes
moved fall to the four ``(B, H, S, D)`` tensors.
"""

import math

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _validate(q, k, v, causal=False) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect_tensor("attention", name, t, ndim=4, floating=True)
    b, h, _, d = q.shape
    if tuple(k.shape[:2]) != (b, h) or k.shape[3] != d:
        raise ValueError(f"attention: k expected shape ({b}, {h}, Sk, {d}) to match q "
                         f"{tuple(q.shape)}, got {tuple(k.shape)}")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"attention: v expected the shape of k {tuple(k.shape)}, "
                         f"got {tuple(v.shape)}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"attention: {name} expected the dtype of q ({q.dtype}), "
                             f"got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"attention: {name} expected the device of q ({q.device}), "
                             f"got {t.device}")
    if not isinstance(causal, bool):
        raise ValueError(f"attention: causal expected True or False, got {causal!r}")


def _qkv(b, h, sq, sk, d, scale=1.0, causal=False):
    # scale makes the scores large (q and k); v stays unit-sized: a fused kernel rounds P to
    # 16 bits before PV (as SDPA's do), an error proportional to |v| that the tolerance bounds
    def make(dtype, device):
        q, k = (scale * torch.randn(b, h, s, d, device=device) for s in (sq, sk))
        v = torch.randn(b, h, sk, d, device=device)
        return q.to(dtype), k.to(dtype), v.to(dtype), causal
    return make


def _bshd(dtype, device):
    # (B, S, H, D) storage viewed as (B, H, S, D): the layout a projection writes
    q, k, v = (torch.randn(2, 70, 3, 64, device=device).to(dtype).transpose(1, 2)
               for _ in range(3))
    return q, k, v, False


define_op(
    "attention",
    arg_names=("q", "k", "v", "causal"),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("1x2x128x64", _qkv(1, 2, 128, 128, 64)),
        Case("odd 2x3x77x64", _qkv(2, 3, 77, 77, 64)),
        Case("odd 1x2x130x128 causal", _qkv(1, 2, 130, 130, 128, causal=True)),
        Case("causal 1x1x64x64", _qkv(1, 1, 64, 64, 64, causal=True)),
        Case("one query 1x2x1x64", _qkv(1, 2, 1, 50, 64)),
        Case("cross 1x2x40x97x64 causal", _qkv(1, 2, 40, 97, 64, causal=True)),
        Case("large scores 1x1x96x64", _qkv(1, 1, 96, 96, 64, scale=6.0)),
        Case("(B, S, H, D) strides 2x3x70x64", _bshd),
    ),
    # a fused kernel sums the scores in another order (and rounds P to 16 bits before PV)
    tolerance={torch.float32: (2e-4, 2e-4), torch.float16: (4e-3, 4e-3),
               torch.bfloat16: (2e-2, 2e-2)},
    description="scaled dot-product attention, (B, H, S, D)",
)


@register("attention", "eager", dtypes=DTYPES)
def attention_eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    causal: bool = False) -> torch.Tensor:
    """softmax(Q Kᵀ / sqrt(D)) V in float32, as three operations: the reference."""
    scores = (q.float() @ k.float().transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        sq, sk = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=q.device)
                                    .triu(1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


# The providers register themselves on import (after the op is defined above).
from kernels.attention import autograd, hopper, naive, sdpa  # noqa: E402, F401
