"""Solutions (and known-wrong answers) of lesson 16's exercises."""

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
    # the stride taken as one row (128 bytes): right for an unswizzled row-major tile, but with
    # the 128-byte swizzle the hardware steps from one 8-row atom to the next
    "hopper_matmul.descriptor": '''
def wgmma_descriptor(tile_address, k_step, rows_offset):
    start = tile_address + rows_offset * 128 + k_step * 32
    return (start >> 4) | 1 << 16 | (128 >> 4) << 32 | 1 << 62
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

# the mechanical mutants (exercises/mutants.py) that behave exactly like the solution
EQUIVALENT = {
    "hopper_matmul.parity": {
        r'constant: line 13: " selp.u32 %0, 1, 0, p;\n}"  ->  " selp.u32 %0, 2, 0, p;\n}"':
            "done is only tested by while (!done): 2 and 1 are both true, 0 stays 0, so the loop "
            "stops on exactly the same try_wait answers",
    },
}
