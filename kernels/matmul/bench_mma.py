"""Lesson 08's measurements: every ``mma.sync`` variant against its ceiling and its cuBLAS peer.

For each variant that this GPU runs, in one process:

* the instruction ceiling (:func:`kernels.matmul.ceiling.measure`, registers only, five
  repetitions: median and spread);
* the course's kernel (``mma.cu``) at 4096³ and 8192³, with the autotuned configuration, timed
  the way a caller calls it: the registered kernel (``kernels.get_kernel("matmul", "mma", v)``)
  back to back, beside the bare launch (``mma.launch``, operands prepared and output allocated
  once);
* the peer PyTorch offers for the same types: ``torch.mm`` (bf16, fp16, tf32), ``torch._int_mm``
  (int8), ``torch._scaled_mm`` (fp8; cuBLAS has no e5m2 x e5m2), none for int4.

:func:`caller_view` times bf16 at the shapes where a caller sees the difference: 1024³ and
2048³ (host cost shows), 8192×1024×8192 and 4000³ (not square, not tile multiples), each call
back to back and one call between CUDA events (a student's timer), beside cuBLAS timed the same
two ways.

Notebook 08 calls :func:`measure`, :func:`caller_view` and :func:`plot`; ``make bench`` calls
:func:`run`, whose records the notebook shows (:func:`recorded`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import torch

import kernels
from course_utils import env, plots, results, sanitizer, timing
from kernels.matmul import autotune, ceiling, mma

LESSON = "mma_variants"  # the records' key (lesson 07 before issue 24 split it; now 06)
SIZES = (4096, 8192)
# where a caller sees host cost (small), and shapes that are not square or not tile multiples
CALLER_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                 (8192, 8192, 8192), (8192, 1024, 8192), (4000, 4000, 4000))
# what lesson 07's story needs measured live; `make bench` measures every variant
STORY = tuple(name for name in ("bf16", "fp16", "fp16_f16acc", "tf32", "int8", "fp8_e4m3_e4m3")
              if name in mma.VARIANTS)  # (a torch without float8 has no fp8 variants)


# the census cells: which tensor-core instructions each architecture's compiler emits. Small
# tiles compile fastest, and the instruction mix per k-step does not depend on the tile.
CENSUS_ARCHS = ("sm_80", "sm_89", "sm_90", "sm_120")
CENSUS_CONFIG = mma.Config(bm=64, bn=64, wm=32, wn=32, bk_bytes=64, stages=2)
CENSUS_VARIANTS = tuple(name for name in ("bf16", "int8", "int4", "fp8_e4m3_e4m3",
                                          "fp8_e4m3_e4m3_f16acc") if name in mma.VARIANTS)
# lesson 07's Nsight Compute comparison: the tuned tile against the same tile run by 16 warps of
# 64x32 (twice the warps, half the registers each)
SIXTEEN_WARPS = mma.Config(bm=256, bn=128, wm=64, wn=32, bk_bytes=64, stages=3)


def census_archs() -> list[str]:
    """The census architectures this NVRTC compiles for."""
    from course_utils import nvrtc

    return [arch for arch in CENSUS_ARCHS if arch in nvrtc.supported_archs()]


def compile_census() -> dict[tuple[str, str], object]:
    """Every census variant for every architecture that has its instruction, all compiled at
    once in parallel threads: ``{(variant, arch): nvrtc.Compiled}``."""
    jobs = [(name, CENSUS_CONFIG, arch) for arch in census_archs() for name in CENSUS_VARIANTS
            if mma.arch_capability(arch) >= mma.VARIANTS[name].min_sm]
    return dict(zip([(name, arch) for name, _, arch in jobs], mma.compile_many(jobs),
                    strict=True))


def compile_measured(variants, sizes) -> None:
    """Compile what :func:`measure` times (each variant's ceilings and its tuned configuration
    per size) in parallel, so that the measuring does not wait for one compile after another
    (cached ones cost nothing)."""
    chosen = [mma.variant(v) for v in variants]
    ceiling.compile_ceilings(chosen)
    mma.compile_many([(v, autotune.best_config(family(v), (n, n, n)))
                      for v in chosen for n in sizes])


def lecture_programs() -> int:
    """Compile every program the cells of lessons 07 and 08 compile on this machine (``make
    prepare``, so that a lecture finds them cached): the steps' census (05), mma.cu's census,
    the story's variants at 4096 with their ceilings, the two profiled configurations at 8192
    (06). Returns how many."""
    from kernels.matmul import steps

    census = compile_census()
    arch = env.device_info().arch or "sm_90"  # notebook 07's ARCH: its census of the steps
    step_census = [steps.compile_step(variant, torch.bfloat16, arch=arch, verbose=False)
                   for variant in steps.STEPS]
    cap = torch.cuda.get_device_capability() if env.HAS_CUDA else None
    story = [v for v in STORY if mma.gpu_reason(v, cap) is None]
    compile_measured(story, (4096,))
    profiled = mma.compile_many([("bf16", autotune.best_config("bf16", (8192,) * 3)),
                                 ("bf16", SIXTEEN_WARPS)])
    return len(census) + len(step_census) + 2 * len(story) + len(profiled)


def family(v: mma.Variant) -> str:
    """The variant whose tuning this one uses (:func:`kernels.matmul.autotune.family`)."""
    return autotune.family(v)


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
    rate: float  # TFLOP/s or TOP/s, median call of the registered kernel, back to back
    bare: float  # the same, mma.launch on prepared operands (no checks, no allocation)
    ceiling: float  # the instruction's, same run (median of repetitions)
    ceiling_spread: float  # (max - min) / median of the ceiling's repetitions
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
        return {"variant": self.variant, "n": self.n, "registry call": round(self.rate, 1),
                "bare launch": round(self.bare, 1), "unit": self.unit,
                "ceiling": round(self.ceiling, 1), "spread": f"{self.ceiling_spread:.1%}",
                "of ceiling": f"{self.of_ceiling:.2f}",
                "peer": round(self.peer, 1) if self.peer else "none",
                "of peer": f"{self.of_peer:.2f}" if self.of_peer else "n/a",
                "config": self.config}


def measure(variants=None, sizes=SIZES, tune: bool = True) -> list[Point]:
    """Ceiling, kernel (registered call and bare launch) and peer for each variant this GPU
    runs (a progress bar per tuning)."""
    cap = torch.cuda.get_device_capability()
    chosen = [mma.variant(v) for v in (variants or mma.VARIANTS)]
    chosen = [v for v in chosen if mma.gpu_reason(v, cap) is None]
    if tune:  # compiles are cached, so the second size costs only the timing
        for name in dict.fromkeys(family(v) for v in chosen):
            for n in sizes:
                trials = autotune.tune(name, n, n, n)
                print(f"tuned {name} at {n}: " + ", ".join(
                    f"{t.config.short()} {t.rate:.0f}" for t in trials[:3]))
    compile_measured(chosen, sizes)
    points = []
    for v in timing.progress(chosen, "variants"):
        top = ceiling.measure(v)
        for n in sizes:
            config = autotune.best_config(family(v), (n, n, n))
            a, b = autotune.operands(v, n, n, n)
            packed_a, bt = mma.prepare(v, a, b)
            out = torch.empty(n, n, dtype=v.out, device="cuda")
            flop = timing.matmul_flop(n, n, n)
            bare = timing.benchmark(mma.launch, v, packed_a, bt, out, config, name=v.name)
            called = timing.benchmark(kernels.get_kernel("matmul", "mma", v.name), a, b,
                                     name=f"{v.name} registry")
            found = peer(v, a, b)
            peer_rate = None
            if found:
                peer_rate = timing.tflops(flop, timing.benchmark(found[1], device="cuda").median)
            points.append(Point(v.name, n, timing.tflops(flop, called.median),
                                timing.tflops(flop, bare.median), top.rate, top.spread,
                                peer_rate, found[0] if found else None, config.short(), v.unit))
    return points


@dataclass(frozen=True)
class CallerPoint:
    shape: tuple[int, int, int]
    back_to_back: float  # TFLOP/s, registered kernel, calls queued back to back
    one_call: float  # TFLOP/s, one call between CUDA events, GPU idle before it
    bare: float  # TFLOP/s, mma.launch back to back on prepared operands
    cublas: float  # torch.mm back to back
    cublas_one_call: float  # torch.mm, one call between events

    def row(self) -> dict:
        m, n, k = self.shape
        return {"shape": f"{m}x{n}x{k}", "registry, back to back": round(self.back_to_back, 1),
                "registry, one call": round(self.one_call, 1), "bare launch": round(self.bare, 1),
                "cuBLAS, back to back": round(self.cublas, 1),
                "cuBLAS, one call": round(self.cublas_one_call, 1),
                "one call ÷ cuBLAS one call": f"{self.one_call / self.cublas_one_call:.2f}"}


def caller_view(shapes=CALLER_SHAPES, v: str = "bf16") -> list[CallerPoint]:
    """The registered kernel timed as callers time it, beside the bare launch and cuBLAS."""
    v = mma.variant(v)
    kernel = kernels.get_kernel("matmul", "mma", v.name)
    points = []
    for m, n, k in timing.progress(list(shapes), f"{v.name} as a caller calls it"):
        a = (torch.randn(m, k, device="cuda") / k**0.25).to(v.a)
        b = (torch.randn(n, k, device="cuda") / k**0.25).to(v.b).t()  # column-major
        out = torch.empty(m, n, dtype=v.out, device="cuda")
        config = autotune.best_config(v.name, (m, n, k))
        flop = timing.matmul_flop(m, n, k)
        rate = lambda t, f=flop: timing.tflops(f, t.median)  # noqa: E731
        packed_a, bt = mma.prepare(v, a, b)
        points.append(CallerPoint(
            (m, n, k), rate(timing.benchmark(kernel, a, b, name="registry")),
            rate(timing.one_call(kernel, a, b, name="registry, one call")),
            rate(timing.benchmark(mma.launch, v, packed_a, bt, out, config, name="bare")),
            rate(timing.benchmark(torch.mm, a, b, name="cuBLAS")),
            rate(timing.one_call(torch.mm, a, b, name="cuBLAS, one call"))))
    return points


def recorded(lesson: str = LESSON) -> tuple[str | None, list[dict]]:
    """``(device, records)``: ``make bench``'s records of ``lesson`` from ``docs/results/``,
    this GPU's if it has some, else the first GPU's that has (for a machine without one)."""
    mine = env.RESULTS_DIR / f"{env.device_slug()}.json"
    for path in [mine, *sorted(env.RESULTS_DIR.glob("*.json"))]:
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        found = [r for r in data.get("records", []) if r["lesson"] == lesson]
        if found:
            stamp = data.get("environments", {}).get(lesson, data.get("environment", {}))
            return stamp.get("device"), found
    return None, []


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
        print("lesson 07 benchmark: needs a CUDA GPU; nothing measured")
        return []
    points = measure(sizes=(4096,) if quick else SIZES, tune=not quick)
    print(plots.stamped_table([p.row() for p in points], "mma.sync variants"))
    records: list[results.Record | results.Note] = []
    for p in points:
        peer_fields = ({"peer": round(p.peer, 1), "peer_what": f"{p.peer_what}, same run"}
                       if p.peer else {})
        ceiling_fields = {"ceiling": round(p.ceiling, 1),
                          "ceiling_what": f"mma.sync ceiling, same run (median of 5, spread "
                                          f"{p.ceiling_spread:.1%})"}
        records.append(results.Record(
            LESSON, f"mma {p.variant} {p.n}^3 ({p.config}), registered kernel, back to back",
            round(p.rate, 1), p.unit, **ceiling_fields, **peer_fields))
        records.append(results.Record(
            LESSON, f"mma {p.variant} {p.n}^3 ({p.config}), bare launch",
            round(p.bare, 1), p.unit, **ceiling_fields, **peer_fields))
    if note := ceiling_changes(points, recorded()[1] if recorded()[0] == env.device_info().name
                               else []):
        records.append(results.Note(LESSON, note))
        print(note)
    unstable = [p for p in points if p.ceiling_spread > ceiling.MAX_SPREAD]
    if unstable:
        records.append(results.Note(LESSON, "Ceilings whose five repetitions spread more than "
                                    f"{ceiling.MAX_SPREAD:.0%}: " + ", ".join(
                                        f"{p.variant} {p.ceiling_spread:.1%}" for p in unstable)
                                    + ". Measure them again on a quiet GPU."))
    shapes = CALLER_SHAPES[:3] if quick else CALLER_SHAPES
    view = caller_view(shapes)
    print(plots.stamped_table([c.row() for c in view], "bf16 as a caller calls it (TFLOP/s)"))
    for c in view:
        m, n, k = c.shape
        for how, value, cublas in (("back to back", c.back_to_back, c.cublas),
                                   ("one call between CUDA events", c.one_call,
                                    c.cublas_one_call)):
            records.append(results.Record(
                LESSON, f"mma bf16 {m}x{n}x{k}, registered kernel, {how}", round(value, 1),
                "TFLOP/s", ceiling=round(c.bare, 1),
                ceiling_what="bare launch of the same kernel, back to back, same run",
                peer=round(cublas, 1), peer_what=f"torch.mm (cuBLAS), {how}, same run"))
    if sanitizer.path():
        records.append(results.Note(LESSON, sanitize_note()))
    return records


def ceiling_changes(points: list[Point], before: list[dict], limit: float = 0.10) -> str | None:
    """A note for the results file on every ceiling that moved more than ``limit`` from the
    committed records of this GPU (``before``), with what this run knows about it: its own
    spread, and the kernel's rate against that ceiling both times."""
    old = {}
    for r in before:
        words = r["what"].split()
        if r.get("ceiling") and len(words) > 1 and words[0] == "mma":
            old.setdefault(words[1], r["ceiling"])
    lines = []
    for p in {p.variant: p for p in points}.values():
        if p.variant not in old or abs(p.ceiling / old[p.variant] - 1) <= limit:
            continue
        lines.append(f"* {p.variant}: ceiling {p.ceiling:.0f} {p.unit} in this run (five "
                     f"repetitions, spread {p.ceiling_spread:.1%}) against {old[p.variant]:.0f} "
                     f"committed before ({p.ceiling / old[p.variant] - 1:+.0%}). "
                     + ("This run's repetitions agree, so the earlier figure was likely taken "
                        "on a shared or throttled GPU." if p.ceiling_spread <= ceiling.MAX_SPREAD
                        else "This run's repetitions disagree too: measure again on a quiet "
                        "GPU before trusting either."))
    if not lines:
        return None
    return ("Ceilings that moved more than 10% from the previously committed results of this "
            "GPU:\n\n" + "\n".join(lines))


def sanitize_note() -> str:
    """compute-sanitizer memcheck and racecheck on every variant (kernels/matmul/sanitize_mma)."""
    start = time.perf_counter()
    runs = sanitizer.run_all(("memcheck", "racecheck"), "kernels.matmul.sanitize_mma")
    lines = [f"    $ {run.command}\n    {run.summary_line}   (exit {run.returncode})"
             for run in runs]
    lines.append(f"    (both at once: {time.perf_counter() - start:.0f} s)")
    print("\n".join(lines))
    return ("compute-sanitizer on every mma.sync variant this GPU runs (one configuration, "
            "edge tiles on both sides, 1x1, outputs poisoned):\n\n" + "\n".join(lines))
