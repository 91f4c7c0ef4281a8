"""What the GPU runs at while a kernel runs: its SM clock and its power, read with ``nvidia-smi``.

A GPU's clock is not fixed. Under a long matmul an H100 draws up to its board's power limit
(700 W for the SXM card) and, at the limit, lowers its clock until the power fits: the tensor
cores then finish fewer instructions per second than at full clock. How much power an
instruction draws depends on the data it switches (random bf16 values flip far more bits than
zeros and ones), so the same kernel runs at a different clock on different data. A ratio to a
ceiling measured at another clock mixes the kernel's efficiency with the power it was allowed:
:func:`under_load` says what the clock and the power were, so a lesson can tell the two apart.

    load = clocks.under_load(lambda: torch.mm(a, b))
    print(load)   # "SM clock 1361 MHz (max 1980), 697 W of a 700 W limit, 14 samples"
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass

import torch

QUERY = "clocks.sm,power.draw,power.limit,clocks.max.sm"
SAMPLE_MS = 100  # nvidia-smi's fastest steady sampling interval


@dataclass(frozen=True)
class Load:
    """The mean SM clock and power over the samples taken while a kernel ran in a loop."""

    sm_mhz: float
    max_sm_mhz: float
    watts: float
    power_limit_w: float
    samples: int

    @property
    def at_power_limit(self) -> bool:
        """Within 5% of the power limit: the clock is set by power, not by the kernel."""
        return self.watts >= 0.95 * self.power_limit_w

    def __str__(self) -> str:
        return (f"SM clock {self.sm_mhz:.0f} MHz (max {self.max_sm_mhz:.0f}), "
                f"{self.watts:.0f} W of a {self.power_limit_w:.0f} W limit, "
                f"{self.samples} samples")


def unavailable_reason() -> str | None:
    """Why :func:`under_load` cannot measure here (None: it can)."""
    if not torch.cuda.is_available():
        return "needs a CUDA GPU"
    if shutil.which("nvidia-smi") is None:
        return "needs nvidia-smi (it comes with the NVIDIA driver) on the PATH"
    return None


def _parse(lines: list[str]) -> list[tuple[float, ...]]:
    rows = []
    for line in lines:
        try:
            rows.append(tuple(float(x) for x in line.split(",")))
        except ValueError:  # "[N/A]" on a GPU that does not report a field
            continue
    return [r for r in rows if len(r) == 4]


def under_load(fn, seconds: float = 2.0, device: int = 0, calls_per_check: int = 10) -> Load:
    """Run ``fn`` over and over for ``seconds`` while ``nvidia-smi`` samples GPU ``device``'s
    SM clock and power every 100 ms; the first third of the samples (the GPU warming up to its
    steady state) is left out. ``device`` is the index ``nvidia-smi`` uses, which is CUDA's
    unless ``CUDA_VISIBLE_DEVICES`` reorders them."""
    if reason := unavailable_reason():
        raise RuntimeError(f"clocks.under_load {reason}")
    if seconds <= 0:
        raise ValueError(f"seconds expected > 0, got {seconds}")
    sampler = subprocess.Popen(
        ["nvidia-smi", "-i", str(device), f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
         "-lms", str(SAMPLE_MS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(calls_per_check):
                fn()
            torch.cuda.synchronize()
    finally:
        sampler.terminate()
        out, err = sampler.communicate(timeout=10)
    rows = _parse(out.splitlines())
    rows = rows[len(rows) // 3:]
    if not rows:
        raise RuntimeError(f"nvidia-smi gave no samples of {QUERY}: {err.strip() or out.strip()}")
    mean = [sum(column) / len(rows) for column in zip(*rows, strict=True)]
    return Load(sm_mhz=mean[0], max_sm_mhz=mean[3], watts=mean[1], power_limit_w=mean[2],
                samples=len(rows))
