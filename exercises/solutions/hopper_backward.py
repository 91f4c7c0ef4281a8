"""Solutions (and known-wrong answers) of lesson 19's exercises: hopper_backward.quantize, the
per-block fp8 quantiser, and hopper_backward.dq_add, version 2's dQ epilogue (the lines between
attention_bwd_fused.cu's ``// ==== dq add`` markers). Each wrong answer is a mistake a student
makes, written as one; its comment says what is wrong. Every one must get "not yet" from the check,
on a CPU (Triton's interpreter; NVRTC and the SASS) and on a GPU.
"""

from exercises import hopper_backward as quantize_check  # the words its hints use

_HEAD = '''
import triton
import triton.language as tl

from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = (bh // n_heads).to(tl.int64), (bh % n_heads).to(tl.int64)
    rows = block * SCALE_BLOCK + tl.arange(0, SCALE_BLOCK)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows < seq)[:, None] & (dims < head_dim)[None, :]
'''

_QUANTIZE = _HEAD + '''\
    x = tl.load(x_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd, mask=ok,
                other=0.0).to(tl.float32)
    # IEEE division, the reference's bits (a plain "/" passes too: the check allows its last bit)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.maximum(tl.math.div_rn(amax, E4M3_MAX), SCALE_FLOOR)
    tl.store(scale_ptr + bh.to(tl.int64) * n_blocks + block, scale)
    y = tl.clamp(tl.math.div_rn(x, scale), -E4M3_MAX, E4M3_MAX)
    if INTERPRETED:
        y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))
    tl.store(x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d,
             y.to(x8_ptr.dtype.element_ty), mask=ok)
'''


def _quantize(old: str, new: str) -> str:
    assert old in _QUANTIZE, old
    return _QUANTIZE.replace(old, new)


_AMAX = "    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)\n"
_DIVIDE = "    y = tl.clamp(tl.math.div_rn(x, scale), -E4M3_MAX, E4M3_MAX)\n"
_STORE_SCALE = '''    scale = tl.maximum(tl.math.div_rn(amax, E4M3_MAX), SCALE_FLOOR)
    tl.store(scale_ptr + bh.to(tl.int64) * n_blocks + block, scale)
'''

# one scale for the whole (batch, head): every block of the sequence read to find the largest |x|
_WHOLE = _quantize(_AMAX, '''    amax = 0.0
    for start in range(0, seq, SCALE_BLOCK):  # the whole head's largest |x|
        r = start + tl.arange(0, SCALE_BLOCK)
        m = (r < seq)[:, None] & (dims < head_dim)[None, :]
        whole = tl.load(x_ptr + b * sxb + h * sxh + r[:, None] * sxs + dims[None, :] * sxd,
                        mask=m, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.max(tl.abs(whole), axis=1), axis=0))
''')
# a scale per head-dim column: the values divided by their column's, the block's largest stored
_PER_COLUMN = _quantize(_STORE_SCALE + _DIVIDE, '''\
    columns = tl.maximum(tl.math.div_rn(tl.max(tl.abs(x), axis=0), E4M3_MAX), SCALE_FLOOR)
    tl.store(scale_ptr + bh.to(tl.int64) * n_blocks + block, tl.max(columns, axis=0))
    y = tl.clamp(x / columns[None, :], -E4M3_MAX, E4M3_MAX)
''')
# the padding loads 1.0 (the rows past seq and the columns past head_dim), and counts in the max
_PADDING_ONE = _quantize("other=0.0)", "other=1.0)")
# no floor: an all-zero block has scale 0, and 0 / 0 is NaN
_NO_FLOOR = _quantize("tl.maximum(tl.math.div_rn(amax, E4M3_MAX), SCALE_FLOOR)",
                      "tl.math.div_rn(amax, E4M3_MAX)")
# e4m3fnuz's largest value (AMD's fp8), not e4m3's 448
_MAX_240 = _quantize("tl.math.div_rn(amax, E4M3_MAX)", "tl.math.div_rn(amax, 240.0)")
# int8's largest value
_MAX_127 = _quantize("tl.math.div_rn(amax, E4M3_MAX)", "amax / 127.0")
# the scale taken per row (before the max over the whole block): each row divided by its own
_PER_ROW = _quantize(_STORE_SCALE + _DIVIDE, '''\
    rows_scale = tl.maximum(tl.math.div_rn(tl.max(tl.abs(x), axis=1), E4M3_MAX), SCALE_FLOOR)
    tl.store(scale_ptr + bh.to(tl.int64) * n_blocks + block, tl.max(rows_scale, axis=0))
    y = tl.clamp(x / rows_scale[:, None], -E4M3_MAX, E4M3_MAX)
''')
# x8 addressed with x's strides: right while both are contiguous, wrong for keys-contiguous V
_X_STRIDES = _quantize("x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d",
                       "x8_ptr + b * sxb + h * sxh + rows[:, None] * sxs + dims[None, :] * sxd")
# x8 assumed contiguous (B, H, S, D)
_X8_CONTIGUOUS = _quantize(
    "x8_ptr + b * s8b + h * s8h + rows[:, None] * s8s + dims[None, :] * s8d",
    "x8_ptr + (bh.to(tl.int64) * seq + rows[:, None]) * head_dim + dims[None, :]")
# multiplied by the scale instead of divided
_MULTIPLY = _quantize(_DIVIDE, "    y = tl.clamp(x * scale, -E4M3_MAX, E4M3_MAX)\n")
# the floor only where the block is all zero: a block of values ~1e-30 gets amax / 448 ~ 2e-33,
# a scale below SCALE_FLOOR (the reference's, and what keeps 1 / scale finite)
_FLOOR_AT_ZERO = _quantize("tl.maximum(tl.math.div_rn(amax, E4M3_MAX), SCALE_FLOOR)",
                           "tl.where(amax == 0, SCALE_FLOOR, tl.math.div_rn(amax, E4M3_MAX))")
# the batch and head offsets in int32 (tl.program_id's type): b · sxb wraps around past 2^31
# elements, a (B, H, S, D) tensor of 16 × 32 × 32768 × 128
_INT32 = _quantize("b, h = (bh // n_heads).to(tl.int64), (bh % n_heads).to(tl.int64)",
                   "b, h = bh // n_heads, bh % n_heads")
# only the batch offset in int64: h · sxh wraps around where one batch passes 2^31 elements
_INT32_HEAD = _quantize("b, h = (bh // n_heads).to(tl.int64), (bh % n_heads).to(tl.int64)",
                        "b, h = (bh // n_heads).to(tl.int64), bh % n_heads")

# hopper_backward.dq_add: the lines attention_bwd_fused.cu holds between its markers
_DQ_ADD = '''
DQ_ADD = r"""
// dq_acc[4j + 2h + e]: query m0 + 16 (t / 32) + lane / 4 + 8h, column
// dq_col0 + 8j + 2 (lane % 4) + e; rows past Sq left out
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    if (q_row + 8 * h < sq) {
        float* out = dq_sum + (i64(bh) * sq + q_row + 8 * h) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale,
                     dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
'''


def _dq_add(old: str, new: str) -> str:
    assert old in _DQ_ADD, old
    return _DQ_ADD.replace(old, new)


_RED = """red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale,
                     dq_acc[4 * j + 2 * h + 1] * scale);"""
_OUT = "float* out = dq_sum + (i64(bh) * sq + q_row + 8 * h) * D + dq_col0 + 2 * (lane % 4);"
_GUARD = "if (q_row + 8 * h < sq) {"

SOLUTIONS = {"hopper_backward.quantize": _QUANTIZE, "hopper_backward.dq_add": _DQ_ADD}
WRONG = {"hopper_backward.dq_add": {
    # a plain store of the pair: each key block overwrites what the others added
    "a plain store": _dq_add(_RED, """*reinterpret_cast<float2*>(out + 8 * j) = make_float2(
                dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale);"""),
    # += : a load and a store, which another block's += can fall between
    "+= instead of an atomic": _dq_add(_RED, """out[8 * j] += dq_acc[4 * j + 2 * h] * scale;
            out[8 * j + 1] += dq_acc[4 * j + 2 * h + 1] * scale;"""),
    # right values, twice the atomics: one float per reduction
    "atomicAdd one float at a time": _dq_add(_RED, """atomicAdd(out + 8 * j,
                      dq_acc[4 * j + 2 * h] * scale);
            atomicAdd(out + 8 * j + 1, dq_acc[4 * j + 2 * h + 1] * scale);"""),
    # dS K without the 1/sqrt(D) of the scores
    "no scale": _dq_add(_RED, """red_add2(out + 8 * j, dq_acc[4 * j + 2 * h],
                     dq_acc[4 * j + 2 * h + 1]);"""),
    # the fragment's h and j exchanged in the index
    "h and j exchanged in the index": _dq_add(_RED, _RED.replace("4 * j + 2 * h", "4 * h + 2 * j")),
    # the two columns of a pair exchanged
    "e exchanged": _dq_add(_RED, """red_add2(out + 8 * j, dq_acc[4 * j + 2 * h + 1] * scale,
                     dq_acc[4 * j + 2 * h] * scale);"""),
    # rows counted within the head only: every head adds into head 0
    "the head left out of the row": _dq_add(_OUT, _OUT.replace("(i64(bh) * sq + q_row",
                                                                "(i64(q_row)")),
    # a row of 64 floats whatever D is
    "a row of 64 floats": _dq_add(_OUT, _OUT.replace(") * D +", ") * 64 +")),
    # a head of D rows, not Sq: the head's stride taken from the row's
    "the head stride D, not Sq": _dq_add(_OUT, _OUT.replace("i64(bh) * sq", "i64(bh) * D")),
    # no guard: the rows past Sq get the tile's zero rows (+0.0), past the buffer's end for the
    # last head
    "no guard": _dq_add(_GUARD, "{"),
    # the guard tests the first of the thread's two rows for both
    "the guard on q_row alone": _dq_add(_GUARD, "if (q_row < sq) {"),
    # one row too many
    "the guard lets row Sq through": _dq_add(_GUARD, "if (q_row + 8 * h <= sq) {"),
    # dq_col0 forgotten: at D = 128 both warpgroups add into columns 0-63
    "dq_col0 left out": _dq_add(_OUT, _OUT.replace(" + dq_col0", "")),
    # consumer * 64 for dq_col0: right at D = 128, past the row at D = 64
    "consumer * 64 for dq_col0": _dq_add(_OUT, _OUT.replace("dq_col0", "consumer * 64")),
    # the pair's columns 4 apart for lane % 4 (an odd column: a misaligned reduction)
    "lane % 4 for its column pair": _dq_add(_OUT, _OUT.replace("2 * (lane % 4)", "(lane % 4)")),
    "plain PyTorch": '''
import torch

def DQ_ADD(dq_sum, dq_acc, scale):
    dq_sum += dq_acc * scale
''',
},
    "hopper_backward.quantize": {
    "one scale for the whole head": _WHOLE,
    "a scale per head-dim column": _PER_COLUMN,
    "the padding loaded as 1.0": _PADDING_ONE,
    "no floor (an all-zero block divides by 0)": _NO_FLOOR,
    "240 (e4m3fnuz's largest) for 448": _MAX_240,
    "127 (int8's largest) for 448": _MAX_127,
    "a scale per row, not per block": _PER_ROW,
    "x8 stored with x's strides": _X_STRIDES,
    "x8 assumed contiguous": _X8_CONTIGUOUS,
    "x times the scale": _MULTIPLY,
    "the floor only for an all-zero block": _FLOOR_AT_ZERO,
    "int32 batch and head offsets": _INT32,
    "the head offset in int32": _INT32_HEAD,
}}

EQUIVALENT = {"hopper_backward.quantize": {
    "bound: line 27: y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))  ->  "
    "y = tl.where(y <= 0, -e4m3_grid(-y), e4m3_grid(y))":
        "y = 0 then stores -0 instead of 0 (the same value: x8 · scale is 0 either way), and "
        "the line runs only in the interpreter (INTERPRETED), where it stands in for the GPU's "
        "cast",
}}


# What each wrong answer's "not yet" must say (tests/test_exercises.py holds every verdict to
# it): the mistake named, not only a wrong value
SAYS = {
    "hopper_backward.dq_add": {
        "a plain store": "more plain stores (STG)",
        "+= instead of an atomic": "more plain stores (STG)",
        "atomicAdd one float at a time": "one float per atomic",
        "no scale": "not scaled",
        "h and j exchanged in the index":
            "was added at dq_sum[2][64][72], not at dq_sum[2][72][64]",
        "e exchanged": "a call adds one thread's pair",
        "the head left out of the row": "not at dq_sum[2][64][64]",
        "a row of 64 floats": "not at dq_sum[2][64][64]",
        "the head stride D, not Sq": "not at dq_sum[2][64][64]",
        "no guard": "past Sq = 100",
        "the guard on q_row alone": "past Sq = 100",
        "the guard lets row Sq through": "belongs to query row 100, past Sq = 100",
        "dq_col0 left out": "added at dq_sum[2][64][0], not at dq_sum[2][64][64]",
        "consumer * 64 for dq_col0": "not at dq_sum[1][64][0]",
        "lane % 4 for its column pair": "an odd column",
        "plain PyTorch": "expected CUDA source code",
    },
    "hopper_backward.quantize": {
        "one scale for the whole head": quantize_check.WHOLE,
        "a scale per head-dim column": quantize_check.PER_COLUMN,
        "the padding loaded as 1.0": quantize_check.PADDING,
        "no floor (an all-zero block divides by 0)": quantize_check.FLOOR,
        "240 (e4m3fnuz's largest) for 448": quantize_check.FORMAT_MAX,
        "127 (int8's largest) for 448": quantize_check.FORMAT_MAX,
        "a scale per row, not per block": quantize_check.PER_ROW,
        "x8 stored with x's strides": quantize_check.STRIDES,
        "x8 assumed contiguous": quantize_check.STRIDES,
        "x times the scale": quantize_check.DIVIDE,
        "the floor only for an all-zero block": quantize_check.FLOOR,
        "int32 batch and head offsets": quantize_check.INT64,
        "the head offset in int32": quantize_check.INT64,
    },
}
