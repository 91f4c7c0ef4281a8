"""Solutions (and known-wrong answers) of lesson 15's exercises."""

SOLUTIONS = {
    "hopper_matmul.descriptor": '''
def wgmma_descriptor(tile_address, k_step, rows_offset):
    start = tile_address + rows_offset * 128 + k_step * 32
    leading = 16        # unused for a swizzled K-major tile; the kernel writes 1 (= 16 >> 4)
    stride = 8 * 128    # one swizzle atom: from rows 0-7 to rows 8-15
    swizzle_128b = 1
    return ((start >> 4) | (leading >> 4) << 16 | (stride >> 4) << 32
            | 0 << 49 | swizzle_128b << 62)
''',
    "hopper_matmul.stages": '''
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
    "hopper_matmul.waves": '''
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
    "hopper_matmul.tile_order": '''
def wave_tiles(m_tiles, n_tiles, group_m, wave, programs=132):
    tiles = []
    for t in range(wave * programs, min((wave + 1) * programs, m_tiles * n_tiles)):
        per_group = group_m * n_tiles
        first_m = (t // per_group) * group_m
        rows = min(m_tiles - first_m, group_m)
        tiles.append((first_m + (t % per_group) % rows, (t % per_group) // rows))
    return tiles


def l2_footprint(tiles, bm, bn, k, elem_bytes):
    a_rows = {m for m, _ in tiles}
    b_cols = {n for _, n in tiles}
    return (len(a_rows) * bm + len(b_cols) * bn) * k * elem_bytes
''',
}

WRONG = {
    # waves taken as a fraction (tiles / sms): the estimate becomes area / rate, the same for
    # every tile count, so the largest tile always wins, even with 100 of 132 SMs idle
    "hopper_matmul.waves": '''
CANDIDATES = [(128, 256, 1.0), (128, 128, 0.89), (64, 256, 0.89), (64, 128, 0.66)]


def choose_tile(m, n, sms):
    def estimate(candidate):
        rows, columns, rate = candidate
        return (m / rows) * (n / columns) / sms * rows * columns / rate

    rows, columns, _ = min(CANDIDATES, key=estimate)
    return rows, columns
''',
    # the stride taken as one row (128 bytes): right for an unswizzled row-major tile, but with
    # the 128-byte swizzle the hardware steps from one 8-row atom to the next
    "hopper_matmul.descriptor": '''
def wgmma_descriptor(tile_address, k_step, rows_offset):
    start = tile_address + rows_offset * 128 + k_step * 32
    return (start >> 4) | 1 << 16 | (128 >> 4) << 32 | 1 << 62
''',
    # a K tile taken as 64 elements whatever the type: fp8 tiles come out 64 bytes wide
    "hopper_matmul.stages": '''
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
    # every group taken as group_m rows: wrong in the last group when group_m does not divide
    # m_tiles (tile_m runs past the matrix, some tiles are never computed)
    "hopper_matmul.tile_order": '''
def wave_tiles(m_tiles, n_tiles, group_m, wave, programs=132):
    tiles = []
    for t in range(wave * programs, min((wave + 1) * programs, m_tiles * n_tiles)):
        per_group = group_m * n_tiles
        first_m = (t // per_group) * group_m
        tiles.append((first_m + (t % per_group) % group_m, (t % per_group) // group_m))
    return tiles


def l2_footprint(tiles, bm, bn, k, elem_bytes):
    a_rows = {m for m, _ in tiles}
    b_cols = {n for _, n in tiles}
    return (len(a_rows) * bm + len(b_cols) * bn) * k * elem_bytes
''',
}

# -- a kernel the student writes ---------------------------------------------------------------

SOLUTIONS["hopper_matmul.parity"] = '''
RING_WAIT = r"""
// tile kt is phase kt / 2 of slot kt % 2's barrier: the parity flips each time the ring wraps
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return (kt / 2) & 1;
}

__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    u32 done = 0;
    while (!done) {  // try_wait gives up after a while: ask again until the phase completes
        asm volatile("{\\n .reg .pred p;\\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n"
                     " selp.u32 %0, 1, 0, p;\\n}"
                     : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
    }
}
"""
'''


def _parity(old: str, new: str) -> str:
    source = SOLUTIONS["hopper_matmul.parity"]
    assert old in source, old
    return source.replace(old, new)


WRONG["hopper_matmul.parity"] = {
    # the slot's parity (kt % 2) instead of the phase's: right for tiles 0 and 1 only, then a
    # wait returns at once for a phase that completed one lap earlier
    "parity of the slot, not of the phase": _parity("return (kt / 2) & 1;", "return kt & 1;"),
    # off by one lap: a fresh barrier counts its phase "before 0" as completed, so the first
    # waits return before any byte has landed
    "off-by-one phase": _parity("return (kt / 2) & 1;", "return ((kt / 2) & 1) ^ 1;"),
    # a constant parity: the ring never flips
    "a constant": _parity("return (kt / 2) & 1;", "return 0;"),
    # one try_wait and on: it can give up before the tile has landed
    "no loop": _parity("""    u32 done = 0;
    while (!done) {  // try_wait gives up after a while: ask again until the phase completes
        asm volatile""", """    u32 done = 0;
    {
        asm volatile"""),
    # the parity argument ignored: the instruction waits for parity 0 every time
    "fixed parity in the instruction": _parity('"r"(parity) : "memory"', '"n"(0) : "memory"')
    .replace("[%1], %2;", "[%1], 0;"),
    "plain PyTorch": '''
import torch

def RING_WAIT(a, b):
    return a @ b
''',
    # the pointer itself: a generic 64-bit address given to a .shared::cta instruction
    # (undefined behaviour that happens to work on some GPUs)
    "generic address": _parity('"r"(smem_addr(bar))', '"l"(bar)'),
    # the generic address cut to 32 bits: the right width, still not a shared-memory address
    "generic address cut to 32 bits": _parity('"r"(smem_addr(bar))',
                                              '"r"(u32(reinterpret_cast<u64>(bar)))'),
    # the .shared::cta qualifier dropped: a generic mbarrier instruction handed the 32-bit
    # shared-window address, which it reads as a generic one
    "generic instruction": _parity(".shared::cta.b64", ".b64"),
    # the next barrier (slot 1 waits on full[2], one past the end of full)
    "the next barrier": _parity('"r"(smem_addr(bar))', '"r"(smem_addr(bar + 1))'),
    # the answer of try_wait thrown away: done whatever it says, one try and on
    "answer ignored": _parity("selp.u32 %0, 1, 0, p;", "selp.u32 %0, 1, 1, p;"),
}


SOLUTIONS["hopper_matmul.promote"] = '''
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
    source = SOLUTIONS["hopper_matmul.promote"]
    assert old in source, old
    return source.replace(old, new)


WRONG["hopper_matmul.promote"] = {
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
    "hopper_matmul.parity": {
        r'constant: line 13: " selp.u32 %0, 1, 0, p;\n}"  ->  " selp.u32 %0, 2, 0, p;\n}"':
            "done is only tested by while (!done): 2 and 1 are both true, 0 stays 0, so the loop "
            "stops on exactly the same try_wait answers",
    },
    "hopper_matmul.promote": {
        "term dropped: line 8: d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;  ->  "
        "d[64 * h + 4 * j] += part[4 * j + 0] * lo;":
            "4 * j + 0 is 4 * j: the same index of d, the same code",
        "term dropped: line 8: d[64 * h + 4 * j + 0] += part[4 * j + 0] * lo;  ->  "
        "d[64 * h + 4 * j + 0] += part[4 * j] * lo;":
            "4 * j + 0 is 4 * j: the same register of part, the same code",
    },
}
