"""Wrong answers to exercise puzzles.softmax, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.softmax"
BLIND: dict[str, str] = {
        "padding loaded as 0.0, not -inf (it enters the max and the sum)": r'''
# ✏️ Exercise puzzles.softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    mask = cols < T
    x = tl.load(x_ptr + row * T + cols, mask=mask, other=0.0)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0), mask=mask)
''',
        "no max subtracted before exp (large rows overflow)": r'''
# ✏️ Exercise puzzles.softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    mask = cols < T
    x = tl.load(x_ptr + row * T + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x)
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0), mask=mask)
''',
        "store not masked (a row's padding lanes write over the next row)": r'''
# ✏️ Exercise puzzles.softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    mask = cols < T
    x = tl.load(x_ptr + row * T + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0))
''',
    }
