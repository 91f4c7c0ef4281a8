"""The right tile for the problem: step 4's kernel in four tile shapes, and the rule that picks one.

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

What the rule leaves out, and the next steps it points to: when even the smallest tile leaves
SMs idle (M = 16, N = 4096: 32 tiles), splitting K across blocks (split-K, stream-K) would put
the idle SMs to work, at the price of a reduction of partial sums; a decoding shape could also
swap the operands (Cᵀ = Bᵀ·Aᵀ) so that its small M lands on the instruction's N, which can be
as small as 8, instead of 64-row tiles three quarters empty.
"""

from __future__ import annotations

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
def chosen_step(m: int, n: int, device: int) -> wgmma.Step:
    """The chosen candidate's step for an M x N output on GPU ``device``: the rule runs once per
    output shape and GPU, a call after the first is one lookup."""
    return choose(m, n, wgmma.sm_count(device)).step


def run(a: torch.Tensor, b: torch.Tensor, v: wgmma.Variant) -> torch.Tensor:
    """``a @ b`` with the chosen tile, on operands already checked (the registered call)."""
    return wgmma.run_checked(a, b, chosen_step(a.shape[0], b.shape[1], a.device.index or 0), v)
