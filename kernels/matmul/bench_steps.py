"""The first stairs of the course's matmul climb, recorded: lesson 07's steps at 4096³ bf16.

Lesson 07 climbs from one thread per output (``steps/naive.cu``) through shared-memory tiles
(``steps/smem_tiled.cu``), a first ``mma.sync`` (``steps/mma_simple.cu``) and the pipeline's
ideas one at a time (``kernels/matmul/steps/__init__.py`` lists the steps) to ``mma.cu``;
lesson 16 goes on with ``wgmma`` and records its own steps (``kernels/matmul/hopper/bench.py``).
This module records the first part with cuBLAS of the same run as the peer, so that the course
map (:mod:`kernels.course_map`) draws the whole staircase from the records on any machine.

    python -m course bench bench_steps        # on a GPU: -> docs/results/<device>.json

Its records have a lesson key of their own, ``mma_matmul.steps``: ``make bench`` replaces a
lesson's records as a whole, so running this module alone never drops lesson 07's others.
"""

from __future__ import annotations

import torch

from course_utils import env, plots, results, timing
from kernels.matmul import figures

LESSON = "mma_matmul.steps"
SIZE = 4096
FULL_KERNEL = "13_mma.cu"  # where the steps lead: lesson 07's full kernel, tuned where it can be
PEER = "torch.mm (cuBLAS), same run"


def what(step: str, size: int = SIZE) -> str:
    """The record name of ``step`` at ``size``³: ``"bf16 1_naive 4096^3"``."""
    return f"bf16 {step} {size}^3"


def measure(size: int = SIZE) -> tuple[float, dict[str, float]]:
    """(cuBLAS TFLOP/s, {step: TFLOP/s}) for every step and ``mma.cu`` on fresh bf16 operands
    (A row-major, B column-major, as the steps take them), all in this run."""
    from kernels.matmul import mma, steps

    a = torch.randn(size, size, device="cuda").to(torch.bfloat16)
    b = torch.randn(size, size, device="cuda").to(torch.bfloat16).t()  # column-major
    flop = timing.matmul_flop(size, size, size)
    cublas = timing.tflops(flop, timing.benchmark(torch.mm, a, b, name="cuBLAS").median)
    found = {}
    for variant in steps.STEPS:  # the naive step takes ~0.3 s a call: one warm-up is enough
        t = timing.benchmark(steps.matmul_step, variant, a, b, name=variant, warmup=1)
        found[variant] = timing.tflops(flop, t.median)
    t = timing.benchmark(mma.matmul, a, b, "bf16", name="mma.cu")
    found[FULL_KERNEL] = timing.tflops(flop, t.median)
    return cublas, found


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("lesson 07 steps benchmark skipped: it launches CUDA kernels (no CUDA GPU here)")
        return []
    size = 2048 if quick else SIZE
    cublas, found = measure(size)
    ratios = [None, *figures.step_ratios(found)]
    print(plots.stamped_table([{"step": s, "TFLOP/s": v, "× step before": r or "",
                                "of cuBLAS": v / cublas}
                               for (s, v), r in zip(found.items(), ratios, strict=True)],
                              title=f"the steps, bf16 {size}³ (cuBLAS {cublas:,.0f} TFLOP/s)"))
    print(f"largest step: ×{max(ratios[1:]):.2f} (lesson 07's target: at most ×2.5)")
    plots.save(figures.staircase(found, cublas, size, env.device_info().name), "05_staircase")
    return [results.Record(LESSON, what(step, size), value, "TFLOP/s", peer=cublas,
                           peer_what=PEER) for step, value in found.items()]
