"""Wrong answers to exercise fusion.silu_mul, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "fusion.silu_mul"
BLIND: dict[str, str] = {
        "odd width checked with assert (AssertionError, not ValueError)": r'''
# ✏️ Exercise fusion.silu_mul: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    r = i // d
    c = i % d
    a = tl.load(x_ptr + r * 2 * d + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + r * 2 * d + d + c, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + i, y.to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    assert x.dim() == 2 and x.shape[1] % 2 == 0, f"x must be 2-D with an even width, got {tuple(x.shape)}"
    rows, width = x.shape
    d = width // 2
    y = torch.empty((rows, d), dtype=x.dtype, device=x.device)
    n = rows * d
    if n == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, d, n, BLOCK=BLOCK)
    return y
''',
        "silu(a) rounded to x's dtype before the multiply (two roundings, not float32)": r'''
# ✏️ Exercise fusion.silu_mul: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    r = i // d
    c = i % d
    a = tl.load(x_ptr + r * 2 * d + c, mask=mask, other=0.0)
    b = tl.load(x_ptr + r * 2 * d + d + c, mask=mask, other=0.0)
    af = a.to(tl.float32)
    silu = (af * tl.sigmoid(af)).to(a.dtype)  # F.silu(a) in a's dtype, as eager has it
    tl.store(y_ptr + i, (silu * b).to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got shape {tuple(x.shape)}")
    rows, width = x.shape
    d = width // 2
    y = torch.empty((rows, d), dtype=x.dtype, device=x.device)
    n = rows * d
    if n == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, d, n, BLOCK=BLOCK)
    return y
''',
        "y allocated with empty_like(x[:, :d]): a slicing op beside the allocation": r'''
# ✏️ Exercise fusion.silu_mul: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    r = i // d
    c = i % d
    a = tl.load(x_ptr + r * 2 * d + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + r * 2 * d + d + c, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + i, y.to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got shape {tuple(x.shape)}")
    d = x.shape[1] // 2
    y = torch.empty_like(x[:, :d], memory_format=torch.contiguous_format)
    n = y.numel()
    if n == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, d, n, BLOCK=BLOCK)
    return y
''',
    }
