"""Wrong answers to exercise attention.online_step, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention.online_step"
BLIND: dict[str, str] = {
        "no guard: a block of -inf while m is -inf gives exp(-inf - -inf) = NaN": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
''',
        "NaN guard clamps the maximum at 0 (rows of -200 underflow)": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    safe = tl.maximum(m_new, 0.0)  # never -inf, so exp never sees -inf - -inf
    l_new = l * tl.exp(m - safe) + tl.sum(tl.exp(x - safe), 0)
    return safe, l_new
''',
        "returns the guard's 0 as the running max after an all -inf block": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    m_new = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing seen yet: start from 0
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
''',
        "guard on the rescale only; the block's exp still meets -inf - -inf": r'''
# ✏️ Exercise attention.online_step: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row into the row's running maximum m and running sum l."""
    m_new = tl.maximum(m, tl.max(x, 0))
    alpha = tl.where(m == float("-inf"), 0.0, tl.exp(m - m_new))  # nothing summed yet
    l_new = l * alpha + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
''',
    }
