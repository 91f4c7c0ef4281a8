"""Wrong answers to exercise puzzles.add, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.add"
BLIND: dict[str, str] = {
        "lane count hard-coded to 32 (the first example's N0)": r'''
# ✏️ Exercise puzzles.add: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. One program, B0 = N0 lanes (a power of two)."""
    offsets = tl.arange(0, 32)
    x = tl.load(x_ptr + offsets)
    tl.store(z_ptr + offsets, x + 10)
''',
        "mask offsets < N0 - 1 (the last element never written)": r'''
# ✏️ Exercise puzzles.add: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. One program, B0 = N0 lanes (a power of two)."""
    offsets = tl.arange(0, B0)
    mask = offsets < N0 - 1
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(z_ptr + offsets, x + 10, mask=mask)
''',
    }
