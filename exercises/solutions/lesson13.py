"""Solution (and known-wrong answers) of exercise 13.quantize: the per-block fp8 quantiser. Each
wrong answer is a mistake a student makes, written as one; its comment says what is wrong. Every
one must get "not yet" from the check, on a CPU (Triton's interpreter) and on a GPU.
"""

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

SOLUTIONS = {"13.quantize": _QUANTIZE}
WRONG = {"13.quantize": {
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
}}

EQUIVALENT = {"13.quantize": {
    "bound: line 27: y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))  ->  "
    "y = tl.where(y <= 0, -e4m3_grid(-y), e4m3_grid(y))":
        "y = 0 then stores -0 instead of 0 (the same value: x8 · scale is 0 either way), and "
        "the line runs only in the interpreter (INTERPRETED), where it stands in for the GPU's "
        "cast",
}}
