"""The course on two figures, drawn from the records of one GPU on any machine.

* :func:`roofline`: every kernel the course measured on that GPU, at its arithmetic intensity
  (FLOP per byte of DRAM traffic) and its achieved TFLOP/s, under the copy bandwidth and the
  compute ceilings the records hold. Memory-bound kernels (GeLU, softmax) sit at a few FLOP per
  byte, left of the ridge; the matmuls at thousands, right of it.
* :func:`staircase`: bf16 matmul at 4096³, from one thread per output (lesson 07, step 1) to
  the warp-specialised ``wgmma`` kernel (lesson 16, step 4), values on the bars, cuBLAS dashed.

    recorded = claims.load()            # docs/results/nvidia-h100-80gb-hbm3.json
    course_map.roofline(recorded); course_map.staircase(recorded)
    python -m kernels.course_map --out docs/figures   # both, as PNG (e.g. for the README)

Where the records lack a lesson the figure says which, and which benchmark records it.

Napkin counts (the same as lesson 02's): GeLU (tanh form) ≈ 10 FLOP per element, softmax ≈ 5;
a matmul 2·M·N·K FLOP on (M·K + K·N + M·N) elements. A fused kernel moves each element once in
and once out; the hand-written ("manual") versions move more, counted here by running them on a
small CPU tensor and adding up the bytes every ATen op reads and writes.
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course_utils import claims, env, plots, syllabus
from course_utils.claims import Recorded
from kernels.matmul import bench_steps
from kernels.recorded_figures import (
    GELU_LESSON,
    GELU_WHAT,
    SOFTMAX_LESSON,
    SOFTMAX_WHAT,
    SWEEP_LESSON,
    SWEEP_WHAT,
)

FLOP_PER_ELEMENT = {"gelu": 10, "softmax": 5}
BYTES = {"float64": 8, "fp64": 8, "float32": 4, "tf32": 4, "bfloat16": 2, "bf16": 2,
         "float16": 2, "fp16": 2, "fp16_f16acc": 2}
# the record keys of the lessons the figures draw (docs/results/*.json)
MMA_LESSON, BYO_LESSON, HOPPER_LESSON = "mma_variants", "byok", "hopper_matmul"


def _legend(key: str) -> str:
    """What a figure's legend calls a record key: the notebook that teaches it."""
    return syllabus.lesson(key).stem


MMA_WHAT = re.compile(r"^mma (?P<variant>\w+) (?P<n>\d+)\^3 \(.*\), registered kernel, "
                      r"back to back$")
BYO_WHAT = re.compile(r"^fp64 gemm (?P<kernel>.+?) n=(?P<n>\d+)(?P<best> \(best of its design "
                      r"space\))?$")
HOPPER_WHAT = re.compile(r"^bf16 (?P<step>step\d|Triton|05 mma\.sync)[^^]* (?P<n>\d+)\^3$")
WHERE = {SWEEP_LESSON: "kernels/matmul/bench.py", SOFTMAX_LESSON: "kernels/softmax/bench.py",
         GELU_LESSON: "kernels/gelu/bench.py", MMA_LESSON: "kernels/matmul/bench_mma.py",
         BYO_LESSON: "kernels/matmul/fp64/bench.py", HOPPER_LESSON:
         "kernels/matmul/hopper/bench.py", bench_steps.LESSON: "kernels/matmul/bench_steps.py",
         # the model's records are whole training steps (ms, MiB, loss): no point on the roofline
         "model": "kernels/model/bench.py",
         # the collectives and training steps on 2 GPUs: no point either
         "distributed": "kernels/distributed/collectives.py"}


@dataclass(frozen=True)
class Point:
    """One kernel on the roofline."""

    lesson: str
    label: str
    intensity: float  # FLOP per byte of DRAM traffic
    tflops: float
    memory_bound: bool


# -- bytes moved by the hand-written versions ------------------------------------------------------


class _BytesMoved(TorchDispatchMode):
    """Adds up the bytes of the tensors every ATen op inside the block reads and writes."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = [t for t in tree_flatten((args, kwargs, out))[0]
                   if isinstance(t, torch.Tensor) and t.numel() > 1]
        self.total += sum(t.numel() * t.element_size() for t in tensors)
        return out


@functools.cache
def traffic_ratio(op: str, dtype: str) -> float:
    """Bytes the hand-written ``op`` moves, as a multiple of one fused pass (read + write once),
    counted on a small CPU tensor of ``dtype``."""
    from kernels.registry import get_kernel

    if op not in FLOP_PER_ELEMENT:
        raise ValueError(f"op expected one of {', '.join(FLOP_PER_ELEMENT)}, got {op!r}")
    x = torch.randn(64, 1000).to(getattr(torch, dtype))
    with _BytesMoved() as counted:
        get_kernel(op, "manual")(x)
    return counted.total / (2 * x.numel() * x.element_size())


# -- where each record sits ----------------------------------------------------------------------


def _memory_point(lesson: str, op: str, kernel: str, dtype: str, gbs: float) -> Point:
    """A memory-bound kernel whose record is GB/s over one fused pass (2 × elements × size)."""
    per_byte = FLOP_PER_ELEMENT[op] / (2 * BYTES[dtype])  # FLOP per byte of one fused pass
    traffic = traffic_ratio(op, dtype) if kernel == "manual" else 1.0
    return Point(lesson, f"{op} {kernel}", per_byte / traffic, gbs * per_byte / 1e3, True)


def matmul_intensity(m: int, n: int, k: int, dtype: str) -> float:
    """FLOP per byte of a matmul that reads A and B once and writes C once."""
    return 2 * m * n * k / ((m * k + k * n + m * n) * BYTES[dtype])


def _matmul_point(lesson: str, label: str, n: int, dtype: str, tflops: float) -> Point:
    return Point(lesson, label, matmul_intensity(n, n, n, dtype), tflops, False)


def points(recorded: Recorded, lessons: tuple[str, ...] | None = None) -> list[Point]:
    """Every kernel of ``lessons`` (all by default) that ``recorded`` holds, one point each:
    GeLU at float32 2^28, softmax at its longest recorded rows below 16K columns, each with its
    peer; lesson 01's matmuls at their largest n; lesson 08's bf16/tf32 kernels (mma.cu) at
    8192³; lesson 11's best FP64 GEMMs and torch.mm; lesson 16's first and last steps at 8192³
    and cuBLAS; lesson 07's first steps at 4096³ where recorded."""
    want = set(lessons or WHERE)
    found: list[Point] = []
    if GELU_LESSON in want:
        for r in recorded.of(GELU_LESSON):
            if (m := GELU_WHAT.match(r.what)) and m["dtype"] == "float32":
                found.append(_memory_point(GELU_LESSON, "gelu", m["kernel"], "float32", r.value))
                peer = _memory_point(GELU_LESSON, "gelu", "eager", "float32", r.peer)
        if any(p.lesson == GELU_LESSON for p in found):
            found.append(peer)
    if SOFTMAX_LESSON in want:
        rows = [(SOFTMAX_WHAT.match(r.what), r) for r in recorded.of(SOFTMAX_LESSON)]
        rows = [(m, r) for m, r in rows if m and m["dtype"] == "float32"]
        if rows:
            cols = max((int(m["cols"]) for m, _ in rows if int(m["cols"]) <= 8192),
                       default=max(int(m["cols"]) for m, _ in rows))
            at = [(m, r) for m, r in rows if int(m["cols"]) == cols]
            found += [_memory_point(SOFTMAX_LESSON, "softmax", m["kernel"], "float32", r.value)
                      for m, r in at]
            found.append(_memory_point(SOFTMAX_LESSON, "softmax", "eager", "float32",
                                       at[0][1].peer))
    if SWEEP_LESSON in want:
        largest: dict[str, tuple[int, float]] = {}
        for r in recorded.of(SWEEP_LESSON):
            if (m := SWEEP_WHAT.match(r.what)) and int(m["n"]) >= largest.get(m["dtype"],
                                                                               (0, 0))[0]:
                largest[m["dtype"]] = (int(m["n"]), r.value)
        found += [_matmul_point(SWEEP_LESSON, f"torch.matmul {d}", n, d, v)
                  for d, (n, v) in largest.items()]
    if bench_steps.LESSON in want:
        for r in recorded.of(bench_steps.LESSON):
            step, n = r.what.split(" ")[1], int(r.what.split(" ")[2].removesuffix("^3"))
            if step != bench_steps.FULL_KERNEL:  # lesson 07's full kernel comes from its own
                found.append(_matmul_point(bench_steps.LESSON, f"step {step}", n, "bf16",
                                           r.value))
    if MMA_LESSON in want:
        for r in recorded.of(MMA_LESSON):
            if (m := MMA_WHAT.match(r.what)) and m["n"] == "8192" and m["variant"] in (
                    "bf16", "tf32"):
                found.append(_matmul_point(MMA_LESSON, f"mma.sync {m['variant']}", 8192,
                                           m["variant"], r.value))
    if BYO_LESSON in want:
        for r in recorded.of(BYO_LESSON):
            if m := BYO_WHAT.match(r.what):
                if m["best"] or "torch.mm" in m["kernel"]:
                    label = m["kernel"].replace(" fp64", "").split(" ")[0]
                    found.append(_matmul_point(BYO_LESSON, f"fp64 {label}", int(m["n"]),
                                               "fp64", r.value))
    if HOPPER_LESSON in want:
        steps = [(HOPPER_WHAT.match(r.what), r) for r in recorded.of(HOPPER_LESSON)]
        # the first and the last step (the staircase shows every one), and cuBLAS
        steps = [(m, r) for m, r in steps if m and m["n"] == "8192" and ": " in r.what
                 and m["step"] in ("step1", "step4")]
        found += [_matmul_point(HOPPER_LESSON, f"wgmma {m['step']}", 8192, "bf16", r.value)
                  for m, r in steps]
        if steps:
            found.append(_matmul_point(HOPPER_LESSON, "cuBLAS bf16", 8192, "bf16",
                                       steps[0][1].peer))
    return found


def missing(recorded: Recorded, lessons: tuple[str, ...] | None = None) -> list[str]:
    """The lessons of ``lessons`` (all by default) that ``recorded`` has no records of."""
    return [lesson for lesson in (lessons or WHERE) if not recorded.of(lesson)]


def _missing_note(recorded: Recorded, lessons) -> str | None:
    gone = missing(recorded, lessons)
    if not gone:
        return None
    return (f"no records here of {', '.join(gone)}: `make bench` on this GPU records them "
            f"({', '.join(WHERE[g] for g in gone)})")


# -- the figures ---------------------------------------------------------------------------------


def _copy_bandwidth(recorded: Recorded) -> tuple[float | None, str]:
    measured = [r.ceiling for r in recorded.records if r.unit == "GB/s" and r.ceiling]
    if measured:
        return statistics.median(measured), "copy bandwidth (measured)"
    datasheet = env.peaks_for(recorded.device).get("bandwidth_gbs")
    return datasheet, "memory bandwidth (datasheet)"


def _compute_roofs(recorded: Recorded) -> list[tuple[float, str]]:
    """Measured instruction ceilings in the records (wgmma, mma.sync bf16), else datasheet."""
    roofs = []
    for r in recorded.of(HOPPER_LESSON):
        if r.what.startswith("wgmma bf16 instruction ceiling"):
            roofs.append((r.value, "wgmma bf16 ceiling (measured)"))
    mma = [r for r in recorded.of(MMA_LESSON) if r.what.startswith("mma bf16 ") and r.ceiling]
    if mma:
        roofs.append((mma[0].ceiling, "mma.sync bf16 ceiling (measured)"))
    peaks = env.peaks_for(recorded.device)
    for dtype in ("bfloat16", "float32"):
        if peaks.get(dtype) and (dtype != "bfloat16" or not roofs):
            roofs.append((peaks[dtype], f"{dtype} datasheet peak"))
    return roofs


def _column_labels(ax, found: list[Point], gap: float = 1.45) -> None:
    """Label points that crowd one intensity (the matmuls) in a column to their right, each
    label at least ``gap`` times above the one below it (log axis) and joined to its point;
    the y axis grows to hold the top one."""
    y = 0.0
    for p in sorted(found, key=lambda p: p.tflops):
        y = max(p.tflops, y * gap)
        ax.annotate(p.label, xy=(p.intensity, p.tflops), xytext=(2 ** 13.2, y), fontsize=7,
                    va="center", bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.5},
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#999999"})
    low, high = ax.get_ylim()
    ax.set_ylim(low, max(high, y * gap))


LESSON_COLORS = {SWEEP_LESSON: "#7f7f7f", SOFTMAX_LESSON: "#9467bd", GELU_LESSON: "#2ca02c",
                 bench_steps.LESSON: "#bcbd22", MMA_LESSON: "#d62728", BYO_LESSON: "#8c564b",
                 HOPPER_LESSON: "#1f77b4"}


def roofline(recorded: Recorded, lessons: tuple[str, ...] | None = None, title: str | None = None):
    """Every kernel of ``lessons`` (all by default) on one roofline, from ``recorded``."""
    found = points(recorded, lessons)
    if not found:
        raise ValueError(f"recorded expected records of {', '.join(lessons or WHERE)} in "
                         f"{recorded.slug}.json, got none")
    bandwidth, bandwidth_label = _copy_bandwidth(recorded)
    roofs = _compute_roofs(recorded) or [(max(p.tflops for p in found), "fastest kernel")]
    fig, ax = plots.figure(title or f"The course's kernels on {recorded.device}: roofline from "
                           "the records", xlabel="arithmetic intensity (FLOP per DRAM byte)",
                           ylabel="TFLOP/s", figsize=(10, 6))
    xs = [2 ** (k / 4) for k in range(-24, 57)]
    if bandwidth:
        top = max(v for v, _ in roofs)
        ax.plot(xs, [min(top, x * bandwidth / 1e3) for x in xs], color="black", lw=1.5)
        ax.annotate(f"{bandwidth_label}: {bandwidth:,.0f} GB/s", xy=(xs[6], xs[6] * bandwidth
                                                                       / 1e3), fontsize=8,
                    rotation=22, xytext=(0, 6), textcoords="offset points")
    for value, label in roofs:
        plots.ceiling(ax, value, label)  # labels on the left, clear of the matmuls' labels
    for lesson in dict.fromkeys(p.lesson for p in found):
        mine = [p for p in found if p.lesson == lesson]
        ax.scatter([p.intensity for p in mine], [p.tflops for p in mine], zorder=3,
                   color=LESSON_COLORS.get(lesson), label=_legend(lesson),
                   marker="s" if mine[0].memory_bound else "o")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(2 ** -5, 2 ** 17)  # room on the right for the matmuls' labels
    plots.legend_outside(ax, title="lesson")
    plots.label_points(ax, [(p.intensity, p.tflops, p.label) for p in found if p.memory_bound])
    _column_labels(ax, [p for p in found if not p.memory_bound])
    notes = [f"recorded by make bench on {recorded.environment_line(found[0].lesson)} "
             f"(docs/results/{recorded.slug}.json)"]
    if note := _missing_note(recorded, lessons):
        notes.append(note)
    plots.note(fig, "\n".join(notes))
    return fig


def stairs(recorded: Recorded, size: int = bench_steps.SIZE) -> list[tuple[str, float, float]]:
    """``(label, TFLOP/s, fraction of cuBLAS of the same run)`` for every stair the records
    hold at ``size``³ bf16, in the order of the climb: lesson 07's steps, lesson 08's kernel
    (mma.cu), then lesson 16's steps (its own run's mma.sync kernel stands for mma.cu's where it
    has one)."""
    found = []
    for r in recorded.of(bench_steps.LESSON):
        step = r.what.split(" ")[1]
        if r.what == bench_steps.what(step, size) and step != bench_steps.FULL_KERNEL:
            found.append((f"{_STEPS} {step.replace('_', ' ', 1)}", r.value, r.value / r.peer))
    mma_05 = [r for r in recorded.of(HOPPER_LESSON) if r.what == f"bf16 mma.sync (mma.cu) "
              f"{size}^3"] or [r for r in recorded.of(bench_steps.LESSON)
                               if r.what == bench_steps.what(bench_steps.FULL_KERNEL, size)]
    found += [(f"{_MMA} mma.cu", r.value, r.value / r.peer) for r in mma_05[:1]]
    for r in recorded.of(HOPPER_LESSON):
        if (m := HOPPER_WHAT.match(r.what)) and m["n"] == str(size) and ": " in r.what \
                and m["step"].startswith("step"):
            found.append((f"{_HOPPER} {m['step']}", r.value, r.value / r.peer))
    return found


# the stairs are labelled by the number of the lesson that teaches them
_STEPS, _MMA, _HOPPER = (syllabus.BY_SLUG[s].label for s in ("mma_matmul", "mma_variants",
                                                                "hopper_matmul"))
_STAIR_WORDS = {f"{_STEPS} 1 naive": "one thread per output",
                f"{_STEPS} 4 smem": "shared-memory tiles",
                f"{_STEPS} 7 smem_4x4": "4x4 outputs a thread",
                f"{_STEPS} 9 mma": "the first mma.sync",
                f"{_STEPS} 10 mma_cp_async": "a cp.async ring",
                f"{_STEPS} 11 mma_swizzle": "swizzle + ldmatrix",
                f"{_STEPS} 12 mma_warp_tile": "64x64 warp tiles",
                f"{_MMA} mma.cu": "templated, tuned",
                f"{_HOPPER} step1": "TMA + wgmma", f"{_HOPPER} step2": "an mbarrier ring",
                f"{_HOPPER} step3": "a producer, 2 consumers",
                f"{_HOPPER} step4": "persistent, TMA store"}


def staircase(recorded: Recorded, size: int = bench_steps.SIZE):
    """Bars from the naive matmul to the best Hopper kernel (bf16, ``size``³), each with its
    TFLOP/s and its fraction of cuBLAS measured in the same run; cuBLAS of lesson 16's run
    dashed. Log scale once the naive steps are in: the climb spans three orders of magnitude."""
    found = stairs(recorded, size)
    if not found:
        raise ValueError(f"recorded expected staircase records at {size}^3 in "
                         f"{recorded.slug}.json, got none")
    # one bar a step, lying down: seventeen labels read from top to bottom, values at the ends
    fig, ax = plots.figure(f"The matmul staircase, bf16 {size}³, on {recorded.device}",
                           xlabel="TFLOP/s (log)", figsize=(11, 0.42 * len(found) + 1.8))
    colors = ["#bcbd22" if label.startswith(f"{_STEPS} ") else "#d62728"
              if label == f"{_MMA} mma.cu"
              else "#1f77b4" for label, _, _ in found]
    labels = [f"{label}: {_STAIR_WORDS[label]}" if label in _STAIR_WORDS else label
              for label, _, _ in found]
    values = [v for _, v, _ in found]
    ax.barh(labels, values, color=colors)
    ax.invert_yaxis()  # the climb reads downwards, lesson 07's first step on top
    ax.set_xscale("log")
    peers = [r.peer for r in recorded.of(HOPPER_LESSON) if r.peer and HOPPER_WHAT.match(r.what)
             and r.what.endswith(f" {size}^3")]
    top = max(values + peers)
    ax.set_xlim(min(values) / 2, top * 6)  # room for the values right of the longest bars
    if peers:
        ax.axvline(peers[0], color="black", linestyle="--", linewidth=1)
        ax.text(peers[0], -0.8, f" cuBLAS (lesson 16's run): {peers[0]:,.0f}", fontsize=8,
                va="bottom")
    for y, (_, v, f) in enumerate(found):
        ax.text(v * 1.08, y, f"{v:,.3g}  ({f:.2g}× cuBLAS)", va="center", fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    notes = [f"recorded by make bench on {recorded.environment_line(HOPPER_LESSON)} "
             f"(docs/results/{recorded.slug}.json); each ratio against cuBLAS of its own run"]
    if note := _missing_note(recorded, (bench_steps.LESSON, HOPPER_LESSON)):
        notes.append(note)
    plots.note(fig, "\n".join(notes))
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.course_map", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=claims.RECORDED, help="results file slug")
    parser.add_argument("--out", default=None, help="folder for the PNGs (default var/figures)")
    args = parser.parse_args(argv)
    recorded = claims.load(args.device)
    for name, fig in (("course_map_roofline", roofline(recorded)),
                      ("course_map_staircase", staircase(recorded))):
        path = plots.save(fig, name)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            path = Path(args.out) / f"{name}.png"
            fig.savefig(path)
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
