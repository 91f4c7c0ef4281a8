"""Lesson 16's model of the Hopper kernel (kernels/matmul/hopper/layout.py) and its figures: the
128-byte swizzle, the wgmma descriptor's bits, the mbarrier ring's parities, the ring's depth and
the grouped tile order have the properties the PTX ISA and the lesson claim."""

import random

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from test_matmul_figures import _overlapping_labels  # noqa: E402

from course_utils import env  # noqa: E402
from kernels.matmul.hopper import figures, layout  # noqa: E402

# -- the 128-byte swizzle -------------------------------------------------------------------------


def test_swizzle_permutes_each_row_and_repeats_every_atom():
    for row in range(64):
        assert sorted(layout.swizzle_128b(row, c) for c in range(8)) == list(range(8))
        assert [layout.swizzle_128b(row, c) for c in range(8)] == [
            layout.swizzle_128b(row % 8, c) for c in range(8)]
    # by hand: row 5 = 0b101, chunk 3 = 0b011 -> 0b110
    assert layout.swizzle_128b(5, 3) == 6 and layout.swizzle_128b(0, 7) == 7


def test_smem_offset_is_a_bijection_of_the_tile():
    rows = 24
    offsets = [layout.smem_offset(r, b) for r in range(rows) for b in range(128)]
    assert sorted(offsets) == list(range(rows * 128))
    assert layout.smem_offset(1, 0) == 128 + 16  # row 1, chunk 0 -> chunk 1
    assert layout.smem_offset(3, 37) == 3 * 128 + (2 ^ 3) * 16 + 5  # byte 37 = chunk 2 + 5


@pytest.mark.parametrize("chunk", range(8))
def test_eight_rows_of_a_chunk_hit_eight_bank_groups(chunk):
    for first in range(0, 64, 8):
        swizzled = {layout.bank_group(layout.smem_offset(r, 16 * chunk))
                    for r in range(first, first + 8)}
        assert len(swizzled) == 8
    plain = {layout.bank_group(r * 128 + 16 * chunk) for r in range(8)}
    assert len(plain) == 1  # without the swizzle: an 8-way conflict


# -- the descriptor -----------------------------------------------------------------------------


def test_known_encodings_by_hand():
    # tile 0x400, k-step 0: start 0x400 >> 4 = 64 in bits 0-13; LBO 16 >> 4 = 1 at bit 16;
    # SBO 1024 >> 4 = 64 at bit 32; 128B swizzle = mode 1 at bit 62
    assert layout.descriptor_for(0x400, 0).encode() == 0x4000_0040_0001_0040
    # k-step 3 adds 96 bytes = 6 in the start field
    assert layout.descriptor_for(0x400, 3).encode() == 0x4000_0040_0001_0046
    # the second m64 block of A: 64 rows x 128 B = 8192 bytes = 0x200 in the start field
    assert layout.descriptor_for(0, 0, rows_offset=64).encode() == 0x4000_0040_0001_0200
    # no swizzle, LBO 128, SBO 256, base offset 3: every field in its own bits
    d = layout.Descriptor(start_address=0x3FFF0, leading_byte_offset=128,
                          stride_byte_offset=256, base_offset=3, swizzle=0)
    assert d.encode() == (0x3FFF | 8 << 16 | 16 << 32 | 3 << 49)
    assert layout.Descriptor(0, swizzle=64).encode() >> 62 == 2
    assert layout.Descriptor(0, swizzle=32).encode() >> 62 == 3


def test_descriptor_round_trips():
    rng = random.Random(7)
    for _ in range(500):
        d = layout.Descriptor(start_address=16 * rng.randrange(1 << 14),
                              leading_byte_offset=16 * rng.randrange(1 << 14),
                              stride_byte_offset=16 * rng.randrange(1 << 14),
                              base_offset=rng.randrange(8), swizzle=rng.choice((0, 32, 64, 128)))
        word = d.encode()
        assert 0 <= word < 1 << 64
        assert layout.Descriptor.decode(word) == d
        assert layout.Descriptor.decode(word).encode() == word


def test_descriptor_for_moves_the_start_only():
    base = layout.descriptor_for(0x2000, 0)
    for k_step in range(4):
        d = layout.descriptor_for(0x2000, k_step, rows_offset=64)
        assert d.start_address == 0x2000 + 64 * 128 + 32 * k_step
        assert (d.leading_byte_offset, d.stride_byte_offset, d.base_offset, d.swizzle) == (
            base.leading_byte_offset, 1024, 0, 128)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: layout.swizzle_128b(-1, 0), "row"),
    (lambda: layout.swizzle_128b(0, 8), "chunk"),
    (lambda: layout.swizzle_128b(0, -1), "chunk"),
    (lambda: layout.smem_offset(0, 128), "byte"),
    (lambda: layout.Descriptor(start_address=0x408), "start_address"),
    (lambda: layout.Descriptor(start_address=1 << 18), "start_address"),
    (lambda: layout.Descriptor(0, stride_byte_offset=1 << 18), "stride_byte_offset"),
    (lambda: layout.Descriptor(0, leading_byte_offset=8), "leading_byte_offset"),
    (lambda: layout.Descriptor(0, base_offset=8), "base_offset"),
    (lambda: layout.Descriptor(0, swizzle=16), "swizzle"),
    (lambda: layout.Descriptor.decode(1 << 15), "word"),
    (lambda: layout.Descriptor.decode(-1), "word"),
    (lambda: layout.descriptor_for(0x410, 0), "tile_address"),
    (lambda: layout.descriptor_for(0, 4), "k_step"),
    (lambda: layout.descriptor_for(0, 0, rows_offset=4), "rows_offset"),
    (lambda: layout.ring_schedule(4, 0), "stages"),
    (lambda: layout.ring_schedule(-1, 2), "iterations"),
    (lambda: layout.stages_that_fit(100, 128), r"\(bm, bn\)"),
    (lambda: layout.stages_that_fit(128, 0), "bn"),
    (lambda: layout.grouped_tile(12, 3, 4, 2), "t"),
    (lambda: figures.tma_box_swizzle(rows=4), "rows"),
    (lambda: figures.tma_box_swizzle(chunk=9), "chunk"),
    (lambda: figures.descriptor_fields("0x40"), "desc"),
    (lambda: figures.mbarrier_phases(stages=0), "stages"),
])
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name} expected"):
        call()


# -- the mbarrier ring --------------------------------------------------------------------------


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 7])
def test_ring_schedule_parities(stages):
    steps = layout.ring_schedule(5 * stages + 2, stages)
    for s in steps:
        assert s.slot == s.iteration % stages
        assert s.empty_parity == s.full_parity ^ 1
        if s.iteration >= stages:  # a slot's next visit waits for the other parity
            assert s.full_parity == steps[s.iteration - stages].full_parity ^ 1
    assert all(s.full_parity == 0 and s.empty_parity == 1 for s in steps[:stages])


def _simulate(steps, stages: int, consumers: int = 2, seed: int = 0) -> list[int]:
    """Run a producer and ``consumers`` consumer warpgroups over the ring in a random
    interleaving, with mbarriers as try_wait.parity sees them; return the order in which the
    K tiles were consumed, or raise if a wait never passes or a slot is overwritten unread."""
    rng = random.Random(seed)
    full = [layout.Mbarrier(expected=1) for _ in range(stages)]
    empty = [layout.Mbarrier(expected=consumers) for _ in range(stages)]
    contents = [None] * stages  # which K tile each slot holds
    produced, consumed = 0, [0] * consumers
    read = []
    while min(consumed) < len(steps):
        movable = []
        if produced < len(steps) and empty[steps[produced].slot].passes(
                steps[produced].empty_parity):
            movable.append("producer")
        for c in range(consumers):
            i = consumed[c]
            if i < len(steps) and full[steps[i].slot].passes(steps[i].full_parity):
                movable.append(c)
        if not movable:
            raise RuntimeError(f"deadlock: produced {produced}, consumed {consumed}")
        who = rng.choice(movable)
        if who == "producer":
            slot = steps[produced].slot
            assert contents[slot] is None, f"slot {slot} refilled before it was released"
            contents[slot] = produced
            full[slot].arrive()  # the TMA bytes land: the phase completes
            produced += 1
        else:
            step = steps[consumed[who]]
            assert contents[step.slot] == step.iteration, "read a tile not yet (or no more) there"
            read.append(step.iteration)
            empty[step.slot].arrive()
            if empty[step.slot].arrived == 0:  # the last consumer released the slot
                contents[step.slot] = None
            consumed[who] += 1
    return read


@pytest.mark.parametrize("stages", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(4))
def test_the_schedule_runs_a_ring_without_deadlock_or_overwrite(stages, seed):
    iterations = 6 * stages + 3
    read = _simulate(layout.ring_schedule(iterations, stages), stages, seed=seed)
    assert sorted(read) == sorted(list(range(iterations)) * 2)


def test_the_simulation_catches_a_producer_waiting_for_the_wrong_parity():
    # without the ^ 1 the producer waits for a phase a fresh barrier has not completed
    wrong = [layout.RingStep(s.iteration, s.slot, s.full_parity, s.full_parity)
             for s in layout.ring_schedule(8, 2)]
    with pytest.raises(RuntimeError, match="deadlock"):
        _simulate(wrong, 2)


def test_a_fresh_mbarrier_has_completed_the_phase_before_phase_0():
    bar = layout.Mbarrier(expected=2)
    assert bar.passes(1) and not bar.passes(0)
    bar.arrive()
    assert not bar.passes(0)
    bar.arrive()
    assert bar.passes(0) and not bar.passes(1)


# -- how deep the ring can be -------------------------------------------------------------------


def test_stages_that_fit_by_hand():
    # (128 + 256) rows x 128 B + 16 B of barriers = 49,168 B a stage; 232,448 - 1024 = 231,424
    assert layout.stages_that_fit(128, 256) == 231_424 // 49_168 == 4
    assert layout.stages_that_fit(128, 128) == 231_424 // 32_784 == 7
    assert layout.stages_that_fit(128, 128, reserved=1024 + 32 * 1024) == 6  # an epilogue buffer
    assert layout.stages_that_fit(64, 64, k_tile_bytes=64, smem_bytes=99 * 1024) == 12
    for bm, bn in [(64, 64), (128, 256), (256, 128), (192, 208)]:
        s = layout.stages_that_fit(bm, bn)
        used = s * layout.stage_bytes(bm, bn) + layout.ALIGNMENT_SLACK
        assert used <= layout.SMEM_PER_BLOCK < used + layout.stage_bytes(bm, bn)


# -- the grouped tile order ---------------------------------------------------------------------


@pytest.mark.parametrize(("m_tiles", "n_tiles", "group_m"),
                         [(1, 1, 8), (13, 40, 8), (64, 32, 8), (7, 5, 3), (9, 9, 1), (5, 3, 16)])
def test_grouped_order_visits_every_tile_once(m_tiles, n_tiles, group_m):
    order = [layout.grouped_tile(t, m_tiles, n_tiles, group_m) for t in range(m_tiles * n_tiles)]
    assert sorted(order) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]
    if group_m == 1:
        assert order == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]


def test_grouped_order_by_hand_and_its_waves():
    # 3 row groups of 2 over 3 columns, the last group one row tall
    assert [layout.grouped_tile(t, 5, 3, 2) for t in range(15)] == [
        (0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2),
        (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2),
        (4, 0), (4, 1), (4, 2)]
    waves = [layout.wave_tiles(5, 3, 2, w, programs=4) for w in range(4)]
    assert [len(w) for w in waves] == [4, 4, 4, 3]
    assert waves[3] == [(4, 0), (4, 1), (4, 2)]


def test_grouping_shrinks_a_waves_footprint_at_8192():
    m_tiles, n_tiles = 8192 // 128, 8192 // 256
    row_major = layout.wave_tiles(m_tiles, n_tiles, 1, 0)
    grouped = layout.wave_tiles(m_tiles, n_tiles, 8, 0)
    # row-major: rows 0-4 x all 32 columns; grouped: rows 0-7 x columns 0-16
    assert layout.footprint_bytes(row_major, 128, 256, 8192, 2) == (5 * 128 + 32 * 256) * 8192 * 2
    assert layout.footprint_bytes(grouped, 128, 256, 8192, 2) == (8 * 128 + 17 * 256) * 8192 * 2


# -- the figures ----------------------------------------------------------------------------------


DRAW = {"tma_box_swizzle": lambda: figures.tma_box_swizzle(),
        "tma_box_swizzle 24 rows, chunk 5": lambda: figures.tma_box_swizzle(rows=24, chunk=5),
        "descriptor_fields": lambda: figures.descriptor_fields(layout.descriptor_for(0x400, 1)),
        "descriptor_fields of an int": lambda: figures.descriptor_fields(0x4000_0040_0001_0200),
        "mbarrier_phases": lambda: figures.mbarrier_phases(),
        "mbarrier_phases 4x12": lambda: figures.mbarrier_phases(stages=4, iterations=12)}


@pytest.mark.parametrize("name", list(DRAW))
def test_figure_draws_without_overlapping_labels(name):
    fig = DRAW[name]()
    try:
        assert fig.findobj(Text), "a figure without labels teaches nothing"
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_descriptor_figure_shows_every_bit_of_the_word():
    word = layout.descriptor_for(0x1C00, 2).encode()
    fig = figures.descriptor_fields(word)
    try:
        texts = [t.get_text() for t in fig.findobj(Text)]
        bits = [t for t in texts if t in ("0", "1")]
        assert len(bits) >= 64
        assert f"{word:#018x}" in " ".join(texts)
        assert any("stride byte offset = 64" in t for t in texts)
    finally:
        plt.close(fig)


def test_save_all_writes_stamped_pngs(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "VAR", tmp_path)
    paths = figures.save_all()
    assert [p.name for p in paths] == ["07_tma_swizzle.png", "07_descriptor.png",
                                       "07_mbarrier_ring.png"]
    assert all(p.parent == tmp_path / "figures" and p.stat().st_size > 10_000 for p in paths)
