"""Wrong answers to exercise fusion.reverse, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "fusion.reverse"
BLIND: dict[str, str] = {
        "reverses within each program's block, not the whole vector": r'''
# ✏️ Exercise fusion.reverse: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    src = pid * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))
    mask = offsets < n
    x = tl.load(x_ptr + src, mask=src < n)
    tl.store(y_ptr + offsets, x, mask=mask)
''',
        "store not masked (the last program writes past y)": r'''
# ✏️ Exercise fusion.reverse: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + (n - 1 - offsets), mask=mask, other=0.0)
    tl.store(y_ptr + offsets, x)
''',
        "load not masked (the last program reads before x)": r'''
# ✏️ Exercise fusion.reverse: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + (n - 1 - offsets))
    tl.store(y_ptr + offsets, x, mask=mask)
''',
    }
