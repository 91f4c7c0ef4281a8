"""Wrong answers to exercise puzzles.matvec, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.matvec"
BLIND: dict[str, str] = {
        "x loaded masked but without other=": r'''
# ✏️ Exercise puzzles.matvec: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, N1, B1):
        c = start + cols
        a = tl.load(a_ptr + rows[:, None] * N1 + c[None, :],
                    mask=(rows < N0)[:, None] & (c < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + c, mask=c < N1)  # a is 0 there anyway
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "x loaded without a mask (a's zeros hide it)": r'''
# ✏️ Exercise puzzles.matvec: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, N1, B1):
        c = start + cols
        a = tl.load(a_ptr + rows[:, None] * N1 + c[None, :],
                    mask=(rows < N0)[:, None] & (c < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + c)
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
        "store not masked (the last program writes rows past N0)": r'''
# ✏️ Exercise puzzles.matvec: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr, B1: tl.constexpr):
    """z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1)."""
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, B1)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for start in range(0, N1, B1):
        c = start + cols
        a = tl.load(a_ptr + rows[:, None] * N1 + c[None, :],
                    mask=(rows < N0)[:, None] & (c < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + c, mask=c < N1, other=0.0)
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc)
''',
    }
