"""Lesson 05's measurements: every ``mma.sync`` variant against its ceiling and its cuBLAS peer.

For each variant that this GPU runs, in one process:

* the instruction ceiling (:func:`kernels.matmul.ceiling.mma_ceiling`, registers only);
* the course's kernel (``mma.cu``) at 4096³ and 8192³, with the autotuned configuration;
* the peer PyTorch offers for the same types: ``torch.mm`` (bf16, fp16, tf32), ``torch._int_mm``
  (int8), ``torch._scaled_mm`` (fp8; cuBLAS has no e5m2 x e5m2), none for int4.

Notebook 05 calls :func:`measure` and :func:`plot`; ``make bench`` calls :func:`run`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from course_utils import env, plots, results, sanitizer, timing
from kernels.matmul import autotune, ceiling, mma

LESSON = "05_mma_matmul"
SIZES = (4096, 8192)
# tuned once per family: the fp8 pairings share code and differ only in the instruction's types
TUNED = {"bf16": "bf16", "fp16": "fp16", "fp16_f16acc": "fp16_f16acc", "tf32": "tf32",
         "int8": "int8", "int4": "int4"}


def family(v: mma.Variant) -> str:
    if v.name.startswith("fp8"):
        return "fp8_e4m3_e4m3_f16acc" if v.acc == "f16" else "fp8_e4m3_e4m3"
    return TUNED[v.name]


def peer(v: mma.Variant, a: torch.Tensor, b: torch.Tensor):
    """(name, callable) of PyTorch's own matmul for these types, or None where it has none."""
    if v.name in ("bf16", "fp16", "fp16_f16acc"):
        return "torch.mm (cuBLAS)", lambda: torch.mm(a, b)
    if v.name == "tf32":
        def tf32():
            allow = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return torch.mm(a, b)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = allow
        return "torch.mm tf32 (cuBLAS)", tf32
    if v.name == "int8":
        return "torch._int_mm (cuBLAS)", lambda: torch._int_mm(a, b)
    if v.name.startswith("fp8"):
        one = torch.ones((), device=a.device)
        call = lambda: torch._scaled_mm(a, b, one, one, out_dtype=v.out)  # noqa: E731
        try:
            call()
        except (RuntimeError, ValueError):  # cuBLAS has no e5m2 x e5m2 kernel
            return None
        return "torch._scaled_mm (cuBLAS)", call
    return None


@dataclass(frozen=True)
class Point:
    variant: str
    n: int
    rate: float  # TFLOP/s or TOP/s, median call
    ceiling: float  # the instruction's, same run
    peer: float | None
    peer_what: str | None
    config: str
    unit: str

    @property
    def of_ceiling(self) -> float:
        return self.rate / self.ceiling

    @property
    def of_peer(self) -> float | None:
        return self.rate / self.peer if self.peer else None

    def row(self) -> dict:
        return {"variant": self.variant, "n": self.n, "rate": round(self.rate, 1),
                "unit": self.unit,
                "ceiling": round(self.ceiling, 1), "of ceiling": f"{self.of_ceiling:.2f}",
                "peer": round(self.peer, 1) if self.peer else "none",
                "of peer": f"{self.of_peer:.2f}" if self.of_peer else "n/a",
                "config": self.config}


def measure(variants=None, sizes=SIZES, tune: bool = True) -> list[Point]:
    """Ceiling, kernel and peer for each variant this GPU runs (a progress bar per tuning)."""
    cap = torch.cuda.get_device_capability()
    chosen = [mma.variant(v) for v in (variants or mma.VARIANTS)]
    chosen = [v for v in chosen if mma.gpu_reason(v, cap) is None]
    if tune:  # compiles are cached, so the second size costs only the timing
        for name in dict.fromkeys(family(v) for v in chosen):
            for n in sizes:
                trials = autotune.tune(name, n, n, n)
                print(f"tuned {name} at {n}: " + ", ".join(
                    f"{t.config.short()} {t.rate:.0f}" for t in trials[:3]))
    points = []
    for v in timing.progress(chosen, "variants"):
        top = ceiling.mma_ceiling(v)
        for n in sizes:
            config = autotune.best_config(family(v), (n, n, n))
            a, b = autotune.operands(v, n, n, n)
            packed_a, bt = mma.prepare(v, a, b)
            out = torch.empty(n, n, dtype=v.out, device="cuda")
            flop = timing.matmul_flop(n, n, n)
            t = timing.benchmark(mma.launch, v, packed_a, bt, out, config, name=v.name)
            found = peer(v, a, b)
            peer_rate = None
            if found:
                peer_rate = timing.tflops(flop, timing.benchmark(found[1], device="cuda").median)
            points.append(Point(v.name, n, timing.tflops(flop, t.median), top, peer_rate,
                                found[0] if found else None, config.short(), v.unit))
    return points


def plot(points: list[Point], n: int = 8192, name: str = "mma_variants"):
    """Bars: each variant's rate, its instruction ceiling as a tick above it, its peer as a dot."""
    pts = [p for p in points if p.n == n]
    fig, ax = plots.figure(f"mma.sync matmul {n}³ on {env.device_info().name}",
                           xlabel="variant", ylabel="TFLOP/s (TOP/s for int)")
    xs = range(len(pts))
    ax.bar(xs, [p.rate for p in pts], color="#1f77b4", label="mma.cu (this course)")
    ax.scatter(xs, [p.ceiling for p in pts], marker="_", s=400, color="k",
               label="mma.sync ceiling, same run")
    ax.scatter([x for x, p in zip(xs, pts, strict=True) if p.peer],
               [p.peer for p in pts if p.peer], marker="o", color="#d62728",
               label="cuBLAS peer, same run")
    ax.set_xticks(list(xs), [p.variant for p in pts], rotation=60, ha="right", fontsize=8)
    plots.legend_outside(ax, fontsize=8)
    return fig, plots.save(fig, name)


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if not env.HAS_CUDA:
        print("lesson 05 benchmark: needs a CUDA GPU; nothing measured")
        return []
    points = measure(sizes=(4096,) if quick else SIZES, tune=not quick)
    print(plots.stamped_table([p.row() for p in points], "mma.sync variants"))
    records: list[results.Record | results.Note] = []
    for p in points:
        records.append(results.Record(
            LESSON, f"mma {p.variant} {p.n}^3 ({p.config})", round(p.rate, 1), p.unit,
            ceiling=round(p.ceiling, 1), ceiling_what="mma.sync ceiling, same run",
            **({"peer": round(p.peer, 1), "peer_what": f"{p.peer_what}, same run"}
               if p.peer else {})))
    if sanitizer.path():
        records.append(results.Note(LESSON, sanitize_note()))
    return records


def sanitize_note() -> str:
    """compute-sanitizer memcheck and racecheck on every variant (kernels/matmul/sanitize_mma)."""
    lines = []
    for tool in ("memcheck", "racecheck"):
        start = time.perf_counter()
        command, summary, status = sanitizer.run(tool, "kernels.matmul.sanitize_mma")
        lines.append(f"    $ {command}\n    {summary}   (exit {status}, "
                     f"{time.perf_counter() - start:.0f} s)")
        print(lines[-1])
    return ("compute-sanitizer on every mma.sync variant this GPU runs (one configuration, "
            "edge tiles on both sides, 1x1, outputs poisoned):\n\n" + "\n".join(lines))
