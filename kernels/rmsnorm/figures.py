"""Figures of lesson 10, drawn from ``triton_rmsnorm.py``'s own launch arithmetic.

    figures.rmsnorm_programs(rows=33, cols=100)   # who reads and writes what, forward and backward
    figures.prefetch_timeline(rows=4)              # the backward's loop, with and without PREFETCH

The backward's split of the rows among programs is the launcher's (``triton_rmsnorm._split``,
with the program count ``backward_programs`` gives for the device), ``BLOCK`` the next power of
two, and the second reduction's column blocks ``DWEIGHT_COLUMNS``: the figure shows the same
programs the kernel runs. Each function returns a matplotlib figure, as lesson 07's do.
"""

from __future__ import annotations

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import torch

from kernels.rmsnorm import triton_rmsnorm
from kernels.triton_launch import cdiv, next_power_of_2

PROGRAM_COLORS = plt.get_cmap("Pastel1").colors
MASKED, RSTD, LOAD, REDUCE = "#bdbdbd", "#fdae6b", "#6baed6", "#fd8d3c"
WIDTH = 128  # drawing units of a row of BLOCK lanes, whatever BLOCK is


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=0.5, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        backing = dict(facecolor="white", edgecolor="none", pad=1) if "hatch" in kw else None
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                bbox=backing, in_layout=False)


def backward_split(rows: int, device: str = "cpu") -> list[range]:
    """The rows each backward program takes, as the launcher splits them on ``device``."""
    programs, per = triton_rmsnorm._split(rows, torch.device(device))
    return [range(p * per, min((p + 1) * per, rows)) for p in range(programs)]


def _forward(ax, rows: int, cols: int) -> None:
    block = next_power_of_2(cols)
    unit = WIDTH / block  # drawing units per column: BLOCK lanes always WIDTH wide
    width = cols * unit
    at, rstd_w = WIDTH * 1.08, WIDTH * 0.06  # rstd's column, right of the lanes
    for r in range(rows):
        _box(ax, 0, r, width, 1, face="#deebf7", lw=0.2)
        _box(ax, at, r, rstd_w, 1, face=RSTD, lw=0.2)
    if block > cols:
        _box(ax, width, 0, WIDTH - width, rows, "masked:\nreads 0", face=MASKED, hatch="//",
             lw=0.3, fontsize=7)
    _box(ax, 0, 0, WIDTH, 1, None, face="none", edge="#08519c", lw=1.8)
    ax.text(WIDTH / 2, -0.6, f"program 0: row 0, BLOCK = {block} lanes", ha="center",
            va="bottom", fontsize=7, color="#08519c")
    ax.text(WIDTH / 2, rows + 0.5, f"x: {rows} rows x {cols}\none program per row",
            ha="center", va="top", fontsize=8)
    ax.text(at + rstd_w / 2, rows + 0.5, "rstd:\n1 float\na row", ha="left", va="top",
            fontsize=8)
    ax.set_title("forward: y = x · rstd · w,\nrstd = 1 / sqrt(mean(x²) + eps) saved", fontsize=9)
    ax.set_xlim(-2, at + rstd_w + 20)
    ax.set_ylim(rows + 4.5, -2.5)
    ax.axis("off")


def _backward(ax, rows: int, cols: int, split: list[range], device: str) -> None:
    unit = WIDTH / next_power_of_2(cols)  # as the forward's: the row WIDTH at most
    width, gap = cols * unit, WIDTH * 0.35
    right = width + gap  # where partial and dweight start
    for p, group in enumerate(split):
        face = PROGRAM_COLORS[p % len(PROGRAM_COLORS)]
        _box(ax, 0, group.start, width, len(group), f"program {p}: rows {group.start}-"
             f"{group.stop - 1}", face=face, lw=0.8, fontsize=7)
        _box(ax, right, p, width, 1, f"partial[{p}]", face=face, lw=0.8, fontsize=7)
        ax.annotate("", xy=(right, p + 0.5), xytext=(width, (group.start + group.stop) / 2),
                    arrowprops=dict(arrowstyle="->", lw=0.8, color="#636363"))
    for r in range(rows):  # dx: row by row, in the program's loop
        ax.plot([0, width], [r, r], color="white", lw=0.3)
    programs = len(split)
    y = programs + 2.5
    block_n = triton_rmsnorm.DWEIGHT_COLUMNS  # one dweight program's columns
    for c in range(cdiv(cols, block_n)):
        _box(ax, right + c * block_n * unit, y, min(block_n, cols - c * block_n) * unit, 1,
             face="#c7e9c0", lw=0.8)
    ax.annotate("", xy=(right + width / 2, y), xytext=(right + width / 2, programs),
                arrowprops=dict(arrowstyle="->", lw=1.0))
    ax.text(right + width / 2 + 2, (programs + y) / 2, "partial.sum(0): the column sums",
            ha="left", va="center", fontsize=7)
    ax.text(right + width / 2, y + 1.4, f"dweight ({cols}): rmsnorm_dweight_kernel, "
            f"{block_n} columns a program,\nthe same order every run, rounded once",
            ha="center", va="top", fontsize=7)
    ax.text(width / 2, rows + 0.5, "dy, x: dx = rstd · (g - x̂ · mean(g · x̂)) row by row;\n"
            "each program adds dy · x̂ over its rows in float32 registers", ha="center",
            va="top", fontsize=7)
    ax.text(right + width / 2, -0.4, f"partial ({programs} x {cols}, float32):\none row "
            "per program, no two write one address", ha="center", va="bottom", fontsize=7)
    ax.set_title(f"backward: {rows} rows shared by {programs} programs, as the launcher splits "
                 f"them on {device!r} (no atomics)", fontsize=9)
    ax.set_xlim(-2, right + max(width, WIDTH * 0.9) + 2)
    ax.set_ylim(max(rows, y + 4) + 4.5, -2.5)
    ax.axis("off")


def rmsnorm_programs(rows: int = 33, cols: int = 100, device: str = "cpu"):
    """Left, the forward: a program per row, ``BLOCK`` lanes (the ones past ``cols`` masked),
    ``rstd`` saved per row. Right, the backward: the rows split among the programs as the
    launcher splits them on ``device`` (33 rows on a CPU: four programs, the last one short),
    each writing ``dx`` row by row and its part of ``dweight`` into its own row of ``partial``,
    then the column sums into ``dweight``."""
    if not (isinstance(rows, int) and isinstance(cols, int) and 1 <= rows <= 200
            and 1 <= cols <= triton_rmsnorm.MAX_COLUMNS):
        raise ValueError(f"rows expected 1..200 and cols 1..{triton_rmsnorm.MAX_COLUMNS}, got "
                         f"{rows!r}, {cols!r}")
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained",
                             gridspec_kw={"width_ratios": [1.0, 2.1]})
    fig.suptitle(f"RMSNorm in Triton, {rows} x {cols}: who reads and writes what",
                 fontweight="bold")
    _forward(axes[0], rows, cols)
    _backward(axes[1], rows, cols, backward_split(rows, device), device)
    return fig


# -- loading the next row ahead ----------------------------------------------------------------


def loop_schedule(rows: int, prefetch: bool, load: float = 2.0, reduce: float = 1.0
                  ) -> list[tuple[str, int, float, float]]:
    """``(what, row, start, end)`` of one program's loop, "load" (x and dy of the row in flight)
    or "reduce" (tl.sum over the row, then dx). Without PREFETCH a row's loads are issued when
    its step starts and the reduction waits for them; with it, step r issues the loads of row
    r + 1 before it reduces row r (the kernel's loop), so they are in flight meanwhile. The
    durations are made up; the order is the kernel's."""
    if rows < 1 or load <= 0 or reduce <= 0:
        raise ValueError(f"rows expected >= 1 and positive durations, got {rows}, {load}, "
                         f"{reduce}")
    events, t = [], 0.0
    if not prefetch:
        for r in range(rows):
            events += [("load", r, t, t + load), ("reduce", r, t + load, t + load + reduce)]
            t += load + reduce
        return events
    arrived = load  # the first row's loads, issued before the loop
    events.append(("load", 0, 0.0, load))
    for r in range(rows):
        t = max(t, arrived)  # wait for this row's loads
        if r + 1 < rows:  # the group's last row loads nothing ahead
            events.append(("load", r + 1, t, t + load))
            arrived = t + load
        events.append(("reduce", r, t, t + reduce))
        t += reduce
    return events


def prefetch_timeline(rows: int = 4):
    """One backward program's loop over ``rows`` rows, without and with PREFETCH: what the
    memory has in flight (top row of each) while the program reduces (bottom row)."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 3.6), layout="constrained", sharex=True)
    fig.suptitle("the backward's loop: loads of row r + 1 in flight while row r is reduced "
                 "(schematic durations)", fontweight="bold", fontsize=10)
    end = max(e[3] for e in loop_schedule(rows, False))
    for ax, prefetch in zip(axes, (False, True), strict=True):
        events = loop_schedule(rows, prefetch)
        for what, row, start, stop in events:
            y = 0 if what == "load" else 1
            _box(ax, start, y + 0.1, stop - start, 0.8, f"{what} row {row}",
                 face=LOAD if what == "load" else REDUCE, fontsize=7)
        done = max(e[3] for e in events)
        ax.set_title(f"PREFETCH={prefetch}: {rows} rows in {done:g} units"
                     + ("" if prefetch else " (the memory idles while a row is reduced)"),
                     fontsize=9, loc="left")
        ax.set_yticks([0.5, 1.5], ["loads in flight", "tl.sum, dx"], fontsize=8)
        ax.set_ylim(2.0, 0)
        ax.set_xlim(0, end)
        ax.grid(False)
    axes[1].set_xlabel("time (units of one row's reduction)", fontsize=8)
    return fig
