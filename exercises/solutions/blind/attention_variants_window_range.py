"""Wrong answers to exercise attention_variants.window_range, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention_variants.window_range"
BLIND: dict[str, str] = {
        "full_start from q_start + BLOCK_M - 1 - window (one key too early)": r'''
# ✏️ Exercise attention_variants.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = tl.maximum(q_start - window + 1, 0)  # the first key query q_start sees
    start = (first // BLOCK_N) * BLOCK_N
    last_query = q_start + BLOCK_M - 1
    full_start = tl.cdiv(tl.maximum(last_query - window, 0), BLOCK_N) * BLOCK_N
    return start, full_start
''',
        "first key not clamped at 0 (start goes negative for early queries)": r'''
# ✏️ Exercise attention_variants.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = q_start - window + 1
    start = (first // BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N
    return start, full_start
''',
        "full_start rounded down to a block instead of up": r'''
# ✏️ Exercise attention_variants.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = tl.maximum(q_start - window + 1, 0)
    start = (first // BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = (last_first // BLOCK_N) * BLOCK_N
    return start, full_start
''',
        "start rounded up to a block (skips the block holding the window's first key)": r'''
# ✏️ Exercise attention_variants.window_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window."""
    first = tl.maximum(q_start - window + 1, 0)
    start = tl.cdiv(first, BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N
    return start, full_start
''',
    }
