"""Exercises of lesson 17: the Hopper matmul measured. How deep the ring can be and what latency
it hides, and the tile chosen by wave quantisation, checked on the CPU against
kernels/matmul/hopper/layout.py (the model of what wgmma.cu computes) and tiles.py on inputs
drawn fresh each run. The kernel the student writes (the promotion of block-scaled fp8) is in
:mod:`exercises.hopper_measured_kernels`. Each sits at the end of the notebook section of its
idea. (Until lesson 16 was split in two these were hopper_matmul.stages and .waves; the syllabus
translates those ids.)"""

from __future__ import annotations

import random

import torch

from exercises import exercise, expect


def _layout():
    from kernels.matmul.hopper import layout

    return layout


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


@exercise("hopper_measured.stages", title="How deep can the ring be, and what does it hide?",
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


@exercise("hopper_measured.waves", title="Choose the tile: wave quantisation", stub=WAVES_STUB,
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
    report.line(f"{len(cases)} shapes agree with tiles.choose; the H100's tile sweep (section 3's "
                "figure) shows whether the pick is also the fastest tile")
