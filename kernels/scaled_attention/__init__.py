"""Attention on fp8 (e4m3) inputs with per-block scales: lesson 19, section 2.

``scaled_attention(q, k, v, q_scale, k_scale, v_scale, causal)`` is attention (the
``attention`` op's shapes and causal convention: query ``i`` sees key ``j <= i``, top-left
aligned, whatever ``Sq`` and ``Sk`` are) on inputs that :func:`quantize.quantize_qkv` made: ``q``
``(B, H, Sq, D)``, ``k`` and ``v`` ``(B, H_kv, Sk, D)``, all ``float8_e4m3fn``; each scale
float32 ``(B, heads, ceil(S / SCALE_BLOCK))``, one per block of 128 rows, so that the values
meant are ``q · q_scale`` row block by row block (:func:`quantize.dequantize`). The output is
``(B, H, Sq, D)`` in bfloat16. (The kernel takes ``H_kv = H`` only; its reason says so.)

Why fp8: Hopper's tensor cores multiply e4m3 at twice the rate of bf16 (≈ 1980 against
≈ 990 TFLOP/s dense on an H100), and the inputs are half the bytes. What it costs: e4m3 keeps 3
mantissa bits, so each input value is off by up to 1/16 of itself (half a step), and the kernel
rounds the softmax's weights to e4m3 too before ``P V``. The reference computes in float64 from
the dequantised inputs, so the op's tolerance is the kernel's own rounding of ``P`` (and of the
output to bfloat16); what quantising the inputs costs is measured against bf16 attention of the
original tensors in ``tests/test_scaled_attention.py``.
"""

from __future__ import annotations

import torch

from kernels.attention.problem import attention_eager, check_kv
from kernels.registry import Case, define_op, expect_tensor, register
from kernels.scaled_attention.quantize import (
    E4M3,
    SCALE_BLOCK,
    dequantize,
    quantize_qkv,
    scale_blocks,
)

OP = "scaled_attention"
DTYPES = (E4M3,)
SCALES = ("q_scale", "k_scale", "v_scale")


def _validate(q, k, v, q_scale, k_scale, v_scale, causal=False) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect_tensor(OP, name, t, ndim=4)
        if t.dtype != E4M3:
            raise ValueError(f"{OP}: {name} expected float8_e4m3fn (quantize_qkv makes it), "
                             f"got {str(t.dtype).removeprefix('torch.')}")
    b, _, _, d = q.shape
    check_kv(OP, q, k, v, (b, "H_kv", "Sk", d))
    for name, scale, of in zip(SCALES, (q_scale, k_scale, v_scale), (q, k, v), strict=True):
        expect_tensor(OP, name, scale)
        want = (b, of.shape[1], scale_blocks(of.shape[2]))
        if scale.dtype != torch.float32 or tuple(scale.shape) != want:
            raise ValueError(f"{OP}: {name} expected float32 of shape {want} (one scale per "
                             f"{SCALE_BLOCK} rows of each batch and head), got "
                             f"{str(scale.dtype).removeprefix('torch.')} of shape "
                             f"{tuple(scale.shape)}")
        if scale.device != q.device:
            raise ValueError(f"{OP}: {name} expected the device of q ({q.device}), "
                             f"got {scale.device}")
    if not isinstance(causal, bool):
        raise ValueError(f"{OP}: causal expected True or False, got {causal!r}")


# each block of 128 rows gets its own size, so a kernel that reads another block's scale (or
# none) is off by a factor of 2 or more, not by the few percent random blocks differ by
Q_SIZES, K_SIZES, V_SIZES = (1.0, 3.0), (0.5, 2.0, 1.0, 4.0), (1.0, 0.5, 2.0, 0.25)


def sized(x: torch.Tensor, sizes: tuple[float, ...]) -> torch.Tensor:
    """``x`` with its row blocks multiplied by ``sizes`` in turn."""
    block = torch.arange(x.shape[2], device=x.device) // SCALE_BLOCK
    factor = torch.tensor(sizes, device=x.device)[block % len(sizes)]
    return x * factor[:, None]


def problem(b, h, sq, sk, d, causal=False, scale=1.0, zero_block=None):
    """A case: fresh random q, k, v with blocks of different sizes (``scale`` multiplies q and
    k: larger scores), key block ``zero_block`` of K and V all zeros, quantised."""
    def make(dtype, device):
        q = sized(scale * torch.randn(b, h, sq, d, device=device), Q_SIZES)
        k = sized(scale * torch.randn(b, h, sk, d, device=device), K_SIZES)
        v = sized(torch.randn(b, h, sk, d, device=device), V_SIZES)
        if zero_block is not None:
            rows = slice(zero_block * SCALE_BLOCK, (zero_block + 1) * SCALE_BLOCK)
            k[:, :, rows] = 0
            v[:, :, rows] = 0
        return (*quantize_qkv(q, k, v), causal)
    return make


define_op(
    OP,
    arg_names=("q", "k", "v", *SCALES, "causal"),
    typed_args=("q", "k", "v"),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("2x2x256x64", problem(2, 2, 256, 256, 64)),
        Case("causal 1x2x256x64", problem(1, 2, 256, 256, 64, causal=True)),
        Case("ragged 1x2x200x64", problem(1, 2, 200, 200, 64)),
        Case("ragged causal 1x1x300x32", problem(1, 1, 300, 300, 32, causal=True)),
        Case("causal Sq<Sk 1x2x100x300x64", problem(1, 2, 100, 300, 64, causal=True)),
        Case("causal Sq>Sk 1x2x300x130x64", problem(1, 2, 300, 130, 64, causal=True)),
        Case("one block 1x1x16x64", problem(1, 1, 16, 16, 64)),
        Case("one query 1x2x1x200x64", problem(1, 2, 1, 200, 64)),
        Case("zero K/V block 1x2x64x384x64", problem(1, 2, 64, 384, 64, zero_block=1)),
        Case("large scores 1x1x128x64", problem(1, 1, 128, 128, 64, scale=3.0)),
        Case("D=128 causal 1x1x160x128", problem(1, 1, 160, 160, 128, causal=True)),
    ),
    # the kernel's own rounding: P to e4m3 before P V (each weight off by up to 2^-4 of itself,
    # errors that mostly cancel over the keys: tests/test_scaled_attention.py derives the
    # per-row bound), and the output to bfloat16 (2^-9 of |O|, in both kernel and reference)
    tolerance={torch.bfloat16: (6e-2, 2e-2)},
    description="attention on fp8 e4m3 Q, K, V with a float32 scale per 128 rows, bf16 out",
)


@register(OP, "eager", dtypes=DTYPES)
def scaled_attention_eager(q, k, v, q_scale, k_scale, v_scale,
                           causal: bool = False) -> torch.Tensor:
    """The definition: Q, K and V dequantised in float64, the attention op's eager formula in
    float64, the output rounded to bfloat16 once."""
    meant = [dequantize(x, s) for x, s in ((q, q_scale), (k, k_scale), (v, v_scale))]
    return attention_eager(*meant, causal).to(torch.bfloat16)


# the Triton provider registers itself on import (after the op is defined above)
from kernels.scaled_attention import triton_fwd  # noqa: E402, F401
