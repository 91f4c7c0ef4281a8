"""Python model of what lesson 16's Hopper matmul (wgmma.cu) lays out in shared memory.

The kernel works in bytes: a K tile is 128 bytes of every operand row (64 bf16/fp16 or 128 fp8
elements), copied by TMA with ``CU_TENSOR_MAP_SWIZZLE_128B`` into 1024-byte-aligned tiles and
read by ``wgmma`` through 64-bit shared-memory matrix descriptors. Everything here follows the
PTX ISA (``wgmma`` "Matrix Descriptor Format", ``cp.async.bulk.tensor`` swizzle modes,
``mbarrier.try_wait.parity``) and the kernel's own constants, so the figures and exercises of
lessons 16 and 17 compute exactly what the GPU does:

    swizzle_128b(row, chunk)           where TMA stores 16-byte chunk ``chunk`` of a tile row
    smem_offset(row, byte)             byte offset of any byte of the tile, swizzle applied
    descriptor_for(tile, k_step)       the wgmma descriptor the kernel builds, as a Descriptor
    Descriptor.encode() / .decode(x)   the 64-bit word, and back
    ring_schedule(iterations, stages)  slot and parities of the full/empty mbarrier ring
    stages_that_fit(bm, bn)            how deep the ring can be in 227 KB of shared memory
    grouped_tile(t, ...), wave_tiles   the persistent grid's grouped tile order, and its L2 reuse
    accumulator_home(t, i)             where a thread's accumulator register sits in the tile
"""

from __future__ import annotations

import dataclasses

ROW_BYTES = 128  # one row of a K tile: the 128-byte swizzle span
CHUNK_BYTES = 16  # the unit the swizzle permutes (and one bank group: 4 banks of 4 bytes)
CHUNKS_PER_ROW = ROW_BYTES // CHUNK_BYTES  # 8
ATOM_ROWS = 8  # the XOR pattern repeats every 8 rows ...
ATOM_BYTES = ATOM_ROWS * ROW_BYTES  # ... = 1024 bytes, a "swizzle atom"
BANK_GROUPS = 8  # 32 banks x 4 bytes = 128 bytes = 8 groups of 16 bytes

WGMMA_K_BYTES = 32  # one wgmma m64nNk16 (16-bit types) or m64nNk32 (fp8) reads 32 bytes of K
K_STEPS = ROW_BYTES // WGMMA_K_BYTES  # 4 wgmma k-steps per 128-byte K tile
WGMMA_M = 64  # rows of A one wgmma covers; the next m64 block starts 64 * 128 = 8192 bytes on

SHARED_ADDRESS_BITS = 18  # the descriptor keeps address >> 4 in 14 bits: 256 KB of addresses
SMEM_PER_BLOCK = 227 * 1024  # the most dynamic shared memory an H100 block may opt into
MBARRIER_BYTES = 8  # one mbarrier object: a 64-bit word in shared memory
ALIGNMENT_SLACK = ATOM_BYTES  # dynamic shared memory is only 16-byte aligned: the kernel
# rounds its base up to 1024 bytes, which can waste up to 1008 of them

# bits 62-63 of the descriptor: swizzle span in bytes -> mode (0 = none)
SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}
# (name, first bit, width, shift): a field holds value >> shift in bits first .. first+width-1
FIELDS = (("start_address", 0, 14, 4), ("leading_byte_offset", 16, 14, 4),
          ("stride_byte_offset", 32, 14, 4), ("base_offset", 49, 3, 0), ("swizzle", 62, 2, 0))


def _check_int(name: str, value, low: int, high: int | None = None) -> None:
    """ValueError naming ``name`` unless ``value`` is an int in ``low .. high`` (inclusive)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} expected an int, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} expected {span}, got {value}")


# -- the 128-byte swizzle -----------------------------------------------------------------------


def swizzle_128b(row: int, chunk: int) -> int:
    """The physical 16-byte chunk where TMA stores logical chunk ``chunk`` of tile row ``row``.

    A 128-byte row spans all 32 banks, so without a swizzle chunk c of every row sits in the
    same bank group and a read of one chunk column (8 rows) takes 8 shared-memory wavefronts.
    ``chunk ^ (row % 8)`` sends the 8 rows of each column to 8 different groups; it is a
    permutation of each row (an XOR with a constant), so no byte is lost or doubled. TMA writes
    this layout and wgmma (told "128B swizzle" by its descriptor) reads it back."""
    _check_int("row", row, 0)
    _check_int("chunk", chunk, 0, CHUNKS_PER_ROW - 1)
    return chunk ^ (row % ATOM_ROWS)


def smem_offset(row: int, byte: int) -> int:
    """Byte offset, from the start of a 1024-byte-aligned tile, of byte ``byte`` (0..127) of
    logical row ``row``: rows are 128 bytes apart, chunks permuted, bytes inside a chunk kept."""
    _check_int("row", row, 0)
    _check_int("byte", byte, 0, ROW_BYTES - 1)
    chunk, within = divmod(byte, CHUNK_BYTES)
    return row * ROW_BYTES + swizzle_128b(row, chunk) * CHUNK_BYTES + within


def bank_group(offset: int) -> int:
    """Which of the 8 bank groups (16 bytes = 4 banks) a shared-memory byte offset falls in."""
    _check_int("offset", offset, 0)
    return (offset // CHUNK_BYTES) % BANK_GROUPS


# -- the wgmma shared-memory matrix descriptor ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Descriptor:
    """A wgmma shared-memory matrix descriptor, with its fields in bytes (as a reader thinks of
    them); :meth:`encode` packs them into the 64-bit word the instruction takes.

    ``start_address``: shared-memory byte address of the operand's first row (16-byte aligned).
    ``leading_byte_offset``: distance between core matrices along K; a K-major operand with a
    128-byte swizzle never steps along K inside one wgmma (32 bytes of K fit in one row), so the
    field is unused: the kernel writes 1, i.e. 16 bytes. ``stride_byte_offset``: from one group
    of 8 rows to the next, 1024 bytes (one swizzle atom). ``base_offset``: which row of an atom
    the pattern starts at, 0 for 1024-aligned tiles. ``swizzle``: the span in bytes (128, 64,
    32, or 0 for none)."""

    start_address: int
    leading_byte_offset: int = CHUNK_BYTES
    stride_byte_offset: int = ATOM_BYTES
    base_offset: int = 0
    swizzle: int = ROW_BYTES

    def __post_init__(self):
        for name in ("start_address", "leading_byte_offset", "stride_byte_offset"):
            value = getattr(self, name)
            _check_int(name, value, 0, (1 << SHARED_ADDRESS_BITS) - CHUNK_BYTES)
            if value % CHUNK_BYTES:
                raise ValueError(f"{name} expected a multiple of 16 (the descriptor keeps "
                                 f"bytes >> 4), got {value}")
        _check_int("base_offset", self.base_offset, 0, 7)
        if self.swizzle not in SWIZZLE_MODES:
            raise ValueError(f"swizzle expected a span in bytes, one of "
                             f"{sorted(SWIZZLE_MODES)}, got {self.swizzle!r}")

    def fields(self) -> dict[str, int]:
        """The value stored in each bit field (bytes >> 4 for the addresses, the mode number
        for the swizzle), in bit order."""
        return {"start_address": self.start_address >> 4,
                "leading_byte_offset": self.leading_byte_offset >> 4,
                "stride_byte_offset": self.stride_byte_offset >> 4,
                "base_offset": self.base_offset, "swizzle": SWIZZLE_MODES[self.swizzle]}

    def encode(self) -> int:
        """The 64-bit descriptor word (bits 0-13, 16-29, 32-45, 49-51, 62-63)."""
        word = 0
        values = self.fields()
        for name, first, _, _ in FIELDS:
            word |= values[name] << first
        return word

    @classmethod
    def decode(cls, word: int) -> Descriptor:
        """The descriptor a 64-bit word holds; ValueError if bits outside the fields are set
        (the hardware ignores them, but a word with them set was not built by the kernel)."""
        _check_int("word", word, 0, (1 << 64) - 1)
        covered = 0
        for _, first, width, _ in FIELDS:
            covered |= ((1 << width) - 1) << first
        if word & ~covered:
            raise ValueError(f"word expected bits only in the descriptor's fields, got "
                             f"{word:#018x} with bits {word & ~covered:#018x} set outside them")
        raw = {name: ((word >> first) & ((1 << width) - 1)) << shift
               for name, first, width, shift in FIELDS}
        span = {mode: span for span, mode in SWIZZLE_MODES.items()}[raw.pop("swizzle")]
        return cls(**raw, swizzle=span)


def descriptor_for(tile_address: int, k_step: int, rows_offset: int = 0) -> Descriptor:
    """The descriptor wgmma.cu builds for one wgmma on a K-major 128-byte-swizzled tile.

    ``tile_address``: shared address of the tile (1024-aligned, so the swizzle pattern starts
    at its row 0 and ``base_offset`` is 0). ``k_step``: which 32-byte slice of the 128-byte K
    tile (0..3): the start moves 32 bytes right, the hardware applies the swizzle on top.
    ``rows_offset``: the first row of the operand block, in rows (a multiple of 8): the second
    m64 block of A starts at row 64, 64 * 128 = 8192 bytes on."""
    _check_int("tile_address", tile_address, 0)
    if tile_address % ATOM_BYTES:
        raise ValueError(f"tile_address expected a multiple of 1024 (a swizzle atom), got "
                         f"{tile_address:#x}")
    _check_int("k_step", k_step, 0, K_STEPS - 1)
    _check_int("rows_offset", rows_offset, 0)
    if rows_offset % ATOM_ROWS:
        raise ValueError(f"rows_offset expected a multiple of 8 (whole swizzle atoms), got "
                         f"{rows_offset}")
    start = tile_address + rows_offset * ROW_BYTES + k_step * WGMMA_K_BYTES
    return Descriptor(start_address=start)


# -- the mbarrier ring ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RingStep:
    """What iteration ``iteration`` of the K loop does with the ring: its ``slot``, the parity
    the consumers wait for on the slot's "full" barrier, and the parity the producer waits for
    on its "empty" barrier before refilling it."""

    iteration: int
    slot: int
    full_parity: int
    empty_parity: int


def ring_schedule(iterations: int, stages: int) -> list[RingStep]:
    """Slot and wait parities of each iteration of a ``stages``-slot mbarrier ring.

    Iteration i uses slot i % stages, which it has visited i // stages times before: that
    visit is the slot's phase i // stages, so consumers wait for parity (i // stages) & 1 on
    "full". The producer must wait for the consumers' release of the *previous* visit, one
    phase earlier: parity ((i // stages) & 1) ^ 1. A fresh barrier counts the phase before
    phase 0 (parity 1) as completed, so on the first pass the producer does not block."""
    _check_int("iterations", iterations, 0)
    _check_int("stages", stages, 1)
    steps = []
    for i in range(iterations):
        phase = (i // stages) & 1
        steps.append(RingStep(iteration=i, slot=i % stages, full_parity=phase,
                              empty_parity=phase ^ 1))
    return steps


@dataclasses.dataclass
class Mbarrier:
    """An mbarrier as ``try_wait.parity`` sees it: a phase completes once ``expected``
    arrivals have come; waiting for parity P passes when the phase of parity P has completed,
    i.e. when the current (incomplete) phase has the other parity."""

    expected: int
    phase: int = 0  # the current phase, not yet completed
    arrived: int = 0

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.expected:
            self.phase, self.arrived = self.phase + 1, 0

    def passes(self, parity: int) -> bool:
        return (self.phase & 1) != parity


# -- how deep the ring can be --------------------------------------------------------------------


def stage_bytes(bm: int, bn: int, k_tile_bytes: int = ROW_BYTES) -> int:
    """Shared memory one stage holds: an A tile (bm rows) and a B^T tile (bn rows) of
    ``k_tile_bytes`` each, plus its full and empty mbarriers."""
    return (bm + bn) * k_tile_bytes + 2 * MBARRIER_BYTES


def stages_that_fit(bm: int, bn: int, k_tile_bytes: int = ROW_BYTES,
                    smem_bytes: int = SMEM_PER_BLOCK, reserved: int = ALIGNMENT_SLACK) -> int:
    """How many ring stages of ``bm x bn`` tiles fit in ``smem_bytes`` of shared memory once
    ``reserved`` bytes are set aside (by default the slack of aligning the ring to 1024 bytes;
    add an epilogue's staging buffer if the kernel keeps one). The K tile's bytes, not its
    elements, set the size: 128 bytes is 64 bf16 or 128 fp8, the same shared memory."""
    _check_int("bm", bm, 1)
    _check_int("bn", bn, 1)
    _check_int("k_tile_bytes", k_tile_bytes, CHUNK_BYTES)
    _check_int("smem_bytes", smem_bytes, 1)
    _check_int("reserved", reserved, 0)
    if (bm * k_tile_bytes) % ATOM_BYTES or (bn * k_tile_bytes) % ATOM_BYTES:
        raise ValueError(f"(bm, bn) expected tiles of whole 1024-byte swizzle atoms (rows a "
                         f"multiple of {ATOM_BYTES // k_tile_bytes} at {k_tile_bytes} bytes a "
                         f"row), got ({bm}, {bn})")
    return max(smem_bytes - reserved, 0) // stage_bytes(bm, bn, k_tile_bytes)


# -- the persistent grid's tile order ---------------------------------------------------------


def grouped_tile(t: int, m_tiles: int, n_tiles: int, group_m: int) -> tuple[int, int]:
    """``(tile_m, tile_n)`` of output tile number ``t`` in the grouped order of the course's
    matmuls (mma.cu's launch order): ``group_m`` block rows side by side, walked column by
    column, so tiles computed at the same time share A rows and B columns in L2. The last
    group has only ``m_tiles % group_m`` rows when group_m does not divide m_tiles.
    ``group_m = 1`` is plain row-major order."""
    _check_int("m_tiles", m_tiles, 1)
    _check_int("n_tiles", n_tiles, 1)
    _check_int("group_m", group_m, 1)
    _check_int("t", t, 0, m_tiles * n_tiles - 1)
    per_group = group_m * n_tiles
    first_m = (t // per_group) * group_m
    group_rows = min(m_tiles - first_m, group_m)
    return first_m + (t % per_group) % group_rows, (t % per_group) // group_rows


def wave_tiles(m_tiles: int, n_tiles: int, group_m: int, wave: int,
               programs: int = 132) -> list[tuple[int, int]]:
    """The tiles a persistent grid of ``programs`` (one per SM: 132 on an H100 SXM) works on
    in wave ``wave``: program p takes tiles p, p + programs, ..., so wave w is tiles
    w * programs .. (w + 1) * programs - 1 of the order (fewer in the last wave)."""
    _check_int("programs", programs, 1)
    total = m_tiles * n_tiles
    _check_int("wave", wave, 0, max(-(-total // programs) - 1, 0))
    first = wave * programs
    return [grouped_tile(t, m_tiles, n_tiles, group_m)
            for t in range(first, min(first + programs, total))]


def footprint_bytes(tiles, bm: int, bn: int, k: int, elem_bytes: int) -> int:
    """Distinct bytes of A and B that ``tiles`` read: each block row of A (bm x k) and block
    column of B (bn x k) counted once, however many tiles share it. What the L2 must hold for
    the wave to fetch every operand from HBM only once."""
    a_rows = {m for m, _ in tiles}
    b_cols = {n for _, n in tiles}
    return (len(a_rows) * bm + len(b_cols) * bn) * k * elem_bytes


WARPGROUP_THREADS = 128  # the 4 warps one wgmma is issued by


def accumulator_home(t: int, i: int, row0: int = 0, col0: int = 0) -> tuple[int, int]:
    """(row, column) of thread ``t``'s accumulator register ``i`` in a ``wgmma.m64nN`` fp32
    tile whose top-left is (``row0``, ``col0``): warp ``t // 32`` holds rows 16w .. 16w + 15;
    register ``i`` is pair ``j = i // 4`` of 8 columns, row half ``h = (i // 2) % 2`` (+8 rows)
    and column ``e = i % 2`` within the pair, so lane l holds rows l // 4 (+8) and columns
    2 (l % 4) + e of each 8-column group (the PTX ISA's "wgmma .m64nNk16 register fragment")."""
    _check_int("t", t, 0, WARPGROUP_THREADS - 1)
    _check_int("i", i, 0)
    j, h, e = i // 4, (i // 2) % 2, i % 2
    lane = t % 32
    return row0 + 16 * (t // 32) + lane // 4 + 8 * h, col0 + 8 * j + 2 * (lane % 4) + e

