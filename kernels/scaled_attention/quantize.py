"""Attention's Q, K and V in fp8 (e4m3) with one float32 scale per block of rows.

e4m3 keeps 3 mantissa bits and holds at most 448, so a tensor is stored as fp8 values ``x8`` and
scales: ``x ≈ scale · x8``. e4m3 is floating point, so a scale only places its range: 3 bits for
``|x8|`` from 2^-6 to 448, fewer below (subnormals, steps of 2^-9), zero under 2^-10. With one
scale for a whole tensor, an outlier token a thousand times larger than the others pushes their
smallest values below 2^-6, where they lose bits or become 0; one scale per ``SCALE_BLOCK`` rows
(tokens) of each (batch, head) confines that to the outlier's block, and is what a fused kernel
applies for free: each tile of the kernel lies inside one block, so the scale is one number per
tile (the tiles divide ``SCALE_BLOCK``), multiplied into the fp32 result of a ``tl.dot``.

The scale of a block is its largest ``|x|`` over 448 (so that value lands on e4m3's largest),
never less than :data:`SCALE_FLOOR` (an all-zero block divides by it and stores zeros).

V is stored **keys-contiguous**: a ``(B, H, D, S)`` buffer viewed as ``(B, H, S, D)``. In
``O = P V`` the keys are the reduction dimension, and Hopper's fp8 ``wgmma`` reads its B operand
only K-major (contiguous along the reduction; 16-bit types may be either), so V must be
contiguous along S (Triton's own fused-attention tutorial stores its fp8 V so, for the same
reason). Q and K stay head-dim-contiguous: in ``S = Q Kᵀ`` the reduction is over D.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.scaled_matmul import E4M3

SCALE_BLOCK = 128  # rows (tokens) of one (batch, head) that share a scale
E4M3_MAX = 448.0  # e4m3's largest finite value
# a block's scale is at least 2^-60: then q_scale · k_scale · log2(e)/√D (D ≤ 256) stays a normal
# float32 in the kernel, and an all-zero block has something to divide by
SCALE_FLOOR = 2.0**-60


def scale_blocks(seq: int) -> int:
    """How many scale blocks cover ``seq`` rows."""
    return -(-seq // SCALE_BLOCK)


def quantize_blocks(x: torch.Tensor, *, keys_contiguous: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x8, scale)`` from a float ``(B, H, S, D)`` tensor: ``x8`` e4m3 of the same shape,
    ``scale`` float32 ``(B, H, ceil(S / SCALE_BLOCK))``, contiguous, with
    ``x ≈ x8 · scale[..., row // SCALE_BLOCK]``. ``keys_contiguous=True`` stores ``x8`` with S
    contiguous (V's layout, see the module's docstring); its shape is ``(B, H, S, D)`` still."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"quantize_blocks: x expected a floating-point (B, H, S, D) tensor, got "
                         f"{_describe(x)}")
    b, h, s, d = x.shape
    n = scale_blocks(s)
    # pad S to whole blocks (zeros change no block's largest value), one block per row of a view
    padded = F.pad(x, (0, 0, 0, n * SCALE_BLOCK - s)) if s % SCALE_BLOCK else x
    tiles = padded.reshape(b, h, n, SCALE_BLOCK, d)
    amax = tiles.abs().amax(dim=(3, 4)).float() if tiles.numel() else tiles.new_zeros(
        (b, h, n), dtype=torch.float32)
    scale = (amax / E4M3_MAX).clamp_min(SCALE_FLOOR)
    # x / scale ≤ 448 up to rounding; clamp so that the cast never meets a value past 448 (NaN)
    x8 = (tiles.float() / scale[..., None, None]).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    x8 = x8.reshape(b, h, n * SCALE_BLOCK, d)[:, :, :s]
    if keys_contiguous:
        x8 = x8.transpose(2, 3).contiguous().transpose(2, 3)
    else:
        x8 = x8.contiguous()
    return x8, scale.contiguous()


def dequantize(x8: torch.Tensor, scale: torch.Tensor,
               dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``x8 · scale`` in ``dtype``, each row times its block's scale: what the fp8 values mean
    (exact in float64: an e4m3 value times a float32 has at most 4 + 24 significant bits)."""
    rows = scale.to(dtype).repeat_interleave(SCALE_BLOCK, dim=-1)[..., :x8.shape[2]]
    return x8.to(dtype) * rows[..., None]


def quantize_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(q8, k8, v8, q_scale, k_scale, v_scale)``, the arguments of the ``scaled_attention`` op
    in its order (``causal`` apart), from float ``(B, H, S, D)`` tensors; V keys-contiguous."""
    q8, q_scale = quantize_blocks(q)
    k8, k_scale = quantize_blocks(k)
    v8, v_scale = quantize_blocks(v, keys_contiguous=True)
    return q8, k8, v8, q_scale, k_scale, v_scale


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).removeprefix('torch.')} of shape {tuple(x.shape)}"
    return type(x).__name__
