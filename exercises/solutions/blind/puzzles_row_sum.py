"""Wrong answers to exercise puzzles.row_sum, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.row_sum"
BLIND: dict[str, str] = {
        "masked load without other= (masked lanes undefined)": r'''
# ✏️ Exercise puzzles.row_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=mask)
    tl.store(z_ptr + rows, tl.sum(x, axis=1), mask=rows < N0)
''',
        "row mask on the load but not on the store": r'''
# ✏️ Exercise puzzles.row_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=mask, other=0.0)
    tl.store(z_ptr + rows, tl.sum(x, axis=1))
''',
        "row stride BT instead of T (right only when T == 128)": r'''
# ✏️ Exercise puzzles.row_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * BT + cols[None, :], mask=mask, other=0.0)
    tl.store(z_ptr + rows, tl.sum(x, axis=1), mask=rows < N0)
''',
    }
