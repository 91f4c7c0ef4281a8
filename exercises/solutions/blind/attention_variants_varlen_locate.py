"""Wrong answers to exercise attention_variants.varlen_locate, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention_variants.varlen_locate"
BLIND: dict[str, str] = {
        "kv_h = h % group instead of h // group": r'''
# ✏️ Exercise attention_variants.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h % group
''',
        "nothing-to-do test is q_start <= seq_q (a block starting at the end still runs)": r'''
# ✏️ Exercise attention_variants.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start <= seq_q, seq_k, 0)
    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h // group
''',
        "k_lo read from cu_q (right only when every sequence has as many keys as queries)": r'''
# ✏️ Exercise attention_variants.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - lo
    seq_k = tl.load(cu_k_ptr + b + 1) - tl.load(cu_k_ptr + b)
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    q_lo = lo.to(tl.int64)
    return q_lo, seq_q, q_lo, seq_k, h // group
''',
        "row offsets left in int32 (no .to(tl.int64))": r'''
# ✏️ Exercise attention_variants.varlen_locate: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Return (q_lo, seq_q, k_lo, seq_k, kv_h) for the program (b, h, q_start)."""
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start < seq_q, seq_k, 0)
    return q_lo, seq_q, k_lo, seq_k, h // group
''',
    }
