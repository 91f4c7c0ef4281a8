"""fp8 with scales on lesson 16's kernel (lesson 17): the op ``scaled_matmul``
(kernels/scaled_matmul).

``torch._scaled_mm(a, b, scale_a, scale_b)`` computes ``(scale_a · a) @ (scale_b · b)`` with
one scale per tensor, or one per row of ``a`` and one per column of ``b``. Both factor out of
the sum over K: ``C[i, j] = scale_a[i] · scale_b[j] · Σ_k a[i, k] · b[k, j]``, so the kernel
multiplies fp8 values exactly as with unit scales and applies the scales once per output, to the
fp32 accumulators, before rounding to bfloat16 (``scale_tile`` in hopper.cuh, called by
``wgmma_specialized``'s epilogue when it is given scales). A scale per tensor is passed as a
one-element tensor read with step 0, so both forms are one kernel: reading one float per row
and per column of a 128 x 256 tile costs nothing beside the tile's 8 million multiply-adds per
K tile.

Block scales (A per 1 x 128, B per 128 x 128) do not factor out of the sum over K: they are
applied per K tile by ``block_scaled.cu``'s kernel, step 4's with one change in the consumers'
loop (read that file's header). Its tile is 128 x 256 or 128 x 128, chosen by the same
wave-quantisation rule as the other tiles (:data:`BLOCK_TILES`).

The registered kernels, ``("scaled_matmul", "wgmma", "auto_<variant>")``, take every form: per
tensor and row-wise scales run step 4's kernel with the tile chosen per problem (tiles.py), as
``("matmul", "wgmma", "auto_<variant>")`` does; block scales run the block-scaled kernel.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.matmul.hopper import plans, tiles, tma, wgmma

BLOCK_SOURCE = Path(__file__).with_name("block_scaled.cu")


@dataclass(frozen=True)
class BlockTile:
    """A tile shape of ``wgmma_block_scaled``: 128 x ``bn`` outputs, ``stages`` ring slots."""

    bn: int
    stages: int
    rate: float  # speed per SM relative to 128 x 256 (see BLOCK_TILES)
    bm: int = 128

    @property
    def name(self) -> str:
        return f"{self.bm}x{self.bn}"

    def template(self, tma_store: bool = True) -> str:
        return f"wgmma_block_scaled<{self.bn}, {self.stages}, 16, {str(tma_store).lower()}>"

    @property
    def shared_bytes(self) -> int:  # the ring, the epilogue's staging buffer, 1 KB to align
        return self.stages * (self.bm + self.bn) * wgmma.K_TILE + self.bm * self.bn * 2 + 1024

    def estimate(self, m: int, n: int, sms: int) -> float:
        """Relative time, as tiles.Candidate.estimate: full waves x tile area / rate."""
        count = -(-m // self.bm) * -(-n // self.bn)
        return tiles.waves(count, sms) * self.bm * self.bn / self.rate


# rates: fp8 e4m3 block-scaled at 8192³, 128 x 128's TFLOP/s over 128 x 256's, measured on the
# H100 (bench_sizes "block tile" records)
BLOCK_TILES = (BlockTile(256, 3, 1.0), BlockTile(128, 5, 0.89))


def choose_block(m: int, n: int, sms: int) -> BlockTile:
    """The block-scaled tile with the smallest estimated time (the larger on a tie)."""
    return min(BLOCK_TILES, key=lambda t: t.estimate(m, n, sms))


def compile_block(tile: BlockTile, v: str | wgmma.Variant, tma_store: bool = True,
                  **kwargs) -> nvrtc.Compiled:
    """Compile the block-scaled kernel for one tile and fp8 variant (no GPU needed)."""
    kwargs.setdefault("arch", wgmma.ARCH)
    return nvrtc.compile(BLOCK_SOURCE, tile.template(tma_store), defines=wgmma.defines(v),
                         **kwargs)


def _scales(scale_a: torch.Tensor, scale_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # one value (step 0) or one per row / column (step 1), as flat float32 tensors
    return scale_a.reshape(-1), scale_b.reshape(-1)


def run(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
        v: wgmma.Variant) -> torch.Tensor:
    """``(scale_a · a) @ (scale_b · b)`` in bfloat16 with the chosen tile, on checked operands."""
    # block scales, which the op has checked come in pairs: a scale_b neither one value nor [1, N]
    if scale_b.numel() > 1 and tuple(scale_b.shape) != (1, b.shape[1]):
        return run_blocks(a, b, scale_a, scale_b, v)
    s = tiles.chosen_step(a.shape[0], b.shape[1], a.device.index or 0,
                          wgmma.k_tiles(a.shape[1], v.a.itemsize))  # tile and split of K
    return wgmma.run_checked(a, b, s, v, _scales(scale_a, scale_b))


# -- block scales: the kernel's arguments and its prepared launch -------------------------------


def block_arguments(tile: BlockTile, a, b, scale_a, scale_b, out, tma_store: bool) -> tuple:
    """``wgmma_block_scaled``'s arguments for checked operands: TMA descriptors of A, B^T and
    (with TMA stores) C, then C, the sizes and each scale with its two strides."""
    m, n = out.shape
    tmap_b = tma.encode(b.t(), tile.bn, "b.t()")
    return (tma.encode(a, tile.bm, "a"), tmap_b,
            tma.encode(out, 64, "out") if tma_store else tmap_b, out, m, n, a.shape[1],
            scale_a, scale_a.stride(0), scale_a.stride(1), scale_b, scale_b.stride(0),
            scale_b.stride(1))


def block_launch_shape(tile: BlockTile, m: int, n: int, device: int) -> dict:
    """A persistent grid (one block per SM at most) of a producer and two consumer warpgroups."""
    return {"grid": min(-(-m // tile.bm) * -(-n // tile.bn), wgmma.sm_count(device)),
            "block": 3 * wgmma.WARPGROUP, "shared_mem": tile.shared_bytes}


def _block_plan(tile: BlockTile, v: wgmma.Variant, a, b, scale_a, scale_b, out) -> plans.Plan:
    """Everything but the output packed once, as wgmma.plan does for the steps."""
    device = a.device.index or 0
    tma_store = tma.check_operand("out", out) is None  # rows 16-byte aligned: TMA stores
    kernel = nvrtc.load(compile_block(tile, v, tma_store), device)
    args = block_arguments(tile, a, b, scale_a, scale_b, out, tma_store)
    prepared = kernel.prepare(*args, **block_launch_shape(tile, *out.shape, device))
    return plans.Plan(prepared, out_index=3, store_box=2 if tma_store else None,
                      keep=(tile, v), stored_to=out.data_ptr())


def run_blocks(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               v: wgmma.Variant, tile: BlockTile | None = None) -> torch.Tensor:
    """``a @ b`` with 1 x 128 / 128 x 128 block scales, on checked operands; ``tile``: the
    tile to use instead of the chosen one (the benchmark's sweep)."""
    m, n = a.shape[0], b.shape[1]
    out = torch.empty(m, n, dtype=v.out, device=a.device)
    if a.shape[1] == 0 or out.numel() == 0:
        return out.zero_()
    tile = tile or choose_block(m, n, wgmma.sm_count(a.device.index or 0))
    key = (id(tile), id(v), *(plans.tensor_key(t) for t in (a, b, scale_a, scale_b)),
           a.device, threading.get_ident())
    plans.remembered(key, lambda: _block_plan(tile, v, a, b, scale_a, scale_b, out))(out)
    return out


def register_all() -> list:
    """Register step 4's kernel with scales, tile chosen per problem, for each fp8 variant."""
    from kernels.registry import register

    registered = []
    for v in wgmma.VARIANTS.values():
        if v.a.itemsize != 1:
            continue

        def check(a, b, scale_a, scale_b, v=v):
            return wgmma.call_reason(v, a, b)

        idea = ("step 4's kernel, tile chosen per problem, per-tensor and row-wise scales "
                "applied to the fp32 accumulators in the epilogue; block scales per K tile "
                "(block_scaled.cu)")
        registered.append(register(
            "scaled_matmul", "wgmma", f"auto_{v.name}", build=lambda v=v: functools.partial(
                run, v=v), dtypes=(v.a,), devices=("cuda",), min_capability=(9, 0),
            needs=("cuda", "nvrtc"), check=check,
            meta={"idea": idea, "tile": "chosen per problem", "kernel": wgmma.BEST.kernel,
                  "block kernel": "wgmma_block_scaled",
                  "block tiles": [t.name for t in BLOCK_TILES],
                  "instruction": v.ptx, "a": v.a, "b": v.b, "out": v.out,
                  "accumulator": "f32", "source": "kernels/matmul/hopper/wgmma.cu"},
            description=f"wgmma auto {v.name} with scales: {idea}"))
    return registered
