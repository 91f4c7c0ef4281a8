"""Solutions (and known-wrong answers) of lesson 09's exercises.

Each wrong answer is a mistake a student makes, written as one; its comment says what is wrong.
Every one must get "not yet" from its check, on a CPU (Triton's interpreter) and on a GPU.
"""

_HEAD = '''
import triton
import triton.language as tl

'''

# --------------------------------------------------------------------------------------------
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

_ONLINE_BLOCK_MAX = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.max(x, 0)  # the block's maximum, not the running one: -inf on a masked block
    safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    l_new = l * tl.exp(m - safe) + tl.sum(tl.exp(x - safe), 0)
    return m_new, l_new
'''

_ONLINE_MERGE = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_blk = tl.max(x, 0)
    m_new = tl.maximum(m, m_blk)
    safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    # the block's own sum, relative to its own maximum, guarded only while nothing was seen:
    # NaN (-inf - -inf) on an all -inf block after real values
    l_blk = tl.sum(tl.exp(x - tl.where(m_new == float("-inf"), 0.0, m_blk)), 0)
    l_new = l * tl.exp(m - safe) + l_blk * tl.exp(m_blk - safe)
    return m_new, l_new
'''

_ONLINE_CLAMPED = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.maximum(m, tl.max(x, 0))
    m_new = tl.where(m_new == float("-inf"), 0.0, m_new)  # the guard kept in the returned m
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
'''

_ONLINE_AT_LEAST_0 = _HEAD + '''
@triton.jit
def online_step(m, l, x):
    m_new = tl.maximum(tl.maximum(m, tl.max(x, 0)), 0.0)  # never -inf: a guard by clamping
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
    return m_new, l_new
'''

# --------------------------------------------------------------------------------------------
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


def _attend(old: str, new: str) -> str:
    assert old in _ATTEND, old
    return _ATTEND.replace(old, new)


_ATTEND_NO_ALPHA = _ATTEND.replace("acc * alpha[:, None]", "acc")
_ATTEND_EXP = _ATTEND.replace("tl.math.exp2(", "tl.exp(")
_ATTEND_NO_MASK = _attend('        s = tl.where(key_ok, s, float("-inf"))',
                          "        s = s + 0.0  # the mask is ignored")
_ATTEND_MASK_P = _attend(
    '''    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
''', '''    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # over scores a query may not see
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    if MASKED:
        p = tl.where(key_ok, p, 0.0)  # masks the weights, after the maximum: they underflow
''')
_ATTEND_BLOCK_MAX = _attend(
    "m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)",
    "m_new = tl.max(s, 1) * qk_scale  # the block's maximum: -inf on a block a query cannot see")
_ATTEND_RAW_MAX = _attend(
    '''    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
''', '''    m_new = tl.maximum(m_i, tl.max(s, 1))  # the max of raw scores: the saved lse is wrong
    p = tl.math.exp2((s - m_new[:, None]) * qk_scale)
    alpha = tl.math.exp2((m_i - m_new) * qk_scale)
''')
_ATTEND_INPUT_DTYPE = _attend(
    "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])",
    "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None]).to(v.dtype)  # acc in 16 bits")
_ATTEND_TF32 = _attend('''    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
''', "    s = tl.dot(q, tl.trans(k))  # IEEE ignored: float32 scores from tf32 products\n")
_ATTEND_NO_ROUNDING = _attend(
    "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])",
    "acc = tl.dot(p, v, acc * alpha[:, None])  # p stays float32 beside 16-bit v")

# --------------------------------------------------------------------------------------------
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


def _range(old: str, new: str) -> str:
    assert old in _RANGE, old
    return _RANGE.replace(old, new)


_RANGE_NO_SKIP = _range("        end = tl.minimum(q_start + BLOCK_M, seq_k)",
                        "        end = seq_k  # visits every block, masked")
_RANGE_ALL_MASKED = _range("        full_end = tl.minimum(q_start, whole_blocks)",
                           "        full_end = q_start * 0  # masks every block")
_RANGE_NO_DIAGONAL = _range("        end = tl.minimum(q_start + BLOCK_M, seq_k)",
                            "        end = tl.minimum(q_start, seq_k)  # stops short")
_RANGE_PAST_KEYS = _range("        full_end = tl.minimum(q_start, whole_blocks)",
                          "        full_end = q_start  # past seq_k when Sq > Sk: unmasked reads")
_RANGE_RAGGED = _range("    whole_blocks = (seq_k // BLOCK_N) * BLOCK_N",
                       "    whole_blocks = seq_k  # the ragged last block runs without a mask")
_RANGE_ONE_BLOCK = _range("        end = tl.minimum(q_start + BLOCK_M, seq_k)",
                          "        end = tl.minimum(q_start + BLOCK_N, seq_k)  # one key block of "
                          "the diagonal, where BLOCK_M > BLOCK_N needs more")
_RANGE_UNCAPPED = _range("        end = tl.minimum(q_start + BLOCK_M, seq_k)",
                         "        end = q_start + BLOCK_M  # runs blocks past seq_k when Sq > Sk")

# --------------------------------------------------------------------------------------------
_WINDOW = _HEAD + '''
@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    first = tl.maximum(q_start - window + 1, 0)  # the first key the first query sees
    start = (first // BLOCK_N) * BLOCK_N
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)  # the first key the last query sees
    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N
    return start, full_start
'''


def _window(old: str, new: str) -> str:
    assert old in _WINDOW, old
    return _WINDOW.replace(old, new)


_WINDOW_EDGE = _window("    first = tl.maximum(q_start - window + 1, 0)",
                       "    first = tl.maximum(q_start - window, 0)  # one key too many: "
                       "i - window is outside")
_WINDOW_FULL_EDGE = _window("    last_first = tl.maximum(q_start + BLOCK_M - window, 0)",
                            "    last_first = tl.maximum(q_start + BLOCK_M - window - 1, 0)  # "
                            "the last query's edge taken one key early")
_WINDOW_NOT_ROUNDED = _window("    start = (first // BLOCK_N) * BLOCK_N",
                              "    start = first  # a block starting mid-way: not on the grid")
_WINDOW_FULL_LATE = _window("    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N",
                            "    full_start = (tl.cdiv(last_first, BLOCK_N) + 1) * BLOCK_N  # one "
                            "block masked for nothing")
_WINDOW_FULL_FLOOR = _window("    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N",
                             "    full_start = (last_first // BLOCK_N) * BLOCK_N  # rounded down: "
                             "an unmasked block the edge cuts")
_WINDOW_SKIPS = _window("    start = (first // BLOCK_N) * BLOCK_N",
                        "    start = tl.cdiv(first, BLOCK_N) * BLOCK_N  # rounded up: skips the "
                        "block holding the first visible keys")
_WINDOW_NO_CLAMP = _window("    first = tl.maximum(q_start - window + 1, 0)",
                           "    first = q_start - window + 1  # negative for the first queries")

# --------------------------------------------------------------------------------------------
_BACKWARD = _HEAD + '''from kernels.attention.triton_bwd import dot


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if MASKED:
        pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv
'''


def _backward(old: str, new: str) -> str:
    assert old in _BACKWARD, old
    return _BACKWARD.replace(old, new)


_BWD_NO_DELTA = _backward("dst = pt * (dpt - delta[None, :])",
                          "dst = pt * dpt  # Δ missing: the softmax's Jacobian has two terms")
_BWD_NO_P = _backward("dst = pt * (dpt - delta[None, :])",
                      "dst = dpt - delta[None, :]  # dS not multiplied by P")
_BWD_NO_MASK = _backward('''    if MASKED:
        pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
''', "    # no causal mask: keys after a query get weight on the diagonal\n")
_BWD_ROW_MAX = _backward(
    "pt = tl.math.exp2(st * qk_scale - lse[None, :])",
    "pt = tl.math.exp2(st * qk_scale - tl.max(st * qk_scale, 0)[None, :])  # the block's max, "
    "not the saved lse: unnormalised")
_BWD_EXP = _backward("pt = tl.math.exp2(st * qk_scale - lse[None, :])",
                     "pt = tl.exp(st * qk_scale - lse[None, :])  # e^x where lse is in log2 units")
_BWD_NO_SCALE = _backward("pt = tl.math.exp2(st * qk_scale - lse[None, :])",
                          "pt = tl.math.exp2(st - lse[None, :])  # the scale dropped from the "
                          "scores")
_BWD_QUOTIENT = _backward("pt = tl.math.exp2(st * qk_scale - lse[None, :])",
                          "pt = tl.math.exp2(st * qk_scale) / tl.math.exp2(lse)[None, :]  # the "
                          "same quotient, but 2^s overflows for large scores")
_BWD_INPUT_DTYPE = _backward("dv += dot(pt.to(do.dtype), do, IEEE)",
                             "dv = (dv + dot(pt.to(do.dtype), do, IEEE)).to(do.dtype)  # dv in "
                             "16 bits")
_BWD_TF32 = _backward("st = dot(k, tl.trans(q), IEEE)",
                      "st = tl.dot(k, tl.trans(q))  # tf32 products for float32 inputs")
_BWD_TRANSPOSED = _backward("dv += dot(pt.to(do.dtype), do, IEEE)",
                            "dv += dot(tl.trans(pt).to(do.dtype), do, IEEE)  # pt is already Pᵀ")
_BWD_DELTA_ROWS = _backward("dst = pt * (dpt - delta[None, :])",
                            "dst = pt * (dpt - delta[:, None])  # Δ along the keys, not the "
                            "queries")
_BWD_DP = _backward("dpt = dot(v, tl.trans(do), IEEE)",
                    "dpt = dot(do, tl.trans(v), IEEE)  # dP (queries along rows), not dPᵀ")

SOLUTIONS = {"attention.online_step": _ONLINE, "attention.attend_block": _ATTEND,
             "attention.key_range": _RANGE, "attention.backward_dkdv": _BACKWARD,
             "attention_variants.window_range": _WINDOW}
WRONG = {
    "attention.online_step": {"the old sum is not rescaled": _ONLINE_NO_RESCALE,
                       "NaN on a block of -inf": _ONLINE_NAN,
                       "no maximum subtracted": _ONLINE_NO_MAX,
                       "the block's maximum as the running one": _ONLINE_BLOCK_MAX,
                       "NaN on a block of -inf after real values": _ONLINE_MERGE,
                       "the -inf guard returned as the maximum (0)": _ONLINE_CLAMPED,
                       "the maximum clamped at 0": _ONLINE_AT_LEAST_0},
    "attention.attend_block": {"acc not rescaled by alpha": _ATTEND_NO_ALPHA,
                        "exp where the scale is in log2 units": _ATTEND_EXP,
                        "the mask ignored": _ATTEND_NO_MASK,
                        "the weights masked after the maximum": _ATTEND_MASK_P,
                        "the block's maximum as the running one": _ATTEND_BLOCK_MAX,
                        "the running maximum in raw score units": _ATTEND_RAW_MAX,
                        "p not rounded to v's dtype": _ATTEND_NO_ROUNDING,
                        "acc kept in the input dtype": _ATTEND_INPUT_DTYPE,
                        "tf32 scores for float32 inputs": _ATTEND_TF32},
    "attention.key_range": {"no causal skipping": _RANGE_NO_SKIP,
                     "every block masked": _RANGE_ALL_MASKED,
                     "the diagonal block skipped": _RANGE_NO_DIAGONAL,
                     "unmasked blocks past seq_k": _RANGE_PAST_KEYS,
                     "the ragged block unmasked": _RANGE_RAGGED,
                     "one key block of the diagonal": _RANGE_ONE_BLOCK,
                     "end not capped at seq_k": _RANGE_UNCAPPED},
    "attention.backward_dkdv": {"Δ missing": _BWD_NO_DELTA,
                         "dS not multiplied by P": _BWD_NO_P,
                         "the causal mask dropped": _BWD_NO_MASK,
                         "P from the block's maximum, not the saved lse": _BWD_ROW_MAX,
                         "exp where lse is in log2 units": _BWD_EXP,
                         "the scale dropped from P": _BWD_NO_SCALE,
                         "P as a quotient of powers": _BWD_QUOTIENT,
                         "dV accumulated in the input dtype": _BWD_INPUT_DTYPE,
                         "tf32 scores for float32 inputs": _BWD_TF32,
                         "Pᵀ transposed again": _BWD_TRANSPOSED,
                         "Δ broadcast along the keys": _BWD_DELTA_ROWS,
                         "dP where dPᵀ is needed": _BWD_DP},
    "attention_variants.window_range": {"the window's edge one key off": _WINDOW_EDGE,
                        "the last query's edge one key off": _WINDOW_FULL_EDGE,
                        "start not rounded down to a block": _WINDOW_NOT_ROUNDED,
                        "full_start one block late": _WINDOW_FULL_LATE,
                        "full_start rounded down": _WINDOW_FULL_FLOOR,
                        "the block holding the first visible keys skipped": _WINDOW_SKIPS,
                        "a negative start not clamped to 0": _WINDOW_NO_CLAMP},
}

# mutants that behave exactly like the solution, and why
EQUIVALENT = {"attention_variants.window_range": {
    "constant: line 8: first = tl.maximum(q_start - window + 1, 0)  ->  first = "
    "tl.maximum(q_start - window + 1, 1)":
        "first only feeds start = (first // BLOCK_N) * BLOCK_N, and BLOCK_N >= 16 (tl.dot's "
        "smallest tile): a first key of 0 or 1 gives the same start, 0"}}
