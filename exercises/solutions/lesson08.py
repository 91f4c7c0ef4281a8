"""Solutions (and known-wrong answers) of lesson 08's exercises."""

_HEAD = '''
import triton
import triton.language as tl

'''

_ONLINE = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.maximum(m, tl.max(x, 0))
    safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all -inf so far: no NaN
    l_new = l * tl.exp(m - safe) + tl.sum(tl.exp(x - safe), 0)
    return m_new, l_new
'''

_ONLINE_NO_RESCALE = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.maximum(m, tl.max(x, 0))
    safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    l_new = l + tl.sum(tl.exp(x - safe), 0)  # forgets that the old terms shrink
    return m_new, l_new
'''

_ONLINE_NAN = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.maximum(m, tl.max(x, 0))
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)  # -inf - -inf on a masked block
    return m_new, l_new
'''

_ONLINE_NO_MAX = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.maximum(m, 0.0) * 0.0  # never the maximum: exp overflows for large scores
    l_new = l + tl.sum(tl.exp(x), 0)
    return m_new, l_new
'''

_ATTEND = _HEAD + '''
@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if IEEE:
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i
'''

_ATTEND_NO_ALPHA = _ATTEND.replace("acc * alpha[:, None]", "acc")
_ATTEND_EXP = _ATTEND.replace("tl.math.exp2(", "tl.exp(")
_ATTEND_NO_MASK = _ATTEND.replace('        s = tl.where(key_ok, s, float("-inf"))',
                                  "        s = s + 0.0  # the mask is ignored")

_RANGE = _HEAD + '''
@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    whole_blocks = (seq_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        full_end = tl.minimum(q_start, whole_blocks)
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = whole_blocks
        end = seq_k
    return full_end, end
'''

_RANGE_NO_SKIP = _RANGE.replace("        end = tl.minimum(q_start + BLOCK_M, seq_k)",
                                "        end = seq_k  # visits every block, masked")
_RANGE_ALL_MASKED = _RANGE.replace("        full_end = tl.minimum(q_start, whole_blocks)",
                                   "        full_end = q_start * 0  # masks every block")
_RANGE_NO_DIAGONAL = _RANGE.replace("        end = tl.minimum(q_start + BLOCK_M, seq_k)",
                                    "        end = tl.minimum(q_start, seq_k)  # stops short")

SOLUTIONS = {"08.online_step": _ONLINE, "08.attend_block": _ATTEND, "08.key_range": _RANGE}
WRONG = {
    "08.online_step": {"the old sum is not rescaled": _ONLINE_NO_RESCALE,
                       "NaN on a block of -inf": _ONLINE_NAN,
                       "no maximum subtracted": _ONLINE_NO_MAX},
    "08.attend_block": {"acc not rescaled by alpha": _ATTEND_NO_ALPHA,
                        "exp where the scale is in log2 units": _ATTEND_EXP,
                        "the mask ignored": _ATTEND_NO_MASK},
    "08.key_range": {"no causal skipping": _RANGE_NO_SKIP,
                     "every block masked": _RANGE_ALL_MASKED,
                     "the diagonal block skipped": _RANGE_NO_DIAGONAL},
}
