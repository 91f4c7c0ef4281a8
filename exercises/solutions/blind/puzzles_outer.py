"""Wrong answers to exercise puzzles.outer, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.outer"
BLIND: dict[str, str] = {
        "row stride N1 instead of N0 (right only when square)": r'''
# ✏️ Exercise puzzles.outer: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1."""
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + j)
    tl.store(z_ptr + j[:, None] * N1 + i[None, :], y[:, None] + x[None, :])
''',
        "block laid out as z[i, j] (x down the rows), stored transposed": r'''
# ✏️ Exercise puzzles.outer: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1."""
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + j)
    z = x[:, None] + y[None, :]  # (B0, B1)
    tl.store(z_ptr + i[:, None] * N1 + j[None, :], z)
''',
        "mask with the two bounds swapped (i < N1, j < N0)": r'''
# ✏️ Exercise puzzles.outer: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1."""
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0)
    y = tl.load(y_ptr + j, mask=j < N1)
    mask = (j < N0)[:, None] & (i < N1)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], y[:, None] + x[None, :], mask=mask)
''',
    }
