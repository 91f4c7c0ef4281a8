"""The ``mma.sync`` instruction ceiling: how many TFLOP/s (TOP/s) one variant's instruction
reaches on this GPU with operands already in registers (``mma_ceiling`` in ``mma.cu``).

This, not the datasheet, is the fair ceiling for an Ampere-style kernel on a Hopper GPU: cuBLAS
there uses ``wgmma``, a different instruction with a higher peak. The benchmark measures it in
the same process as the matmul, so every figure has its ceiling beside it.

A ceiling is only useful if it is reproducible: :func:`measure` repeats the measurement (at
least five times, interleaving the loops so that a clock change shows up as spread rather than
as a bias), reports the median and the spread, and warns when the spread exceeds 5%: the GPU
was shared, throttled or still clocking up, and the figure should be measured again.
"""

from __future__ import annotations

import statistics
import warnings
from dataclasses import dataclass

import torch

from course_utils import env, timing
from kernels.matmul import mma

THREADS = 256  # 8 warps per block
BLOCKS_PER_SM = 2  # 16 warps per SM: 4 per scheduler, each with 16 independent chains
REPETITIONS = 5
MAX_SPREAD = 0.05  # (max - min) / median above this: warn


class UnstableCeiling(UserWarning):
    """A ceiling's repetitions disagree by more than :data:`MAX_SPREAD`."""


@dataclass(frozen=True)
class Ceiling:
    """A measured instruction ceiling: the median of ``rates`` (one per repetition)."""

    variant: str
    rates: tuple[float, ...]
    unit: str

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    @property
    def spread(self) -> float:
        """(max - min) / median of the repetitions."""
        return (max(self.rates) - min(self.rates)) / self.rate

    @property
    def stable(self) -> bool:
        return self.spread <= MAX_SPREAD

    def __str__(self) -> str:
        return (f"mma.sync ceiling {self.variant}: {self.rate:.1f} {self.unit} (median of "
                f"{len(self.rates)}, spread {self.spread:.1%})")


def measure(v: str | mma.Variant, iterations: int = 256, repetitions: int = REPETITIONS,
            min_time_s: float = 0.05) -> Ceiling:
    """Measure the variant's instruction ceiling ``repetitions`` times (at least 5).

    Where this GPU runs the instruction natively, each repetition takes the faster of two loops:
    operands fixed (the instruction alone) and operands changed every iteration (a few integer
    ops beside it). Where it is emulated, only the second: with fixed operands the compiler
    moves the emulation's conversions out of the loop, and the rate would be one no matmul can
    reach. Warns (:class:`UnstableCeiling`) when the repetitions spread more than 5%.
    """
    v = mma.variant(v)
    if not isinstance(repetitions, int) or repetitions < REPETITIONS:
        raise ValueError(f"repetitions expected an int >= {REPETITIONS} (a spread needs "
                         f"several), got {repetitions!r}")
    if reason := mma.gpu_reason(v, torch.cuda.get_device_capability()):
        raise ValueError(f"mma_ceiling: {reason}")
    loops = [True] if mma.native_sass(v, env.device_info().arch) is None else [True, False]
    blocks = torch.cuda.get_device_properties(0).multi_processor_count * BLOCKS_PER_SM
    out = torch.empty(blocks * THREADS, dtype=torch.int32, device="cuda")
    chains = 16  # CEIL_A x CEIL_B in mma.cu
    flop = blocks * (THREADS // 32) * chains * iterations * v.flop_per_mma
    kernels = [mma.nvrtc.load(mma.compile_mma(v, name="mma_ceiling", vary_operands=vary))
               for vary in loops]  # (prepare several variants at once: compile_ceilings)
    rates = []
    for _ in range(repetitions):
        best = 0.0
        for kernel in kernels:
            t = timing.benchmark(lambda k=kernel: k(out, iterations, grid=blocks, block=THREADS),
                                 device="cuda", name=f"mma_ceiling[{v.name}]",
                                 min_time_s=min_time_s)
            best = max(best, timing.tflops(flop, t.median))
        rates.append(best)
    found = Ceiling(v.name, tuple(rates), v.unit)
    if not found.stable:
        warnings.warn(f"{found}: the repetitions disagree by more than {MAX_SPREAD:.0%}; is "
                      "something else running on the GPU? Measure again before trusting it.",
                      UnstableCeiling, stacklevel=2)
    return found


def compile_ceilings(variants) -> None:
    """Compile the ceiling kernels of ``variants`` in parallel (:func:`mma.compile_many`), so
    that measuring them one by one does not wait for one compile after another."""
    arch = env.device_info().arch
    chosen = [mma.variant(v) for v in variants]
    for vary in (True, False):
        mma.compile_many([(v, mma.DEFAULT_CONFIG) for v in chosen
                          if vary or mma.native_sass(v, arch) is not None],
                         name="mma_ceiling", vary_operands=vary)


def mma_ceiling(v: str | mma.Variant, iterations: int = 256) -> float:
    """Measured TFLOP/s (TOP/s for integers) of the variant's instruction on this GPU: the
    median of :func:`measure`'s repetitions."""
    return measure(v, iterations).rate
