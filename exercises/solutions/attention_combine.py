"""Solution (and known-wrong answers) of exercise attention_variants.combine_splits: the merge of
split-KV
decoding's partial results. Each wrong answer is a mistake a student makes, written as one; its
comment says what is wrong. Every one must get "not yet" from the check, on a CPU (Triton's
interpreter) and on a GPU.
"""

_COMBINE = '''
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    s = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, HEAD_DIM)
    lse = tl.load(part_lse_ptr + s * rows_total + row, mask=s < splits, other=float("-inf"))
    m = tl.max(lse, 0)
    m_sub = tl.where(m == float("-inf"), 0.0, m)  # every split empty: weights 0, not NaN
    w = tl.math.exp2(lse - m_sub)
    total = tl.sum(w, 0)
    total = tl.where(total == 0.0, 1.0, total)
    part = tl.load(part_o_ptr + (s[:, None] * rows_total + row) * HEAD_DIM + dims[None, :],
                   mask=(s < splits)[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, 0) / total
    return o, m + tl.math.log2(total)
'''


def _combine(old: str, new: str) -> str:
    assert old in _COMBINE, old
    return _COMBINE.replace(old, new)


_EXP = _combine("    w = tl.math.exp2(lse - m_sub)",
                "    w = tl.exp(lse - m_sub)  # natural exp of base-2 log-sum-exps")
_EXP_BOTH = _combine("    w = tl.math.exp2(lse - m_sub)",
                     "    w = tl.exp(lse - m_sub)  # natural exp and log: the lse are base 2"
                     ).replace("m + tl.math.log2(total)", "m + tl.log(total)")
_NO_MAX = _combine("    w = tl.math.exp2(lse - m_sub)",
                   "    w = tl.math.exp2(lse)  # no max subtracted: overflows past 128"
                   ).replace("m + tl.math.log2(total)", "tl.math.log2(total)")
_NO_MAX_BACK = _combine("    w = tl.math.exp2(lse - m_sub)",
                        "    w = tl.math.exp2(lse)  # no max subtracted, still added back")
_NO_GUARD = _combine("    m_sub = tl.where(m == float(\"-inf\"), 0.0, m)  # every split empty: "
                     "weights 0, not NaN", "    m_sub = m  # -inf - (-inf) = NaN when every "
                     "split is empty")
_TOTAL_UNGUARDED = _combine("    total = tl.where(total == 0.0, 1.0, total)\n",
                            "    # the total not guarded: 0 / 0 when every split is empty\n")
_NOT_NORMALISED = _combine("    o = tl.sum(w[:, None] * part, 0) / total",
                           "    o = tl.sum(w[:, None] * part, 0)  # not divided by the total")
_NO_M_BACK = _combine("    return o, m + tl.math.log2(total)",
                      "    return o, tl.math.log2(total)  # the max not added back")
_M_SUB_BACK = _combine("    return o, m + tl.math.log2(total)",
                       "    return o, m_sub + tl.math.log2(total)  # 0, not -inf, for no key")
_LANES_ZERO = _combine('mask=s < splits, other=float("-inf"))',
                       "mask=s < splits, other=0.0)  # an empty lane weighs 2^0")
_ONE_FEWER = _combine("mask=s < splits, other", "mask=s < splits - 1, other").replace(
    "mask=(s < splits)[:, None]", "mask=(s < splits - 1)[:, None]").replace(
    "    m = tl.max", "    # the last split dropped\n    m = tl.max")
_ONE_MORE = _combine("mask=s < splits, other", "mask=s <= splits, other").replace(
    "mask=(s < splits)[:, None]", "mask=(s <= splits)[:, None]").replace(
    "    m = tl.max", "    # one split past the last\n    m = tl.max")
_NO_LSE_MASK = _combine('mask=s < splits, other=float("-inf"))', ")  # every lane loaded")
_MEAN = _combine("    o = tl.sum(w[:, None] * part, 0) / total",
                 "    o = tl.sum(part, 0) / splits  # the splits averaged, not weighed")
_MAX_ONLY = _combine("    return o, m + tl.math.log2(total)",
                     "    return o, m  # the largest split's lse, not the merged one")

SOLUTIONS = {"attention_variants.combine_splits": _COMBINE}
WRONG = {"attention_variants.combine_splits": {
    "natural exp instead of exp2": _EXP,
    "natural exp and log instead of exp2 and log2": _EXP_BOTH,
    "no max subtracted (2^lse overflows)": _NO_MAX,
    "no max subtracted, still added back": _NO_MAX_BACK,
    "the max not guarded (NaN when every split is empty)": _NO_GUARD,
    "the total not guarded (NaN when every split is empty)": _TOTAL_UNGUARDED,
    "the weights not normalised (O not divided by the total)": _NOT_NORMALISED,
    "lse without the max added back": _NO_M_BACK,
    "lse with the guarded max added back (0, not -inf, for an empty row)": _M_SUB_BACK,
    "the lanes past the last split loaded with other=0.0": _LANES_ZERO,
    "the last split dropped (splits - 1)": _ONE_FEWER,
    "one split past the last (s <= splits)": _ONE_MORE,
    "every lane's lse loaded, no mask": _NO_LSE_MASK,
    "the splits averaged, not weighed": _MEAN,
    "the largest split's lse for the merged one": _MAX_ONLY,
}}

# mutants that behave exactly like the solution, and why
EQUIVALENT = {"attention_variants.combine_splits": {
    "mask dropped: line 18: mask=(s < splits)[:, None], other=0.0)  ->  mask=(s < splits)[:, "
    "None])":
        "the lanes past the last split weigh w = 2^-inf = 0, and a masked load without other "
        "gives them 0 (Triton's interpreter, and the compiled load zeroes its registers before "
        "the predicated load), so 0 · 0 adds nothing either way; other=0.0 says so"}}
