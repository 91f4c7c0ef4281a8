"""Solutions (and known-wrong answers) of lesson 17's exercises (until lesson 16 was split
in two: hopper_matmul.stages, .waves and .promote)."""

SOLUTIONS = {
    "hopper_measured.stages": '''
import torch

def pipeline_depth(bm, bn, dtype):
    smem_bytes = 227 * 1024
    reserved = 1024
    barrier_bytes = 2 * 8
    sm_flop_per_ns = {2: 989.4e3 / 132, 1: 1978.9e3 / 132}[dtype.itemsize]
    stages = (smem_bytes - reserved) // ((bm + bn) * 128 + barrier_bytes)
    k_elements = 128 // dtype.itemsize
    hidden_ns = (stages - 1) * 2 * bm * bn * k_elements / sm_flop_per_ns
    return stages, hidden_ns
''',
    "hopper_measured.waves": '''
import math

CANDIDATES = [(128, 256, 1.0), (128, 128, 0.89), (64, 256, 0.89), (64, 128, 0.66)]


def choose_tile(m, n, sms):
    def estimate(candidate):
        rows, columns, rate = candidate
        tiles = math.ceil(m / rows) * math.ceil(n / columns)
        return math.ceil(tiles / sms) * rows * columns / rate

    rows, columns, _ = min(CANDIDATES, key=estimate)
    return rows, columns
''',
}

WRONG = {
    # waves taken as a fraction (tiles / sms): the estimate becomes area / rate, the same for
    # every tile count, so the largest tile always wins, even with 100 of 132 SMs idle
    "hopper_measured.waves": '''
CANDIDATES = [(128, 256, 1.0), (128, 128, 0.89), (64, 256, 0.89), (64, 128, 0.66)]


def choose_tile(m, n, sms):
    def estimate(candidate):
        rows, columns, rate = candidate
        return (m / rows) * (n / columns) / sms * rows * columns / rate

    rows, columns, _ = min(CANDIDATES, key=estimate)
    return rows, columns
''',
    # a K tile taken as 64 elements whatever the type: fp8 tiles come out 64 bytes wide
    "hopper_measured.stages": '''
import torch

def pipeline_depth(bm, bn, dtype):
    smem_bytes = 227 * 1024
    reserved = 1024
    barrier_bytes = 2 * 8
    sm_flop_per_ns = {2: 989.4e3 / 132, 1: 1978.9e3 / 132}[dtype.itemsize]
    k_bytes = 64 * dtype.itemsize
    stages = (smem_bytes - reserved) // ((bm + bn) * k_bytes + barrier_bytes)
    hidden_ns = (stages - 1) * 2 * bm * bn * 64 / sm_flop_per_ns
    return stages, hidden_ns
''',
}

# -- a kernel the student writes ---------------------------------------------------------------

SOLUTIONS["hopper_measured.promote"] = '''
PROMOTE = r"""
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;  // two products, not 64
    for (int j = 0; j < 16; ++j) {
        d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;
        d[64 * h + 4 * j + 1] += part[4 * j + 1] * lo;
        d[64 * h + 4 * j + 2] += part[4 * j + 2] * hi;
        d[64 * h + 4 * j + 3] += part[4 * j + 3] * hi;
    }
}
"""
'''


def _promote(old: str, new: str) -> str:
    source = SOLUTIONS["hopper_measured.promote"]
    assert old in source, old
    return source.replace(old, new)


WRONG["hopper_measured.promote"] = {
    # the product overwrites the running sum: only the last K tile's product survives
    "overwrites d": _promote("+= part[4 * j + 0] * lo", "= part[4 * j + 0] * lo")
    .replace("+= part[4 * j + 1]", "= part[4 * j + 1]").replace("+= part[4 * j + 2]",
                                                                  "= part[4 * j + 2]")
    .replace("+= part[4 * j + 3]", "= part[4 * j + 3]"),
    # rows r and r + 8 taken as alternate registers (the m16n8 layout misread)
    "rows alternate by register": _promote("part[4 * j + 1] * lo", "part[4 * j + 1] * hi")
    .replace("part[4 * j + 2] * hi", "part[4 * j + 2] * lo"),
    # always the first half: the second 128 columns of a 128 x 256 tile add into the first
    "ignores h": _promote("d[64 * h + 4 * j", "d[4 * j"),
    "plain PyTorch": '''
def PROMOTE(d, part, scale):
    return d + part * scale
''',
    # one register group past the end: part[64..67] read, d[64 h + 64..67] written (outside d
    # for a 128-wide tile, the other half's registers for a 256-wide one)
    "one past the end": _promote("j < 16", "j <= 16"),
    # the halves 128 registers apart: half 1 of a 128 x 256 tile lands past the end of d
    "half past the end": _promote("d[64 * h + 4 * j + 0]", "d[128 * h + 4 * j + 0]")
    .replace("d[64 * h + 4 * j + 1]", "d[128 * h + 4 * j + 1]")
    .replace("d[64 * h + 4 * j + 2]", "d[128 * h + 4 * j + 2]")
    .replace("d[64 * h + 4 * j + 3]", "d[128 * h + 4 * j + 3]"),
    # B's block scale forgotten: right only where the 128 x 128 block's scale is 1
    "block scale forgotten": _promote("const float lo = row_lo * block, hi = row_hi * block;",
                                      "const float lo = row_lo, hi = row_hi;"),
    # the running sum scaled with this tile's scales: the earlier tiles' scales multiply again
    "rescales the running sum": _promote("d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;",
                                         "d[64 * h + 4 * j + 0] = (d[64 * h + 4 * j + 0] + "
                                         "part[4 * j + 0]) * lo;")
    .replace("d[64 * h + 4 * j + 1] += part[4 * j + 1] * lo;",
             "d[64 * h + 4 * j + 1] = (d[64 * h + 4 * j + 1] + part[4 * j + 1]) * lo;")
    .replace("d[64 * h + 4 * j + 2] += part[4 * j + 2] * hi;",
             "d[64 * h + 4 * j + 2] = (d[64 * h + 4 * j + 2] + part[4 * j + 2]) * hi;")
    .replace("d[64 * h + 4 * j + 3] += part[4 * j + 3] * hi;",
             "d[64 * h + 4 * j + 3] = (d[64 * h + 4 * j + 3] + part[4 * j + 3]) * hi;"),
    # the scaled product rounded to 16 bits before it is added (a half-precision promotion)
    "product in 16 bits": _promote("+= part[4 * j + 0] * lo;",
                                   "+= __half2float(__float2half(part[4 * j + 0] * lo));")
    .replace("+= part[4 * j + 1] * lo;", "+= __half2float(__float2half(part[4 * j + 1] * lo));")
    .replace("+= part[4 * j + 2] * hi;", "+= __half2float(__float2half(part[4 * j + 2] * hi));")
    .replace("+= part[4 * j + 3] * hi;", "+= __half2float(__float2half(part[4 * j + 3] * hi));"),
}

# the mechanical mutants (exercises/mutants.py) that behave exactly like the solution
EQUIVALENT = {
    "hopper_measured.promote": {
        "term dropped: line 8: d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;  ->  "
        "d[64 * h + 4 * j] += part[4 * j + 0] * lo;":
            "4 * j + 0 is 4 * j: the same index of d, the same code",
        "term dropped: line 8: d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;  ->  "
        "d[64 * h + 4 * j + 0] += part[4 * j] * lo;":
            "4 * j + 0 is 4 * j: the same register of part, the same code",
    },
}
