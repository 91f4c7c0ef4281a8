"""Wrong answers to exercise attention.key_range, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention.key_range"
BLIND: dict[str, str] = {
        "causal full_end = q_start, not capped at the whole key blocks (ragged block unmasked when Sk < q_start)": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    if CAUSAL:
        full_end = tl.minimum(q_start, seq_k)  # every query sees every key before q_start
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = (seq_k // BLOCK_N) * BLOCK_N
        end = seq_k
    return full_end, end
''',
        "causal end not capped at seq_k (masked blocks past the keys)": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    whole = (seq_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        full_end = tl.minimum(q_start, whole)
        end = q_start + BLOCK_M  # the masked loop drops the keys past seq_k anyway
    else:
        full_end = whole
        end = seq_k
    return full_end, end
''',
        "non-causal full_end = seq_k: the ragged last block runs unmasked": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    if CAUSAL:
        full_end = tl.minimum(q_start, (seq_k // BLOCK_N) * BLOCK_N)
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = seq_k  # no mask at all without causality
        end = seq_k
    return full_end, end
''',
        "diagonal taken as the last BLOCK_N keys of the program (wrong when BLOCK_M > BLOCK_N)": r'''
# ✏️ Exercise attention.key_range: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)."""
    whole = (seq_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        # only the key block on the diagonal crosses it
        full_end = tl.minimum(q_start + BLOCK_M - BLOCK_N, whole)
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = whole
        end = seq_k
    return full_end, end
''',
    }
