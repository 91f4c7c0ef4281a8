"""Wrong answers to exercise attention_variants.combine_splits, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention_variants.combine_splits"
BLIND: dict[str, str] = {
        "no max subtracted: exp2(lse_s) overflows or underflows at |lse| ~ 3000": r'''
# ✏️ Exercise attention_variants.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    ok = s < splits
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=ok, other=float("-inf"))
    w = tl.math.exp2(lse)
    total = tl.sum(w, 0)
    safe = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / safe
    return o, tl.math.log2(total)
''',
        "lanes past the last split read lse = 0.0, not -inf (they get weight)": r'''
# ✏️ Exercise attention_variants.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    ok = s < splits
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=ok, other=0.0)
    m = tl.max(lse, 0)
    m_sub = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse - m_sub)
    total = tl.sum(w, 0)
    safe = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / safe
    return o, m + tl.math.log2(safe)
''',
        "partial outputs loaded without the split mask (0 x a poisoned split = NaN)": r'''
# ✏️ Exercise attention_variants.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=s < splits, other=float("-inf"))
    m = tl.max(lse, 0)
    m_sub = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse - m_sub)  # 0 for the lanes past the last split
    total = tl.sum(w, 0)
    safe = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :])
    o = tl.sum(w[:, None] * part, 0) / safe
    return o, m + tl.math.log2(safe)
''',
        "row with every split empty not guarded (-inf - -inf gives NaN)": r'''
# ✏️ Exercise attention_variants.combine_splits: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results."""
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    ok = s < splits
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=ok, other=float("-inf"))
    m = tl.max(lse, 0)
    w = tl.math.exp2(lse - m)
    total = tl.sum(w, 0)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / total
    return o, m + tl.math.log2(total)
''',
    }
