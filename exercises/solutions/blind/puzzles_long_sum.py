"""Wrong answers to exercise puzzles.long_sum, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.long_sum"
BLIND: dict[str, str] = {
        "loop over whole chunks only (the ragged tail of a row dropped)": r'''
# ✏️ Exercise puzzles.long_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T), in chunks of BT."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, T // BT * BT, BT):
        mask = (rows < N0)[:, None] & (start + cols < T)[None, :]
        x = tl.load(x_ptr + rows[:, None] * T + start + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "chunk masked on the rows only (the last chunk reads into the next row)": r'''
# ✏️ Exercise puzzles.long_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T), in chunks of BT."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, T, BT):
        x = tl.load(x_ptr + rows[:, None] * T + start + cols[None, :],
                    mask=(rows < N0)[:, None], other=0.0)
        acc += tl.sum(x, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "masked load without other= (masked-off lanes are undefined compiled)": r'''
# ✏️ Exercise puzzles.long_sum: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr, BT: tl.constexpr):
    """z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T), in chunks of BT."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, T, BT):
        mask = (rows < N0)[:, None] & (start + cols < T)[None, :]
        x = tl.load(x_ptr + rows[:, None] * T + start + cols[None, :], mask=mask)
        acc += tl.sum(x, axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
    }
