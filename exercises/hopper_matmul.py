"""Exercises of lesson 16: the Hopper matmul, around the kernels. A wgmma shared-memory
descriptor, and the grouped tile order of a persistent grid with its L2 footprint, checked on
the CPU against kernels/matmul/hopper/layout.py (the model of what wgmma.cu computes) on inputs
drawn fresh each run. The kernel the student writes (the parity wait) is in
:mod:`exercises.hopper_matmul_kernels`; the exercises on the measured kernel (the ring's depth,
the tile for a size, the block-scaled promotion) are lesson 17's, :mod:`exercises.hopper_measured`.
Each sits at the end of the notebook section of its idea."""

from __future__ import annotations

import random

from exercises import exercise, expect


def _layout():
    from kernels.matmul.hopper import layout

    return layout


# --------------------------------------------------------------------------------------------
DESCRIPTOR_STUB = '''
def wgmma_descriptor(tile_address, k_step, rows_offset):
    """The 64-bit wgmma shared-memory descriptor (an int) for the K-major, 128-byte-swizzled
    tile at shared address tile_address (a multiple of 1024): k-step k_step (0..3) of its
    128-byte K tile, starting at row rows_offset (0 or 64: the two m64 blocks of A)."""
    # bits 0-13: start address >> 4; bits 16-29: leading byte offset >> 4 (the kernel writes 1);
    # bits 32-45: stride byte offset >> 4; bits 49-51: base offset; bits 62-63: swizzle mode
    ...
'''


def _field_differences(got: int, want: int) -> str:
    """The descriptor fields in which ``got`` differs from ``want``, in words."""
    layout = _layout()
    try:
        theirs = layout.Descriptor.decode(got).fields()
    except ValueError as err:
        return f"not a descriptor the kernel could build: {err}"
    ours = layout.Descriptor.decode(want).fields()
    return "; ".join(f"{name}: yours {theirs[name]}, expected {ours[name]}"
                     for name in ours if theirs[name] != ours[name])


@exercise("hopper_matmul.descriptor", title="Build a wgmma shared-memory descriptor",
          stub=DESCRIPTOR_STUB, answers=("wgmma_descriptor",),
          section="reads shared memory through a descriptor", intro="""
`wgmma` does not take A and B in registers: each warpgroup hands the tensor cores two 64-bit
*descriptors*, one per operand, that say where the tile starts in shared memory and how it is
laid out. In `wgmma.cu` a tile is K-major, its rows 128 bytes apart, written by TMA with the
128-byte swizzle (16-byte chunk c of row r at chunk c XOR (r mod 8)), so every 8 rows form a
1024-byte *swizzle atom*. The descriptor's fields (PTX ISA, "Matrix Descriptor Format"):
bits 0-13 the start address >> 4; bits 16-29 the leading byte offset >> 4 (unused for a
swizzled K-major tile: the kernel writes 1); bits 32-45 the stride byte offset >> 4, the
distance from one group of 8 rows to the next; bits 49-51 the base offset (0 for tiles aligned
to 1024 bytes); bits 62-63 the swizzle mode (0 none, 1 = 128B, 2 = 64B, 3 = 32B). One wgmma
reads 32 bytes of K per row (k16 for bf16, k32 for fp8), so k-step j starts 32 × j bytes into
the tile, and the second m64 block of A rows starts 64 × 128 bytes later. Write the encoded
word. The check compares it with the kernel's for random tile addresses (new ones each run)
and names each field that differs. No GPU needed.""")
def check_descriptor(wgmma_descriptor, report) -> None:
    layout = _layout()
    rng = random.Random()
    cases = [(0, 0, 0), (0x400, 1, 0), (layout.SMEM_PER_BLOCK // 1024 * 1024 - 8192 - 1024, 3, 64)]
    cases += [(1024 * rng.randrange(0, 200), rng.randrange(4), rng.choice((0, 64)))
              for _ in range(40)]
    for tile_address, k_step, rows_offset in cases:
        want = layout.descriptor_for(tile_address, k_step, rows_offset).encode()
        got = wgmma_descriptor(tile_address, k_step, rows_offset)
        expect(isinstance(got, int) and not isinstance(got, bool),
               f"wgmma_descriptor({tile_address:#x}, {k_step}, {rows_offset}) returned "
               f"{got!r}; expected an int (the 64-bit word)", "build it with << and |")
        expect(got == want,
               f"wgmma_descriptor({tile_address:#x}, {k_step}, {rows_offset}) = {got:#018x}; "
               f"the kernel's is {want:#018x}\n{_field_differences(got, want)}",
               "each field holds bytes >> 4 (except base offset and mode); the stride is one "
               "swizzle atom (8 rows x 128 bytes), not one row; the start moves by 32 bytes "
               "per k-step and 128 bytes per row")
    report.line(f"{len(cases)} descriptors match wgmma.cu's, e.g. tile 0x400, k-step 1: "
                f"{layout.descriptor_for(0x400, 1).encode():#018x}")


# --------------------------------------------------------------------------------------------
ORDER_STUB = '''
def wave_tiles(m_tiles, n_tiles, group_m, wave, programs=132):
    """The (tile_m, tile_n) of the output tiles that wave `wave` of a persistent grid of
    `programs` programs computes: tiles wave * programs ... (wave + 1) * programs - 1 of the
    grouped order (group_m block rows side by side, walked column by column; the last group
    may have fewer rows; group_m = 1 is row-major)."""
    ...


def l2_footprint(tiles, bm, bn, k, elem_bytes):
    """Distinct bytes of A and B the tiles read: each block row of A (bm x k) and each block
    column of B (bn x k) counted once, however many tiles share it."""
    ...
'''


@exercise("hopper_matmul.tile_order", title="A grouped tile order for the L2", stub=ORDER_STUB,
          answers=("wave_tiles", "l2_footprint"), section="The steps", intro="""
The last steps of `wgmma.cu` run a *persistent* grid: one program per SM (132 on an H100),
program p computing output tiles p, p + 132, p + 264, ... of an order. The 132 tiles of one
wave run at the same time, and every one of them streams a block row of A and a block column of
B. In row-major order a wave covers a few rows of tiles and all their columns, so it reads
nearly all of B; the *grouped* order (`mma.cu`'s launch order, kept by `wgmma.cu`) walks
GROUP_M block rows side by side, column by column, so the wave is a compact block of tiles that
share their operands in L2. Tile t of the grouped order: groups of GROUP_M × n_tiles tiles; in
group g, first row g × GROUP_M, rows in the group min(m_tiles − first row, GROUP_M) (the last
group can be shorter), tile_m = first row + (t mod group size) mod rows, tile_n = (t mod group
size) div rows. Write the tiles of a wave and the distinct bytes they read. The check compares
both with a simulation on random shapes (new ones each run, awkward ones included) and prints
the footprint of row-major against grouped order for an 8192³ bf16 problem. No GPU needed.""")
def check_tile_order(wave_tiles, l2_footprint, report) -> None:
    layout = _layout()
    rng = random.Random()
    shapes = [(32, 32, 8, 132), (13, 40, 8, 132), (5, 7, 4, 6)]  # 13 rows: a short last group
    shapes += [(rng.randrange(1, 70), rng.randrange(1, 70), rng.choice((1, 2, 4, 8, 16)),
                rng.choice((132, 114, 16))) for _ in range(12)]
    for m_tiles, n_tiles, group_m, programs in shapes:
        waves = -(-m_tiles * n_tiles // programs)
        for wave in range(waves):
            want = layout.wave_tiles(m_tiles, n_tiles, group_m, wave, programs)
            got = wave_tiles(m_tiles, n_tiles, group_m, wave, programs)
            expect(isinstance(got, list | tuple) and [tuple(t) for t in got] == want,
                   f"wave_tiles({m_tiles}, {n_tiles}, {group_m}, {wave}, {programs}): "
                   f"{_first_difference(got, want)}",
                   "tiles wave*programs up to the last tile; in the last group (when group_m "
                   "does not divide m_tiles) divide by the rows the group really has")
        tiles = layout.wave_tiles(m_tiles, n_tiles, group_m, 0, programs)
        bm, bn, elem = rng.choice((64, 128)), rng.choice((128, 256)), rng.choice((1, 2))
        k = 64 * rng.randrange(1, 65)
        want_bytes = layout.footprint_bytes(tiles, bm, bn, k, elem)
        got_bytes = l2_footprint(tiles, bm, bn, k, elem)
        expect(got_bytes == want_bytes,
               f"l2_footprint(wave 0 of {m_tiles}x{n_tiles} tiles, group_m={group_m}, bm={bm}, "
               f"bn={bn}, k={k}, elem_bytes={elem}) = {got_bytes!r}; expected {want_bytes}",
               "count each distinct tile_m once (bm x k elements of A) and each distinct tile_n "
               "once (bn x k of B), then multiply by the element size")
    m_tiles, n_tiles = 8192 // 128, 8192 // 256
    footprint = {}
    for group_m in (1, 8):
        tiles = layout.wave_tiles(m_tiles, n_tiles, group_m, 0)
        footprint[group_m] = layout.footprint_bytes(tiles, 128, 256, 8192, 2)
        order = "row-major" if group_m == 1 else f"grouped, GROUP_M={group_m}"
        report.line(f"8192³ bf16, 128x256 tiles, wave 0 ({order}): "
                    f"{len({m for m, _ in tiles})} A rows x {len({n for _, n in tiles})} B "
                    f"columns = {footprint[group_m] / 2**20:.0f} MiB of distinct operands")
    report.line(f"grouped: {footprint[1] / footprint[8]:.2f}x fewer bytes from HBM per wave, "
                "if the L2 keeps what the wave's tiles share (they move through K together, so "
                "only the current K tiles of those rows and columns need to stay)")


def _first_difference(got, want: list[tuple[int, int]]) -> str:
    """Where a student's wave first differs from the simulation's, for a message."""
    if not isinstance(got, list | tuple):
        return f"returned {got!r}; expected a list of {len(want)} (tile_m, tile_n)"
    for i, (theirs, ours) in enumerate(zip(got, want, strict=False)):
        if tuple(theirs) != ours:
            return (f"tile {i} of the wave (order position {i} + wave * programs) is "
                    f"{tuple(theirs)}, expected {ours}")
    return f"{len(got)} tiles, expected {len(want)}"
