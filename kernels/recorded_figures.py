"""The key GPU figures of lessons 01 and 02, drawn from the records: a GPU for every student.

A student without a GPU runs lesson 01's sweep and lesson 02's bandwidth cells on a CPU and
sees CPU numbers. These functions draw the same figures from what ``make bench`` recorded on a
GPU (``docs/results/<device>.json``), labelled with that run's environment, on any machine (no
CUDA, no GPU: matplotlib and the JSON), as lesson 17 draws its staircase::

    recorded = claims.with_lesson(SWEEP_LESSON)        # the H100's records, else another GPU's
    fig = recorded_figures.sweep(recorded)             # lesson 01: TFLOP/s vs n, datasheet peaks
    print("\\n".join(recorded_figures.sweep_claims(recorded)))
    fig = recorded_figures.gelu_bandwidth(claims.with_lesson(GELU_LESSON))   # lesson 02
    fig = recorded_figures.softmax_sweep(claims.with_lesson(SOFTMAX_LESSON))
    fig = course_map.roofline(recorded, lessons=(SOFTMAX_LESSON, GELU_LESSON))  # 02's roofline

Which benchmark writes each lesson's records: lesson 01 ``kernels/matmul/bench.py``; GeLU
``kernels/gelu/bench.py`` (records under ``03_cuda_gelu``, drawn by lesson 02 too); softmax
``kernels/softmax/bench.py``.
"""

from __future__ import annotations

import re

from course_utils import claims, plots
from course_utils.claims import Recorded
from course_utils.results import Record

SWEEP_LESSON = "profiling"
GELU_LESSON = "cuda_gelu"
SOFTMAX_LESSON = "fusion"
SWEEP_WHAT = re.compile(r"^matmul torch\.matmul (?P<dtype>\w+) n=(?P<n>\d+)$")
GELU_WHAT = re.compile(r"^gelu (?P<kernel>.+) (?P<dtype>float32|bfloat16|float16) "
                       r"n=2\^(?P<log2>\d+)$")
SOFTMAX_WHAT = re.compile(r"^softmax (?P<kernel>.+) (?P<dtype>float32|bfloat16|float16) "
                          r"(?P<rows>\d+)x(?P<cols>\d+)$")
SWEEP_COLORS = {"float32": "#7f7f7f", "tf32": "#9467bd", "bfloat16": "#1f77b4",
                "float16": "#2ca02c"}  # as kernels/matmul/bench.py's live sweep


def _need(recorded: Recorded | None, lesson: str) -> list[Record]:
    if recorded is None:
        raise ValueError(f"recorded expected the results of a GPU with records of {lesson}, "
                         "got None (no results file has any: `make bench` on a GPU writes them)")
    if not isinstance(recorded, Recorded):
        raise ValueError(f"recorded expected a claims.Recorded, got {type(recorded).__name__}")
    found = recorded.of(lesson)
    if not found:
        raise ValueError(f"recorded expected records of {lesson}, got none in "
                         f"{recorded.slug}.json (`make bench` on that GPU writes them)")
    return found


def label_bars(ax, bars, texts: list[str], inside_from: float = 0.15) -> None:
    """Write ``texts`` on ``bars``: inside a bar (white) where it is at least ``inside_from`` of
    the axes' height, on top of it otherwise, so no label collides with a ceiling line drawn
    across the tops."""
    low, high = ax.get_ylim()
    tall = [(b.get_height() - low) / (high - low) >= inside_from if ax.get_yscale() == "linear"
            else b.get_height() > 0 for b in bars]
    ax.bar_label(bars, [t if big else "" for t, big in zip(texts, tall, strict=True)],
                 label_type="center", color="white", fontsize=8, fontweight="bold")
    ax.bar_label(bars, ["" if big else t for t, big in zip(texts, tall, strict=True)],
                 fontsize=8)


def _recorded_note(fig, recorded: Recorded, lesson: str) -> None:
    plots.note(fig, f"recorded by make bench on {recorded.environment_line(lesson)} "
                    f"(docs/results/{recorded.slug}.json)")


# -- lesson 01: the scaling sweep ----------------------------------------------------------------


def sweep_points(recorded: Recorded) -> dict[str, list[Record]]:
    """Lesson 01's sweep records by dtype, in size order: ``{"bfloat16": [n=256, ...]}``."""
    by_dtype: dict[str, list[Record]] = {}
    for r in _need(recorded, SWEEP_LESSON):
        if m := SWEEP_WHAT.match(r.what):
            by_dtype.setdefault(m["dtype"], []).append(r)
    for rows in by_dtype.values():
        rows.sort(key=lambda r: int(SWEEP_WHAT.match(r.what)["n"]))
    if not by_dtype:
        raise ValueError(f"recorded expected 'matmul torch.matmul <dtype> n=<n>' records of "
                         f"{SWEEP_LESSON} in {recorded.slug}.json, got none")
    return by_dtype


def sweep(recorded: Recorded):
    """Lesson 01's figure as the GPU recorded it: achieved TFLOP/s of ``a @ b`` against n, one
    line per dtype, each dtype's datasheet dense peak dashed."""
    by_dtype = sweep_points(recorded)
    device = recorded.stamp(SWEEP_LESSON).get("device", recorded.slug)
    fig, ax = plots.figure(f"matmul a @ b on {device} (recorded): achieved TFLOP/s",
                           xlabel="n (square n×n @ n×n)", ylabel="TFLOP/s")
    peaks, sizes = [], set()
    for dtype, rows in by_dtype.items():
        ns = [int(SWEEP_WHAT.match(r.what)["n"]) for r in rows]
        sizes.update(ns)
        ax.plot(ns, [r.value for r in rows], "o-", label=dtype, color=SWEEP_COLORS.get(dtype))
        if rows[-1].ceiling:
            peaks.append((rows[-1].ceiling, dtype, SWEEP_COLORS.get(dtype)))
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(sizes))
    ax.get_xaxis().set_major_formatter(lambda v, _: f"{int(v)}")
    plots.legend_outside(ax, title="dtype")
    if peaks:
        plots.ceilings(ax, peaks, suffix="datasheet peak")
    _recorded_note(fig, recorded, SWEEP_LESSON)
    return fig


def sweep_claims(recorded: Recorded) -> list[str]:
    """One sentence per dtype, from the records: smallest and largest n, and the largest as a
    share of the datasheet peak."""
    device = recorded.stamp(SWEEP_LESSON).get("device", recorded.slug)
    lines = []
    for dtype, rows in sweep_points(recorded).items():
        small, large = rows[0], rows[-1]
        n_small, n_large = (SWEEP_WHAT.match(r.what)["n"] for r in (small, large))
        share = (f", {large.value / large.ceiling:.0%} of its datasheet dense peak "
                 f"({claims.number(large.ceiling)})" if large.ceiling else "")
        lines.append(f"{dtype:9} on the {device}: n={n_small} {claims.number(small.value)} "
                     f"TFLOP/s, n={n_large} {claims.number(large.value)} TFLOP/s{share}")
    return lines


# -- lesson 02: GeLU against the copy line, softmax over row lengths ------------------------------


def gelu_bandwidth(recorded: Recorded, dtype: str = "float32"):
    """Bars: every recorded GeLU kernel at 2^28 elements of ``dtype`` and ``F.gelu`` (the peer
    of the same run), with the copy bandwidth of that run; each bar says its share of copy."""
    rows = [(GELU_WHAT.match(r.what), r) for r in _need(recorded, GELU_LESSON)]
    rows = [(m, r) for m, r in rows if m and m["dtype"] == dtype]
    if not rows:
        raise ValueError(f"dtype expected one recorded in {recorded.slug}.json, got {dtype!r}")
    copy = rows[0][1].ceiling
    bars = [("eager (F.gelu)", rows[0][1].peer)] + [(m["kernel"], r.value) for m, r in rows]
    device = recorded.stamp(GELU_LESSON).get("device", recorded.slug)
    fig, ax = plots.figure(f"GeLU, 2^{rows[0][0]['log2']} {dtype} on {device} (recorded)",
                           ylabel="GB/s")
    drawn = ax.bar([label.replace(" ", "\n", 1) for label, _ in bars], [v for _, v in bars],
                   color=[plots.color(label) for label, _ in bars])
    plots.ceiling(ax, copy, "copy bandwidth, same run")
    ax.set_ylim(0, copy * 1.15)
    label_bars(ax, drawn, [f"{v:,.0f}\n{v / copy:.0%}" for _, v in bars])  # GB/s, share of copy
    _recorded_note(fig, recorded, GELU_LESSON)
    return fig


def softmax_sweep(recorded: Recorded):
    """Lines: every recorded softmax kernel and ``torch.softmax`` (the peer) in GB/s against the
    row length (same bytes per problem), with the copy bandwidth of those runs."""
    by_kernel: dict[str, list[tuple[int, float]]] = {}
    peer, copies = [], []
    for r in _need(recorded, SOFTMAX_LESSON):
        if m := SOFTMAX_WHAT.match(r.what):
            by_kernel.setdefault(m["kernel"], []).append((int(m["cols"]), r.value))
            peer.append((int(m["cols"]), r.peer))
            copies.append(r.ceiling)
    if not by_kernel:
        raise ValueError(f"recorded expected softmax records of {SOFTMAX_LESSON} in "
                         f"{recorded.slug}.json, got none")
    device = recorded.stamp(SOFTMAX_LESSON).get("device", recorded.slug)
    fig, ax = plots.figure(f"Softmax, float32, on {device} (recorded): bandwidth vs row length",
                           xlabel="columns per row", ylabel="GB/s")
    lines = {"eager (torch.softmax)": sorted(dict(peer).items()), **by_kernel}
    for label, pts in lines.items():
        ax.plot(*zip(*sorted(pts), strict=True), marker="o", label=label,
                color=plots.color(label))
    plots.ceiling(ax, max(copies), "copy bandwidth, same run")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({c for pts in lines.values() for c, _ in pts}))
    ax.get_xaxis().set_major_formatter(lambda v, _: f"{int(v):,}")
    ax.set_ylim(0, max(copies) * 1.2)
    plots.legend_outside(ax)
    _recorded_note(fig, recorded, SOFTMAX_LESSON)
    return fig


def copy_claims(recorded: Recorded, lesson: str, near: float = 0.9) -> list[str]:
    """For each memory-bound record of ``lesson``: near the copy line, or how far below it
    (computed from the record, never written by hand)."""
    return [claims.against_copy(r, near, recorded) for r in _need(recorded, lesson)
            if r.unit == "GB/s" and r.ceiling]
