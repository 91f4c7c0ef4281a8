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

:func:`quantize_blocks` is one Triton kernel (:func:`quantize_kernel`: a program per block reads
it once, takes its largest ``|x|``, writes the scale and the e4m3 values), so quantising moves
each byte once; :func:`quantize_blocks_torch` is the same arithmetic in PyTorch operations, the
readable reference the tests hold the kernel to, bit for bit (on an H100 those operations ran at
6% of the copy bandwidth: every one of them reads and writes the whole tensor).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course_utils import env
from kernels.scaled_matmul import E4M3
from kernels.triton_launch import Launcher, next_power_of_2

SCALE_BLOCK = 128  # rows (tokens) of one (batch, head) that share a scale
E4M3_MAX = 448.0  # e4m3's largest finite value
# a block's scale is at least 2^-60: then q_scale · k_scale · log2(e)/√D (D ≤ 256) stays a normal
# float32 in the kernel, and an all-zero block has something to divide by
SCALE_FLOOR = 2.0**-60


def scale_blocks(seq: int) -> int:
    """How many scale blocks cover ``seq`` rows."""
    return -(-seq // SCALE_BLOCK)


@triton.jit
def e4m3_grid(p):
    """``p`` (fp32, 0 <= p <= 448) rounded to the nearest e4m3 value, ties to even: 3 mantissa
    bits from 2^-6 up (round the 20 dropped bits of the fp32 pattern; a carry moves into the
    exponent, as it should), multiples of 2^-9 below (an fp32 add of 2^14 rounds to them).
    What the GPU's ``cvt.rn`` does; Triton 3.8's interpreter casts wrongly (see
    ``triton_fwd``'s docstring), and exactly once a value is on the grid."""
    bits = p.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFFF + ((bits >> 20) & 1)) & -0x100000
    small = (p + 16384.0) - 16384.0
    return tl.where(p < 0.015625, small, bits.to(tl.float32, bitcast=True))


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)  # one scale block: SCALE_BLOCK rows of one (batch, head)
    bh = tl.program_id(1)
    b, h = (bh // n_heads).to(tl.int64), (bh % n_heads).to(tl.int64)
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]  # padding reads 0: no largest |x|
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    # IEEE division (div_rn; Triton's "/" is an approximate one): the reference's bits
    scale = tl.maximum(tl.math.div_rn(tl.max(tl.max(tl.abs(x), axis=1), axis=0), E4M3_MAX),
                       SCALE_FLOOR)
    tl.store(scale_ptr + bh.to(tl.int64) * n_blocks + block, scale)
    y = tl.clamp(tl.math.div_rn(x, scale), -E4M3_MAX, E4M3_MAX)  # (448 up to rounding)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    # the store's addresses follow x8's strides: keys-contiguous V is the same code
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)


def quantize_blocks(x: torch.Tensor, *, keys_contiguous: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x8, scale)`` from a float ``(B, H, S, D)`` tensor: ``x8`` e4m3 of the same shape,
    ``scale`` float32 ``(B, H, ceil(S / SCALE_BLOCK))``, contiguous, with
    ``x ≈ x8 · scale[..., row // SCALE_BLOCK]``. ``keys_contiguous=True`` stores ``x8`` with S
    contiguous (V's layout, see the module's docstring); its shape is ``(B, H, S, D)`` still.
    One Triton kernel (its interpreter on a CPU), equal bit for bit to
    :func:`quantize_blocks_torch`, which serves a tensor the kernel cannot read here (a CPU
    tensor where Triton is compiled for a GPU, a GPU tensor under the interpreter)."""
    _check(x)
    if x.is_cuda == env.TRITON_INTERPRET:  # compiled Triton reads GPU memory, the interpreter CPU
        return quantize_blocks_torch(x, keys_contiguous=keys_contiguous)
    b, h, s, d = x.shape
    n = scale_blocks(s)
    scale = torch.empty((b, h, n), dtype=torch.float32, device=x.device)
    shape = (b, h, d, s) if keys_contiguous else (b, h, s, d)
    x8 = torch.empty(shape, dtype=E4M3, device=x.device)
    x8 = x8.transpose(2, 3) if keys_contiguous else x8
    if x.numel() == 0:
        return x8, scale.fill_(SCALE_FLOOR)

    def make():  # once per problem: grid, sizes and strides, constexprs
        return (n, b * h), (s, d, h, n, *x.stride(), *x8.stride()), {
            "SCALE_FLOOR": SCALE_FLOOR, "E4M3_MAX": E4M3_MAX, "SCALE_BLOCK": SCALE_BLOCK,
            "BLOCK_D": next_power_of_2(d), "INTERPRETED": env.TRITON_INTERPRET}

    _launch((x.shape, x.stride(), x8.stride()), (x, x8, scale), make)
    return x8, scale


_launch = Launcher(quantize_kernel)


def quantize_blocks_torch(x: torch.Tensor, *, keys_contiguous: bool = False
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`quantize_blocks` in PyTorch operations: the reference, written to be read."""
    _check(x)
    b, h, s, d = x.shape
    n = scale_blocks(s)
    # pad S to whole blocks (zeros change no block's largest value), one block per row of a view
    padded = F.pad(x, (0, 0, 0, n * SCALE_BLOCK - s)) if s % SCALE_BLOCK else x
    tiles = padded.reshape(b, h, n, SCALE_BLOCK, d)
    amax = tiles.abs().amax(dim=(3, 4)).float() if tiles.numel() else tiles.new_zeros(
        (b, h, n), dtype=torch.float32)
    # divided by a tensor, not by the number 448: PyTorch divides a GPU tensor by a Python number
    # as a multiplication by its reciprocal, one bit off IEEE's division now and then (on an H100
    # a few scales in a thousand, and the values of their blocks that lie near a rounding tie)
    scale = (amax / torch.full_like(amax, E4M3_MAX)).clamp_min(SCALE_FLOOR)
    # x / scale ≤ 448 up to rounding; clamp so that the cast never meets a value past 448 (NaN)
    x8 = (tiles.float() / scale[..., None, None]).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    x8 = x8.reshape(b, h, n * SCALE_BLOCK, d)[:, :, :s]
    if keys_contiguous:
        x8 = x8.transpose(2, 3).contiguous().transpose(2, 3)
    else:
        x8 = x8.contiguous()
    return x8, scale.contiguous()


def _check(x) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"quantize_blocks: x expected a floating-point (B, H, S, D) tensor, got "
                         f"{_describe(x)}")


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
