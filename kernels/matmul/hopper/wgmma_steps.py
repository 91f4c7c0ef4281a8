"""What lesson 16's staircase is made of, as data: the dtype variants and the steps of ``wgmma.cu``.

A *variant* (:class:`Variant`) is a choice of types (bf16, fp16, fp8 e4m3 or e5m2; always fp32
accumulation) and with it one ``wgmma`` instruction; a *step* (:class:`Step`) is one kernel of
``wgmma.cu`` with its tile shape, ring depth, consumers, tile order, store and cluster, and what
follows from them (template arguments, threads, shared memory, grid). :func:`k_tiles` and
:func:`split_k` are the K arithmetic the kernels and the tile choice (``tiles.py``) share.

Separate from :mod:`kernels.matmul.hopper.wgmma`, which compiles, checks and launches these
kernels: this part needs no GPU, no NVRTC and no kernel source, and the tile candidates, the
timeline and the figures read it. ``wgmma`` imports every name here, so ``wgmma.STEPS``,
``wgmma.variant(...)`` and the rest work as before (the notebooks use them so).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.registry import one_of

K_TILE = 128  # bytes of K per tile (K_TILE in hopper.cuh)
WARPGROUP = 128

F8_E4M3 = getattr(torch, "float8_e4m3fn", None)
F8_E5M2 = getattr(torch, "float8_e5m2", None)


@dataclass(frozen=True)
class Variant:
    """One ``wgmma`` instruction and the types around it."""

    name: str
    a: torch.dtype
    b: torch.dtype
    out: torch.dtype
    ptx: str  # the instruction, with N left open

    @property
    def k_step(self) -> int:
        """K per instruction: every variant reads 32 bytes of K per wgmma."""
        return 32 // torch.empty(0, dtype=self.a).element_size()

    @property
    def defines(self) -> dict[str, object]:
        return {"a_t": self.a, "b_t": self.b, "out_t": self.out}


def _variants() -> dict[str, Variant]:
    bf16, f16 = torch.bfloat16, torch.float16
    found = [
        Variant("bf16", bf16, bf16, bf16, "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16"),
        Variant("fp16", f16, f16, f16, "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16"),
    ]
    if F8_E4M3 is not None and F8_E5M2 is not None:
        found += [
            Variant("fp8_e4m3", F8_E4M3, F8_E4M3, bf16,
                    "wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3"),
            Variant("fp8_e5m2", F8_E5M2, F8_E5M2, bf16,
                    "wgmma.mma_async.sync.aligned.m64nNk32.f32.e5m2.e5m2"),
        ]
    return {v.name: v for v in found}


VARIANTS: dict[str, Variant] = _variants()


def variant(name: str | Variant) -> Variant:
    return name if isinstance(name, Variant) else one_of("variant", name, VARIANTS)


@dataclass(frozen=True)
class Step:
    """One step of the staircase: a kernel of wgmma.cu, its shapes and how it is launched."""

    number: int
    kernel: str  # the template in wgmma.cu
    idea: str  # what this step adds, in one line
    bm: int = 128  # output tile: bm x bn
    bn: int = 128
    stages: int = 1  # ring slots (1: no ring)
    consumers: int = 1  # warpgroups that issue wgmma
    group_m: int = 1  # tile rows walked together (grouped order); 1: row by row
    persistent: bool = False  # one block per SM looping over tiles, instead of one per tile
    tma_store: bool = False  # the epilogue stages C in shared memory and TMA writes it
    cluster: int = 1  # blocks per cluster, sharing B's tile by TMA multicast (stacked along M)
    # split-K: blocks per output tile, each on its share of K (a runtime argument of
    # wgmma_specialized, not in its template: one compiled kernel for every split count)
    splits: int = 1

    def __post_init__(self):
        if self.splits < 1:
            raise ValueError(f"splits expected >= 1, got {self.splits}")
        if self.splits > 1 and not self.can_split_k:
            raise ValueError(
                f"step {self.number} ({self.kernel}, {self.bm}x{self.bn} tiles, cluster "
                f"{self.cluster}) cannot split K, got splits={self.splits}: only "
                "wgmma_specialized on 128-column tiles without a cluster splits K (SPLIT_K in "
                "wgmma.cu: a 256-column consumer has no registers left for the partial sums)")

    @property
    def can_split_k(self) -> bool:
        """Whether this step's kernel takes splits > 1 (SPLIT_K in wgmma.cu)."""
        return self.specialized and self.bn == 128 and self.cluster == 1

    @property
    def name(self) -> str:
        return f"step{self.number}"

    @property
    def template(self) -> str:
        """The kernel's name as NVRTC instantiates it, e.g. ``wgmma_pipelined<128, 128, 4>``."""
        args = {"wgmma_basic": (self.bm, self.bn),
                "wgmma_pipelined": (self.bm, self.bn, self.stages),
                "wgmma_specialized": (self.bm, self.bn, self.stages, self.consumers,
                                      self.group_m, str(self.tma_store).lower(),
                                      self.cluster)}[self.kernel]
        return f"{self.kernel}<{', '.join(map(str, args))}>"

    @property
    def specialized(self) -> bool:
        return self.kernel == "wgmma_specialized"

    @property
    def threads(self) -> int:
        return WARPGROUP * (self.consumers + (1 if self.specialized else 0))

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory: the ring (and the epilogue's staging buffer), plus 1 KB to
        align it to the swizzle's 1024 bytes."""
        staging = self.bm * self.bn * 2 if self.tma_store else 0  # 16-bit outputs
        return self.stages * (self.bm + self.bn) * K_TILE + staging + 1024

    @property
    def b_box_rows(self) -> int:
        """Rows of B's tile one TMA copy loads: all of them, or with a cluster its share."""
        return self.bn // self.cluster

    def grid(self, m: int, n: int, sms: int) -> int:
        """Blocks to launch: one per work unit (a tile, or with split-K a tile's share of K),
        or (persistent) at most one per SM; with a cluster, a multiple of its size, one cluster
        per ``cluster`` tiles stacked along M."""
        units = -(-m // (self.bm * self.cluster)) * -(-n // self.bn) * self.splits
        return (min(units, sms // self.cluster) if self.persistent else units) * self.cluster


STEPS: dict[int, Step] = {s.number: s for s in (
    Step(1, "wgmma_basic", "TMA loads a K tile, one warpgroup multiplies it with wgmma; "
         "no overlap"),
    Step(2, "wgmma_pipelined", "a 4-slot ring with full/empty mbarriers: TMA runs ahead of "
         "wgmma", stages=4),
    Step(3, "wgmma_specialized", "warp specialisation: a producer warpgroup, two consumer "
         "warpgroups, setmaxnreg", stages=4, consumers=2),
    Step(4, "wgmma_specialized", "128x256 tiles, a persistent grid in grouped tile order, TMA "
         "stores: the next tile starts during the epilogue", bn=256, stages=3, consumers=2,
         group_m=16, persistent=True, tma_store=True),
    Step(5, "wgmma_specialized", "clusters of 2 blocks on the two tiles of one column of B: "
         "each loads half of B's tile and TMA multicasts it to both", bn=256, stages=3,
         consumers=2, group_m=8, persistent=True, tma_store=True, cluster=2),
)}
BEST = STEPS[4]  # what the tile candidates, fp8 with scales and the timeline start from


def step(number: int | Step) -> Step:
    return number if isinstance(number, Step) else one_of("step", number, STEPS)


def k_tiles(k: int, element_bytes: int) -> int:
    """K tiles of 128 bytes in a row of K elements (TMA fills a last, partial one with zeros)."""
    return -(-k * element_bytes // K_TILE)


def split_k(k_tile_count: int, splits: int) -> tuple[int, int]:
    """(K tiles per split, splits that get any), as ``wgmma_specialized`` divides K: each
    split takes ceil(k / splits) K tiles, so the last ones may get none (9 K tiles in 8
    splits: 2 each, 5 splits) and the kernel runs only the splits that get K tiles."""
    per = -(-k_tile_count // splits)
    return per, -(-k_tile_count // per) if per else 0

