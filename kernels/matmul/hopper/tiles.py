"""The right tile for the problem: step 4's kernel in four tile shapes, the rule that picks one,
and the rule that splits K when even the smallest tiles leave SMs idle.

Step 4 always computes 128 x 256 tiles on a persistent grid (one block per SM). That is the
best tile when there are many of them: 8192³ has 2,048, about 15.5 per SM. A 1024³ problem has
32, so 100 of the H100's 132 SMs have nothing to do; a decoding step (M = 16) fills one eighth
of each tile's rows. The same kernel template takes smaller tiles (64 rows need one consumer
warpgroup instead of two; 128 columns halve the accumulators), and a smaller tile means more
tiles, so more SMs at work, at a lower rate per SM (fewer bytes of shared memory reused per
``wgmma``, a shorter K loop per byte loaded).

**Wave quantisation.** A persistent grid of ``P`` SMs works through ``T`` tiles in
``ceil(T / P)`` waves, and every wave costs as much as a full one: 133 tiles on 132 SMs take two
waves, as long as 264. The rule estimates each candidate's time as

    waves(T, P) x tile_area / rate

(``rate``: the candidate's speed per SM relative to 128 x 256, measured on the H100 at 8192³,
where every candidate fills every SM; see :data:`CANDIDATES`) and picks the smallest. The
lesson-07 notebook draws the estimate beside the measured sweep (``bench.tile_sweep``).

**Split-K.** When even the smallest tile leaves SMs idle (M = 16, N = 4096: 32 tiles of
64 x 128 for 132 SMs), the kernel can also divide K: each tile becomes ``s`` work units, one
per share of K (``wgmma.cu``, ``hopper.cuh`` section 5b), so ``T·s`` units keep more SMs busy,
each ``1/s`` as long. The price: every unit writes its fp32 partial tile (BM x BN x 4 bytes)
and the last one reads all ``s`` back to sum them. Counted in K tiles of one SM's time (a K
tile moves (BM + BN) x 128 bytes of A and B; a partial tile costs ``partial`` = BM x BN x 4 /
((BM + BN) x 128) of them: 1.33 for 64 x 128), the estimate is

    waves(T·s, P) x ceil(k_tiles / s) + (s + 1) x partial      (s > 1; s = 1: no partials)

M = 64, N = 4096, K = 4096 bf16 (64 K tiles, T = 32): s = 1: 64; 2: 36; 4: 22.7; 8: two
waves, 28. So 4. The rule tries powers of two up to :data:`MAX_SPLITS`, only while the tiles
are fewer than the SMs (above one wave, splitting trades the last wave's idle SMs for partial
sums: stream-K's business, not built here), only where every split keeps at least
:data:`MIN_K_TILES` K tiles, and only for tiles whose kernel can split (128 columns).

What the rules leave out: a decoding shape could also swap the operands (Cᵀ = Bᵀ·Aᵀ) so that
its small M lands on the instruction's N, which can be as small as 8, instead of 64-row tiles
three quarters empty.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch

from kernels.matmul.hopper import wgmma


@dataclass(frozen=True)
class Candidate:
    step: wgmma.Step  # step 4's kernel with this tile shape and ring depth
    rate: float  # speed per SM relative to 128 x 256, bf16 8192³ on the H100

    @property
    def name(self) -> str:
        return f"{self.step.bm}x{self.step.bn}"

    def tiles(self, m: int, n: int) -> int:
        return math.ceil(m / self.step.bm) * math.ceil(n / self.step.bn)

    def estimate(self, m: int, n: int, sms: int) -> float:
        """Relative time: full waves of tiles, each as long as one tile's area at this rate."""
        return waves(self.tiles(m, n), sms) * self.step.bm * self.step.bn / self.rate


def waves(tiles: int, sms: int) -> int:
    """How many rounds a persistent grid of ``sms`` blocks needs for ``tiles`` tiles."""
    return math.ceil(tiles / sms)


def _candidate(bm: int, bn: int, stages: int, rate: float) -> Candidate:
    # the ring takes what shared memory the staging buffer leaves (227 KB per block on Hopper)
    s = wgmma.Step(4, "wgmma_specialized", f"{bm}x{bn} tiles, chosen per problem", bm=bm,
                   bn=bn, stages=stages, consumers=bm // 64, group_m=16, persistent=True,
                   tma_store=True)
    return Candidate(s, rate)


# rates: each candidate's TFLOP/s at bf16 8192³ divided by 128 x 256's, measured on the H100
# in one run (docs/results/nvidia-h100-80gb-hbm3.json, "tile sweep" records): 1.01, 0.90,
# 0.90 and 0.67 x cuBLAS
CANDIDATES: tuple[Candidate, ...] = (
    Candidate(wgmma.BEST, 1.0),
    _candidate(128, 128, 5, 0.89),
    _candidate(64, 256, 4, 0.89),
    _candidate(64, 128, 7, 0.66),
)


def choose(m: int, n: int, sms: int) -> Candidate:
    """The candidate with the smallest estimated time for an M x N output on ``sms`` SMs (the
    first, the largest tile, on a tie)."""
    if m < 1 or n < 1 or sms < 1:
        raise ValueError(f"choose expected m, n and sms >= 1, got m={m}, n={n}, sms={sms}")
    return min(CANDIDATES, key=lambda c: c.estimate(m, n, sms))


MAX_SPLITS = 8  # 1, 2, 4, 8: beyond, the partial sums cost more than the idle SMs they fill
MIN_K_TILES = 4  # per split: a shorter unit ends before the ring of 3 to 7 slots is full


def partial_cost(c: Candidate) -> float:
    """One fp32 partial tile written or read, in K tiles: its bytes over a K tile's."""
    return c.step.bm * c.step.bn * 4 / ((c.step.bm + c.step.bn) * wgmma.K_TILE)


def split_estimate(c: Candidate, tiles: int, k_tiles: int, splits: int, sms: int) -> float:
    """Relative time in K tiles of one SM: waves of units, each ceil(k_tiles / splits) K tiles
    long, and with a split every unit's partial written and the last unit's ``splits`` read."""
    per, _ = wgmma.split_k(k_tiles, splits)
    partials = (splits + 1) * partial_cost(c) if splits > 1 else 0.0
    return waves(tiles * splits, sms) * per + partials


def split_candidates(c: Candidate, tiles: int, k_tiles: int, sms: int) -> list[int]:
    """The split counts the rule weighs: 1, and when the tiles are fewer than the SMs and the
    kernel can split (128-column tiles), the powers of two up to MAX_SPLITS whose every split
    keeps MIN_K_TILES K tiles (the last is the shortest: the ones before take ceil(k_tiles / s))
    up to the first that does not."""
    splits = [1]
    if tiles >= sms or not c.step.can_split_k:
        return splits
    s = 2
    while s <= MAX_SPLITS and k_tiles - (s - 1) * wgmma.split_k(k_tiles, s)[0] >= MIN_K_TILES:
        splits.append(s)
        s *= 2
    return splits


def choose_splits(m: int, n: int, k_tiles: int, sms: int) -> int:
    """How many blocks share each output tile's K (1: none) for an M x N output with
    ``k_tiles`` K tiles of 128 bytes, on the tile :func:`choose` picks (the fewest on a tie)."""
    c = choose(m, n, sms)
    t = c.tiles(m, n)
    return min(split_candidates(c, t, k_tiles, sms),
               key=lambda s: split_estimate(c, t, k_tiles, s, sms))


def explain_splits(m: int, n: int, k_tiles: int, sms: int) -> list[dict]:
    """One row per split count the rule weighs, on the chosen tile: units, waves, K tiles per
    unit, the estimate, the pick."""
    c = choose(m, n, sms)
    t = c.tiles(m, n)
    picked = choose_splits(m, n, k_tiles, sms)
    return [{"tile": c.name, "splits": s, "units": t * s, "waves": waves(t * s, sms),
             "K tiles per unit": wgmma.split_k(k_tiles, s)[0],
             "estimate": round(split_estimate(c, t, k_tiles, s, sms), 1),
             "chosen": "◀" if s == picked else ""}
            for s in split_candidates(c, t, k_tiles, sms)]


def explain(m: int, n: int, sms: int) -> list[dict]:
    """One row per candidate: tiles, waves, SMs busy in the last wave, the estimate, the pick."""
    picked = choose(m, n, sms)
    rows = []
    for c in CANDIDATES:
        t = c.tiles(m, n)
        rows.append({"tile": c.name, "tiles": t, "waves": waves(t, sms),
                     "busy in last wave": f"{t - (waves(t, sms) - 1) * sms}/{sms}",
                     "rate per SM": c.rate,
                     "estimate": round(c.estimate(m, n, sms) / (128 * 256), 2),
                     "chosen": "◀" if c is picked else ""})
    return rows


@functools.cache
def chosen_step(m: int, n: int, device: int, k_tiles: int = 0) -> wgmma.Step:
    """The chosen candidate's step for an M x N output on GPU ``device``, with K split as
    :func:`choose_splits` says for ``k_tiles`` K tiles of 128 bytes (0: K is not split). The
    rules run once per problem shape and GPU, a call after the first is one lookup."""
    if m == 0 or n == 0:  # an empty output launches nothing (run_checked returns it at once)
        return CANDIDATES[0].step
    sms = wgmma.sm_count(device)
    s = choose(m, n, sms).step
    splits = choose_splits(m, n, k_tiles, sms)
    return s if splits == 1 else dataclasses.replace(s, splits=splits)


def run(a: torch.Tensor, b: torch.Tensor, v: wgmma.Variant) -> torch.Tensor:
    """``a @ b`` with the chosen tile and split, on operands already checked (the registered
    call)."""
    k = wgmma.k_tiles(a.shape[1], v.a.itemsize)
    return wgmma.run_checked(a, b, chosen_step(a.shape[0], b.shape[1], a.device.index or 0, k), v)
