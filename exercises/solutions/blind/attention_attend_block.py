"""Wrong answers to exercise attention.attend_block, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention.attend_block"
BLIND: dict[str, str] = {
        "mask applied to p after the max: masked scores still set m_new": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    if MASKED:
        p = tl.where(key_ok, p, 0.0)  # masked keys weigh nothing
    alpha = tl.math.exp2(m_i - m_new)
    l_new = l_i * alpha + tl.sum(p, 1)
    if IEEE:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_new
''',
        "weights taken relative to the block's own max (NaN on a fully masked block)": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_blk = tl.max(s, 1) * qk_scale
    m_new = tl.maximum(m_i, m_blk)
    p = tl.math.exp2(s * qk_scale - m_blk[:, None])  # the block's softmax numerators
    alpha = tl.math.exp2(m_i - m_new)  # old sums to the new max
    beta = tl.math.exp2(m_blk - m_new)  # this block's sums to the new max
    l_new = l_i * alpha + tl.sum(p, 1) * beta
    if IEEE:
        pv = tl.dot(p.to(v.dtype), v, input_precision="ieee")
    else:
        pv = tl.dot(p.to(v.dtype), v)
    acc = acc * alpha[:, None] + pv * beta[:, None]
    return acc, m_new, l_new
''',
        "IEEE flag ignored: fp32 scores computed in tf32": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_new = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_new
''',
        "running sum l not rescaled by alpha": r'''
# ✏️ Exercise attention.attend_block: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop. Return (acc, m_new, l_new)."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_new = l_i + tl.sum(p, 1)
    if IEEE:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_new
''',
    }
