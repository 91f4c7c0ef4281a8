"""The ``wgmma`` instruction ceiling: how many TFLOP/s one variant's instruction reaches on this
GPU with its operands already in shared memory (``wgmma_ceiling`` in ``wgmma.cu``).

Like lesson 08's ``mma.sync`` ceiling, this is the fair ceiling for the kernels of lesson 16:
no TMA, no global memory, no epilogue, only two warpgroups per SM issuing m64n256 back to back.
Measured in the same process as the matmul, repeated, with its spread reported: a ceiling is only
useful if it is reproducible.
"""

from __future__ import annotations

import statistics
import warnings
from dataclasses import dataclass

import torch

from course_utils import nvrtc, timing
from kernels.matmul.hopper import wgmma

BN = 256  # m64n256: the instruction the fastest step issues
CONSUMERS = 2  # warpgroups per block, one block per SM, as the kernel runs
KERNEL = f"wgmma_ceiling<{BN}, {CONSUMERS}>"
SPREAD_WARNING = 0.05


@dataclass(frozen=True)
class Ceiling:
    variant: str
    tflops: float  # the median over the repetitions
    spread: float  # (max - min) / median over the repetitions
    repetitions: int

    def __str__(self) -> str:
        return (f"wgmma {self.variant} ceiling {self.tflops:.0f} TFLOP/s "
                f"(spread {self.spread:.1%} over {self.repetitions} runs)")


def compile_ceiling(v: str | wgmma.Variant, **kwargs) -> nvrtc.Compiled:
    kwargs.setdefault("arch", wgmma.ARCH)
    return nvrtc.compile(wgmma.SOURCE, KERNEL, defines=wgmma.defines(v), **kwargs)


def wgmma_ceiling(v: str | wgmma.Variant, iterations: int = 2048,
                  repetitions: int = 5) -> Ceiling:
    """Measure the instruction's rate ``repetitions`` times; warn when the runs spread > 5%."""
    v = wgmma.variant(v)
    if reason := wgmma.reason_here():
        raise ValueError(f"wgmma_ceiling: {reason}")
    if repetitions < 1:
        raise ValueError(f"repetitions expected at least 1, got {repetitions}")
    kernel = nvrtc.load(compile_ceiling(v))
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    threads = wgmma.WARPGROUP * CONSUMERS
    out = torch.empty(blocks * threads, dtype=torch.float32, device="cuda")
    smem = (CONSUMERS * 64 + BN) * wgmma.K_TILE + 1024
    # per iteration each warpgroup issues 4 instructions of 64 x BN x (32 bytes of K)
    flop = blocks * CONSUMERS * iterations * 4 * 2 * 64 * BN * v.k_step
    rates = []
    for _ in range(repetitions):
        t = timing.benchmark(lambda: kernel(out, iterations, grid=blocks, block=threads,
                                            shared_mem=smem),
                             device="cuda", name=f"wgmma_ceiling[{v.name}]")
        rates.append(timing.tflops(flop, t.median))
    median = statistics.median(rates)
    ceiling = Ceiling(v.name, median, (max(rates) - min(rates)) / median, repetitions)
    if ceiling.spread > SPREAD_WARNING:
        warnings.warn(f"{ceiling}: more than {SPREAD_WARNING:.0%} apart; is something else "
                      "running on this GPU?", stacklevel=2)
    return ceiling
