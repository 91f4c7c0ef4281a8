"""Wrong answers to exercise puzzles.col_sum, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.col_sum"
BLIND: dict[str, str] = {
        "loop over whole row blocks only (the last N0 % 16 rows dropped)": r'''
# ✏️ Exercise puzzles.col_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1)."""
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    rows = tl.arange(0, B0)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for start in range(0, N0 - B0 + 1, B0):
        mask = (start + rows < N0)[:, None] & (cols < N1)[None, :]
        x = tl.load(x_ptr + (start + rows)[:, None] * N1 + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
        "load masked on the columns only (the last row block reads past the matrix)": r'''
# ✏️ Exercise puzzles.col_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1)."""
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    rows = tl.arange(0, B0)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for start in range(0, N0, B0):
        x = tl.load(x_ptr + (start + rows)[:, None] * N1 + cols[None, :],
                    mask=(cols < N1)[None, :], other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
        "masked load without other= (masked-off lanes are undefined compiled)": r'''
# ✏️ Exercise puzzles.col_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1)."""
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    rows = tl.arange(0, B0)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for start in range(0, N0, B0):
        mask = (start + rows < N0)[:, None] & (cols < N1)[None, :]
        x = tl.load(x_ptr + (start + rows)[:, None] * N1 + cols[None, :], mask=mask)
        acc += tl.sum(x, axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
    }
