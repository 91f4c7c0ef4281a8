"""Wrong answers to exercise puzzles.outer_blocks, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.outer_blocks"
BLIND: dict[str, str] = {
        "store masked on the columns only (rows past N1 written)": r'''
# ✏️ Exercise puzzles.outer_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0)."""
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0, other=0.0)
    y = tl.load(y_ptr + j, mask=j < N1, other=0.0)
    z = tl.maximum(y[:, None] * x[None, :], 0.0)
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], z, mask=(i < N0)[None, :])
''',
        "relu applied to x and y before the product": r'''
# ✏️ Exercise puzzles.outer_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0)."""
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.maximum(tl.load(x_ptr + i, mask=i < N0, other=0.0), 0.0)
    y = tl.maximum(tl.load(y_ptr + j, mask=j < N1, other=0.0), 0.0)
    mask = (j < N1)[:, None] & (i < N0)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], y[:, None] * x[None, :], mask=mask)
''',
        "y loaded without a mask (the store's mask hides it)": r'''
# ✏️ Exercise puzzles.outer_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0)."""
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0, other=0.0)
    y = tl.load(y_ptr + j)
    mask = (j < N1)[:, None] & (i < N0)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], tl.maximum(y[:, None] * x[None, :], 0.0),
             mask=mask)
''',
    }
