"""Exercises of lesson 15: the Hopper matmul, around the kernels. A wgmma shared-memory
descriptor, how deep the ring can be and what latency it hides, the tile chosen by wave
quantisation, the grouped tile order of a persistent grid and its L2 footprint, checked on the
CPU against kernels/matmul/hopper/layout.py (the model of what wgmma.cu computes) and tiles.py
on inputs drawn fresh each run. The kernels the student writes are in
:mod:`exercises.hopper_matmul_kernels`. Each sits at the end of the notebook section of its idea."""

from __future__ import annotations

import random

import torch

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
# the H100 SXM's dense tensor-core peak (datasheet), per SM: what one K tile's wgmma costs
H100_SMS = 132
PEAK_TFLOPS = {2: 989.4, 1: 1978.9}  # by element size: bf16/fp16, fp8
DTYPES = (torch.bfloat16, torch.float16, torch.float8_e4m3fn)

STAGES_STUB = '''
import torch

SMEM_BYTES = 227 * 1024  # the most an H100 block can opt into
RESERVED = 1024  # slack for aligning the ring to 1024 bytes
BARRIER_BYTES = 2 * 8  # each stage's full and empty mbarriers
SM_FLOP_PER_NS = {2: 989.4e3 / 132, 1: 1978.9e3 / 132}  # dense peak per SM, by element bytes


def pipeline_depth(bm, bn, dtype):
    """(stages, hidden_ns) for wgmma.cu with bm x bn output tiles of dtype operands:
    how many ring stages fit in an H100 block's shared memory, and how many nanoseconds of TMA
    latency they hide (stages - 1 K tiles of one SM's tensor-core time)."""
    ...
'''


def _depth(bm: int, bn: int, dtype: torch.dtype) -> tuple[int, float]:
    layout = _layout()
    stages = layout.stages_that_fit(bm, bn)
    k_elements = layout.ROW_BYTES // dtype.itemsize  # a K tile is 128 bytes, whatever the type
    flop_per_ns = PEAK_TFLOPS[dtype.itemsize] * 1e3 / H100_SMS
    return stages, (stages - 1) * 2 * bm * bn * k_elements / flop_per_ns


@exercise("hopper_matmul.stages", title="How deep can the ring be, and what does it hide?",
          stub=STAGES_STUB, answers=("pipeline_depth",), section="Seeing the pipeline",
          intro="""
`wgmma.cu` keeps a ring of stages in shared memory: each holds one K tile of A (BM rows) and of
B^T (BN rows), 128 *bytes* per row whatever the type (64 bf16 or 128 fp8 elements), plus a
"full" and an "empty" mbarrier of 8 bytes each. An H100 block may use 227 KB (232,448 bytes);
set 1024 aside for aligning the ring to a swizzle atom. While the consumers compute on one
slot, TMA can be filling the other stages − 1, so the ring hides stages − 1 K tiles of load
latency: in time, stages − 1 times what one SM's tensor cores take for one K tile
(2 × BM × BN × K-tile elements FLOP at the dense peak, 989.4 TFLOP/s for bf16/fp16 and
1978.9 for fp8, over 132 SMs). Write both. The check compares them with the kernel's model for
random tile shapes and types (new ones each run) and prints what the deepest ring hides against
a TMA load's latency from HBM (about a microsecond). No GPU needed.""")
def check_stages(pipeline_depth, report) -> None:
    rng = random.Random()
    shapes = [(128, 256, torch.bfloat16), (128, 256, torch.float8_e4m3fn), (64, 64, torch.float16)]
    shapes += [(rng.choice((64, 128, 192, 256)), 8 * rng.randrange(8, 33), rng.choice(DTYPES))
               for _ in range(30)]
    for bm, bn, dtype in shapes:
        want_stages, want_ns = _depth(bm, bn, dtype)
        got = pipeline_depth(bm, bn, dtype)
        expect(isinstance(got, tuple) and len(got) == 2,
               f"pipeline_depth({bm}, {bn}, {dtype}) returned {got!r}; expected a tuple "
               "(stages, hidden_ns)", "return stages, hidden_ns")
        stages, hidden_ns = got
        expect(stages == want_stages,
               f"pipeline_depth({bm}, {bn}, {dtype}): {stages!r} stages; {want_stages} fit "
               f"(each takes ({bm} + {bn}) x 128 B + 16 B of barriers)",
               "a K tile is 128 bytes per row for every type: 64 bf16 but 128 fp8 elements; "
               "divide what is left after the reserve by one stage's bytes, rounding down")
        expect(isinstance(hidden_ns, int | float) and abs(hidden_ns - want_ns) <= 1e-6 * want_ns,
               f"pipeline_depth({bm}, {bn}, {dtype}): hides {hidden_ns!r} ns; expected "
               f"{want_ns:.1f} ns ({want_stages - 1} K tiles in flight)",
               "the slot being computed on is not loading: stages - 1 tiles hide latency; "
               "fp8 packs twice the elements per K tile but runs at twice the rate")
    stages, ns = _depth(128, 256, torch.bfloat16)
    report.line(f"128x256 bf16 tiles: {stages} stages fit, hiding {ns:.0f} ns of load latency "
                f"({stages - 1} K tiles of {ns / (stages - 1):.0f} ns): more than a TMA load from "
                "HBM takes, so the tensor cores need not wait")


# --------------------------------------------------------------------------------------------
def _tiles():
    from kernels.matmul.hopper import tiles

    return tiles


WAVES_STUB = f'''
import math

# step 4's kernel in four tile shapes: (rows, columns, speed per SM relative to 128 x 256),
# measured on the H100 at bf16 8192³, where every shape fills every SM (hopper/tiles.py)
CANDIDATES = {[(c.step.bm, c.step.bn, c.rate) for c in _tiles().CANDIDATES]}


def choose_tile(m, n, sms):
    """(rows, columns) of the candidate with the smallest estimated time for an m x n output on
    `sms` SMs: waves x rows x columns / rate, where a persistent grid of `sms` blocks needs
    waves = ceil(tiles / sms) rounds for tiles = ceil(m / rows) x ceil(n / columns). On a tie,
    the earlier candidate (the larger tile)."""
    ...
'''


@exercise("hopper_matmul.waves", title="Choose the tile: wave quantisation", stub=WAVES_STUB,
          answers=("choose_tile",), section="Every size", intro="""
A persistent grid of one block per SM works through its tiles in rounds, *waves*, and a wave
with one tile in it costs as much as a full one: 133 tiles on 132 SMs take two waves. So the
time of a tile shape is about *waves × tile area / rate per SM*, and a smaller tile can win by
filling more SMs even though each SM runs it more slowly. Write the rule that `auto_<variant>`
uses to pick its tile. The check compares your choice with `tiles.choose` on random shapes (new
ones each run: squares, prefill, decoding with M from 1 to 64, GPUs of 16 to 132 SMs) and names
the first shape where they differ, with each candidate's waves. No GPU needed.""")
def check_waves(choose_tile, report) -> None:
    tiles = _tiles()
    rng = random.Random()
    cases = [(1024, 1024, 132), (2048, 2048, 132), (16, 4096, 132), (8192, 1024, 114),
             (8192, 8192, 132), (64, 14336, 132), (1, 1, 1)]
    cases += [(rng.choice((rng.randrange(1, 65), rng.randrange(1, 20000))),
               rng.randrange(1, 20000), rng.choice((132, 114, 78, 16))) for _ in range(200)]
    for m, n, sms in cases:
        want = tiles.choose(m, n, sms)
        got = choose_tile(m, n, sms)
        expect(isinstance(got, tuple | list) and len(got) == 2,
               f"choose_tile({m}, {n}, {sms}) returned {got!r}; expected (rows, columns)")
        per = "; ".join(f"{r['tile']}: {r['tiles']} tiles, {r['waves']} waves, estimate "
                        f"{r['estimate']}" for r in tiles.explain(m, n, sms))
        expect(tuple(got) == (want.step.bm, want.step.bn),
               f"choose_tile({m}, {n}, {sms}) = {tuple(got)}; the rule picks {want.name}\n{per}",
               "waves are whole: ceil(tiles / sms), not tiles / sms; tiles round up in both "
               "directions; divide the area by the candidate's rate")
    for m, n in ((1024, 1024), (2048, 2048), (16, 4096)):
        c = tiles.choose(m, n, 132)
        report.line(f"{m} x {n} on 132 SMs: {c.name}, {c.tiles(m, n)} tiles in "
                    f"{tiles.waves(c.tiles(m, n), 132)} wave(s)")
    report.line(f"{len(cases)} shapes agree with tiles.choose; the H100's tile sweep (section 8's "
                "figure) shows whether the pick is also the fastest tile")


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
