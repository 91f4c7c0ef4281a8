"""Wrong answers to exercise puzzles.attention, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.attention"
BLIND: dict[str, str] = {
        "padded keys not masked (their scores of 0 enter the softmax)": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None], other=0.0)
    k = tl.load(k_ptr + offsets, mask=ok[:, None], other=0.0)
    v = tl.load(v_ptr + offsets, mask=ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
        "no max subtracted before exp (scores of -200 underflow to 0/0)": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None], other=0.0)
    k = tl.load(k_ptr + offsets, mask=ok[:, None], other=0.0)
    v = tl.load(v_ptr + offsets, mask=ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    s = tl.where(ok[None, :], s, float("-inf"))
    p = tl.exp(s)
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
        "padded keys zeroed after exp, so their score of 0 still sets the max": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None], other=0.0)
    k = tl.load(k_ptr + offsets, mask=ok[:, None], other=0.0)
    v = tl.load(v_ptr + offsets, mask=ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    p = tl.where(ok[None, :], p, 0.0)  # padded keys weigh nothing
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
        "masked loads without other= (scores masked to -inf afterwards)": r'''
# ✏️ Exercise puzzles.attention: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, BS: tl.constexpr, D: tl.constexpr):
    """o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major)."""
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    ok = rows < S
    offsets = rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + offsets, mask=ok[:, None])
    k = tl.load(k_ptr + offsets, mask=ok[:, None])
    v = tl.load(v_ptr + offsets, mask=ok[:, None])
    s = tl.dot(q, tl.trans(k)) * (1.0 / tl.sqrt(tl.full([], D, tl.float32)))
    s = tl.where(ok[None, :], s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    o = tl.dot(p, v) / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + offsets, o, mask=ok[:, None])
''',
    }
