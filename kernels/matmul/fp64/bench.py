"""Lesson 11's measurements: the FP64 GEMMs against ``torch.mm`` in float64, and the autotune
sweep over each provider's design space.

Notebook 11 calls the same functions (one code path); ``python -m course bench`` calls
:func:`run`, which turns the sweep into results records. ``torch.mm`` in float64 (cuBLAS's
DGEMM on a GPU, which uses the FP64 tensor cores where there are any) is the peer, measured in
the same run; FP64 has no datasheet peak in the course's table, so the records carry no ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_utils import env, plots, results, timing
from kernels.registry import Kernel, get_kernels, reference

LESSON = "byok"  # the records' key (lesson 08 before issue 24; now 09)
PEER = "torch.mm float64"


def size(device: str, quick: bool = False) -> int:
    """Square size: large enough on a GPU that the kernel, not the launch, is timed; tiny on the
    CPU, where Triton's interpreter runs each program as NumPy code."""
    if device == "cuda":
        return 1024 if quick else 4096
    return 48 if quick else 96


def problem(n: int, device: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn(n, n, device=device, dtype=torch.float64, generator=gen)
                 for _ in range(2))


def family(provider: str | None = None):
    """Metadata filter: the FP64 GEMM kernels (of one provider)."""
    return lambda k: (k.meta.get("family") == "fp64_gemm"
                      and (provider is None or k.provider == provider))


@dataclass(frozen=True)
class Point:
    """One kernel of a design space, timed on one problem."""

    kernel: Kernel
    n: int
    timing: timing.Timing | None  # None: the kernel cannot run the problem here
    reason: str | None = None

    @property
    def tflops(self) -> float | None:
        if self.timing is None:
            return None
        return timing.tflops(timing.matmul_flop(self.n, self.n, self.n), self.timing.median)

    def row(self, peer_tflops: float) -> dict:
        tf = self.tflops
        return {"kernel": self.kernel.label, "tile": "x".join(map(str, self.kernel.meta["tile"])),
                "threads": self.kernel.meta.get("threads"),
                "median": timing.format_ms(self.timing.median) if self.timing else None,
                "TFLOP/s": tf, f"vs {PEER}": tf / peer_tflops if tf else None,
                "note": self.reason or ""}


def peer_tflops(a: torch.Tensor, b: torch.Tensor, min_time_s: float = 0.2) -> float:
    t = timing.benchmark(reference("matmul"), a, b, name=PEER, min_time_s=min_time_s)
    return timing.tflops(timing.matmul_flop(a.shape[0], b.shape[1], a.shape[1]), t.median)


def autotune(a: torch.Tensor, b: torch.Tensor, where=None,
             min_time_s: float = 0.2) -> list[Point]:
    """Time every registered matmul kernel that passes ``where`` (default: the FP64 GEMMs) on
    ``a @ b``, with a progress bar. Kernels that cannot run it come back with their reason."""
    candidates = get_kernels("matmul", where=where or family())
    n = a.shape[0]

    def measure(kernel: Kernel) -> Point:
        if reason := kernel.supports(a, b):
            return Point(kernel, n, None, reason)
        kernel.load()  # the first call's compile is not part of the time
        return Point(kernel, n, timing.benchmark(kernel, a, b, name=kernel.name,
                                                 min_time_s=min_time_s))

    return timing.sweep(measure, candidates, desc=f"FP64 GEMM design space, n={n}")


def best(points: list[Point]) -> dict[str, Point]:
    """The fastest point of each provider."""
    winners: dict[str, Point] = {}
    for p in points:
        if p.tflops is not None and (p.kernel.provider not in winners
                                     or p.tflops > winners[p.kernel.provider].tflops):
            winners[p.kernel.provider] = p
    return winners


def plot(points: list[Point], peer: float, name: str = "fp64_gemm_autotune"):
    """TFLOP/s of each point of each design space, torch.mm float64 as a dashed line."""
    ran = [p for p in points if p.tflops is not None]
    n = points[0].n if points else 0
    fig, ax = plots.figure(f"FP64 GEMM n={n}: the design spaces on {env.device_info().name}",
                           ylabel="TFLOP/s")
    colors = {"triton": plots.color("triton"), "nvrtc": plots.color("nvrtc"),
              "cute_dsl": "#8c564b"}
    ax.bar([p.kernel.label for p in ran], [p.tflops for p in ran],
           color=[colors.get(p.kernel.provider, "#7f7f7f") for p in ran])
    ax.tick_params(axis="x", labelrotation=60)
    plots.ceiling(ax, peer, f"{PEER} (same run)")
    return fig, plots.save(fig, name)


def run(quick: bool = False) -> list[results.Record]:
    """Every FP64 GEMM that runs here against torch.mm float64: the committed records."""
    device = env.DEFAULT_DEVICE
    n = size(device, quick)
    a, b = problem(n, device)
    points = autotune(a, b)
    peer = peer_tflops(a, b)
    print(plots.stamped_table([p.row(peer) for p in points],
                              title=f"FP64 GEMM n={n} vs {PEER} ({peer:.3g} TFLOP/s)"))
    winners = best(points)
    records = [results.Record(lesson=LESSON, what=f"fp64 gemm {PEER} n={n}", value=peer,
                              unit="TFLOP/s")]
    for p in points:
        if p.tflops is None:
            continue
        tag = " (best of its design space)" if winners.get(p.kernel.provider) is p else ""
        records.append(results.Record(
            lesson=LESSON, what=f"fp64 gemm {p.kernel.label} n={n}{tag}", value=p.tflops,
            unit="TFLOP/s", peer=peer, peer_what=f"{PEER}, same run"))
    return records
