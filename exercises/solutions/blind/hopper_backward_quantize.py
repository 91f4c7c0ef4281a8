"""Wrong answers to exercise hopper_backward.quantize, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "hopper_backward.quantize"
# Its "mistake" changes no value: x / scale exceeds 448 by at most one float32 step (448.00003,
# on about 9% of block maxima), which e4m3's rounding takes back to 448 (e4m3_grid here, the
# GPU's saturating cvt there): the clamp is a guard the values never need
# (tests/test_quantize_exercise.py::test_x_over_scale_rounds_past_448_and_e4m3_takes_it_back).
EQUIVALENT = {"x / scale not clamped to ±448 before the cast":
              "bit for bit the solution's output: fl(x / scale) <= 448.00003 rounds to 448 in "
              "e4m3 (e4m3_grid, and the GPU's saturating cast)"}
BLIND: dict[str, str] = {
        "block maximum of x, not of |x| (negative outliers missed)": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.max(x, axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = tl.clamp(x / scale, -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
''',
        "batch and head offsets in int32 (overflow past 2^31 elements)": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = tl.clamp(x / scale, -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
''',
        "x8 stored with x's strides (keys-contiguous V lands in the wrong layout)": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    offsets = b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd
    x = tl.load(x_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = tl.clamp(x / scale, -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + offsets, y.to(x8_ptr.dtype.element_ty), mask=ok)  # same element, same place
''',
        "x / scale not clamped to ±448 before the cast": r'''
# ✏️ Exercise hopper_backward.quantize: edit this cell, run it, then run the check below
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // n_heads
    h = bh % n_heads
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(amax / E4M3_MAX, SCALE_FLOOR)
    tl.store(scale_ptr + bh * n_blocks + block, scale)
    y = x / scale  # |y| <= 448 by construction of the scale
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
''',
    }
