"""fp8 with scales on lesson 07's kernel: the op ``scaled_matmul`` (kernels/scaled_matmul).

``torch._scaled_mm(a, b, scale_a, scale_b)`` computes ``(scale_a · a) @ (scale_b · b)`` with
one scale per tensor, or one per row of ``a`` and one per column of ``b``. Both factor out of
the sum over K: ``C[i, j] = scale_a[i] · scale_b[j] · Σ_k a[i, k] · b[k, j]``, so the kernel
multiplies fp8 values exactly as with unit scales and applies the scales once per output, to the
fp32 accumulators, before rounding to bfloat16 (``scale_tile`` in hopper.cuh, called by
``wgmma_specialized``'s epilogue when it is given scales). A scale per tensor is passed as a
one-element tensor read with step 0, so both forms are one kernel: reading one float per row
and per column of a 128 x 256 tile costs nothing beside the tile's 8 million multiply-adds per
K tile.

The registered kernels, ``("scaled_matmul", "wgmma", "auto_<variant>")``, use step 4's kernel
with the tile chosen per problem (tiles.py), as ``("matmul", "wgmma", "auto_<variant>")`` does.
"""

from __future__ import annotations

import functools

import torch

from kernels.matmul.hopper import tiles, wgmma


def _scales(scale_a: torch.Tensor, scale_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # one value (step 0) or one per row / column (step 1), as flat float32 tensors
    return scale_a.reshape(-1), scale_b.reshape(-1)


def run(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
        v: wgmma.Variant) -> torch.Tensor:
    """``(scale_a · a) @ (scale_b · b)`` in bfloat16 with the chosen tile, on checked operands."""
    s = tiles.chosen_step(a.shape[0], b.shape[1], a.device.index or 0)
    return wgmma.run_checked(a, b, s, v, _scales(scale_a, scale_b))


def register_all() -> list:
    """Register step 4's kernel with scales, tile chosen per problem, for each fp8 variant."""
    from kernels.registry import register

    registered = []
    for v in wgmma.VARIANTS.values():
        if v.a.itemsize != 1:
            continue

        def check(a, b, scale_a, scale_b, v=v):
            return wgmma.problem_reason(v, a, b) or wgmma.gpu_reason(wgmma._capability(a))

        idea = ("step 4's kernel, tile chosen per problem, the scales applied to the fp32 "
                "accumulators in the epilogue")
        registered.append(register(
            "scaled_matmul", "wgmma", f"auto_{v.name}", build=lambda v=v: functools.partial(
                run, v=v), dtypes=(v.a,), devices=("cuda",), min_capability=(9, 0),
            needs=("cuda", "nvrtc"), check=check,
            meta={"idea": idea, "tile": "chosen per problem", "kernel": wgmma.BEST.kernel,
                  "instruction": v.ptx, "a": v.a, "b": v.b, "out": v.out,
                  "accumulator": "f32", "source": "kernels/matmul/hopper/wgmma.cu"},
            description=f"wgmma auto {v.name} with scales: {idea}"))
    return registered
