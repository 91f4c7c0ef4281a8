"""Solution (and known-wrong answers) of exercise attention_variants.varlen_locate: where a program
of the
packed (varlen) forward finds its data. Each wrong answer is a mistake a student makes, written
as one; its comment says what is wrong. Every one must get "not yet" from the check, on a CPU
(Triton's interpreter) and on a GPU.
"""

_LOCATE = '''
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    q_lo = tl.load(cu_q_ptr + b)
    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo
    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo
    seq_k = tl.where(q_start < seq_q, seq_k, 0)  # past the sequence's end: nothing to do
    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h // group
'''


def _locate(old: str, new: str) -> str:
    assert old in _LOCATE, old
    return _LOCATE.replace(old, new)


_QUERY_END = _locate("    seq_q = tl.load(cu_q_ptr + b + 1) - q_lo",
                     "    seq_q = tl.load(cu_q_ptr + b + 1)  # the cumulative end, not the "
                     "length")
_KEY_END = _locate("    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo",
                   "    seq_k = tl.load(cu_k_ptr + b + 1)  # the cumulative end, not the length")
_KEYS = '''    k_lo = tl.load(cu_k_ptr + b)
    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo'''
_QUERY_OFFSETS = _locate(_KEYS, '''    # the keys addressed with the queries' offsets
    k_lo = q_lo
    seq_k = seq_q''')
_ONE_MORE_KEY = _locate("    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo",
                        "    seq_k = tl.load(cu_k_ptr + b + 1) - k_lo + 1  # sees the next "
                        "sequence's first key")
_NEXT_SEQUENCE = _locate(_KEYS, '''    # one entry on: the next sequence's keys
    k_lo = tl.load(cu_k_ptr + b + 1)
    seq_k = tl.load(cu_k_ptr + b + 2) - k_lo''')
_NO_IDLE = _locate("    seq_k = tl.where(q_start < seq_q, seq_k, 0)  # past the sequence's end: "
                   "nothing to do\n", "")
_IDLE_AT_END = _locate("tl.where(q_start < seq_q, seq_k, 0)",
                       "tl.where(q_start <= seq_q, seq_k, 0)")
_IDLE_QUERIES = _locate("    seq_k = tl.where(q_start < seq_q, seq_k, 0)",
                        "    seq_q = tl.where(q_start < seq_q, seq_q, 0)  # the queries zeroed, "
                        "the keys still walked")
_HEAD_MOD = _locate("h // group\n", "h % group  # mixes the groups\n")
_HEAD_OWN = _locate("h // group\n", "h  # a K/V head per query head: past H_kv\n")
_INT32 = _locate("    return q_lo.to(tl.int64), seq_q, k_lo.to(tl.int64), seq_k, h // group",
                 "    # int32 offsets: they wrap past 2^31 once multiplied by a stride\n"
                 "    return q_lo, seq_q, k_lo, seq_k, h // group")

SOLUTIONS = {"attention_variants.varlen_locate": _LOCATE}
WRONG = {"attention_variants.varlen_locate": {
    "the query length as the cumulative end": _QUERY_END,
    "the key length as the cumulative end": _KEY_END,
    "the keys addressed with the queries' offsets": _QUERY_OFFSETS,
    "one key too many (the next sequence's first)": _ONE_MORE_KEY,
    "the next sequence's keys": _NEXT_SEQUENCE,
    "programs past the sequence's end walk its keys": _NO_IDLE,
    "a program starting at the sequence's end walks its keys": _IDLE_AT_END,
    "the queries zeroed past the end, not the keys": _IDLE_QUERIES,
    "h % group for the K/V head": _HEAD_MOD,
    "a K/V head per query head": _HEAD_OWN,
    "int32 offsets": _INT32,
}}
