"""Wrong answers to exercise puzzles.long_softmax, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.long_softmax"
BLIND: dict[str, str] = {
        "running max starts at 0 instead of -inf": r'''
# ✏️ Exercise puzzles.long_softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    m = tl.full([], 0.0, tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        tl.store(z_ptr + row * T + start + cols, tl.exp(x - m) / s, mask=mask)
''',
        "sum not rescaled when the max grows": r'''
# ✏️ Exercise puzzles.long_softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        m = tl.maximum(m, tl.max(x, axis=0))
        s = s + tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=float("-inf"))
        tl.store(z_ptr + row * T + start + cols, tl.exp(x - m) / s, mask=mask)
''',
        "padding of the first loop loaded as 0.0 (enters the max and the sum)": r'''
# ✏️ Exercise puzzles.long_softmax: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    """z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64."""
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=0.0)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, T, BT):
        mask = start + cols < T
        x = tl.load(x_ptr + row * T + start + cols, mask=mask, other=0.0)
        tl.store(z_ptr + row * T + start + cols, tl.exp(x - m) / s, mask=mask)
''',
    }
