"""Seeing the pipeline: a TIMELINE build of a step records, on the GPU, when each role waits and
works, and this module turns that into a Gantt chart per block.

In a TIMELINE build (``wgmma.cu``'s ``TIMELINE = true``) one thread per role (the producer, each
consumer warpgroup) writes ``[start, end)`` in SM clock cycles (``clock64``) with what it did:

* ``wait slot``: the producer waits for a ring slot to be released (the ring is full);
* ``load``: it announces the bytes and issues the TMA copies of one K tile;
* ``wait data``: a consumer waits for a slot's bytes to land: a *bubble*, the tensor cores idle;
* ``compute``: from the data being there to the wgmma group being done with the slot;
* ``store``: the epilogue writes the tile to global memory.

Clocks are per SM, so each block's events are drawn relative to its own first event. The
recording is kept small: the first ``TIMELINE_BLOCKS`` blocks, ``TIMELINE_EVENTS`` per role.

    events = timeline.capture(step=2, m=2048, n=2048, k=1024)   # on an H100
    timeline.save(events_by_step, "docs/results/...-timeline.json")   # for CPU-only students
    timeline.gantt(events)                                        # anywhere
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from course_utils import env, plots
from kernels.matmul.hopper import wgmma

KINDS = {1: "wait slot", 2: "load", 3: "wait data", 4: "compute", 5: "store"}
ROLE_NAMES = ("producer", "consumer 0", "consumer 1")
COLORS = {"wait slot": "#bbbbbb", "load": "#1f77b4", "wait data": "#d62728",
          "store": "#9467bd"}
STAGE_COLORS = plt.get_cmap("Greens")


@dataclass(frozen=True)
class Event:
    block: int
    sm: int
    role: str
    kind: str
    stage: int  # ring slot (0 where there is no ring)
    k_tile: int  # the K tile (for "store": the output tile)
    start: int  # SM clock cycles since the block's first event
    end: int


def decode(buffer: torch.Tensor) -> list[Event]:
    """Events from a TIMELINE buffer ``[blocks, roles, events, 4]`` (start, end, tag, SM id)."""
    if buffer.dim() != 4 or buffer.shape[1:] != (wgmma.ROLES, wgmma.TIMELINE_EVENTS, 4):
        raise ValueError(f"buffer expected shape [blocks, {wgmma.ROLES}, "
                         f"{wgmma.TIMELINE_EVENTS}, 4], got {tuple(buffer.shape)}")
    rows = buffer.cpu().tolist()
    events = []
    for block, roles in enumerate(rows):
        found = [(role, e) for role, evs in enumerate(roles) for e in evs if e[2] & 0xFF]
        if not found:
            continue
        origin = min(e[0] for _, e in found)
        for role, (start, end, tag, sm) in found:
            events.append(Event(block, sm, ROLE_NAMES[role], KINDS.get(tag & 0xFF, "?"),
                                (tag >> 8) & 0xFF, tag >> 32, start - origin, end - origin))
    return events


def capture(step: int, m: int = 2048, n: int = 2048, k: int = 1024,
            variant: str = "bf16") -> list[Event]:
    """Run one step's TIMELINE build once (after a warm-up) and return what it recorded."""
    s, v = wgmma.step(step), wgmma.variant(variant)
    a = torch.randn(m, k, device="cuda").to(v.a)
    bt = torch.randn(n, k, device="cuda").to(v.b)
    out = torch.empty(m, n, device="cuda", dtype=v.out)
    buffer = torch.zeros(wgmma.TIMELINE_BLOCKS, wgmma.ROLES, wgmma.TIMELINE_EVENTS, 4,
                         dtype=torch.int64, device="cuda")
    for _ in range(2):  # the first launch loads the module; record the second
        buffer.zero_()
        wgmma.launch(s, v, a, bt, out, timeline=buffer)
    torch.cuda.synchronize()
    return decode(buffer)


def bubble_fraction(events: list[Event]) -> float:
    """Share of the consumers' recorded time spent waiting for data (the tensor cores idle)."""
    waited = sum(e.end - e.start for e in events if e.kind == "wait data")
    worked = sum(e.end - e.start for e in events if e.kind == "compute")
    return waited / (waited + worked) if waited + worked else 0.0


FIELDS = [f.name for f in fields(Event)]


def save(captured: dict[str, list[Event]], path: str | Path, blocks: int = 2,
         environment: str | None = None) -> Path:
    """Write timelines (label -> events) of the first ``blocks`` blocks with the environment
    they were measured in (default: this machine's), for CPU students: one row per event."""
    path = Path(path)
    data = {"environment": environment or env.environment_line(), "fields": FIELDS,
            "timelines": {label: [[getattr(e, f) for f in FIELDS] for e in events
                                  if e.block < blocks]
                          for label, events in captured.items()}}
    path.write_text(json.dumps(data, separators=(",", ":")))
    return path


def load(path: str | Path) -> tuple[str, dict[str, list[Event]]]:
    """(environment line, label -> events) as :func:`save` wrote them."""
    data = json.loads(Path(path).read_text())
    names = data["fields"]
    return data["environment"], {label: [Event(**dict(zip(names, row, strict=True)))
                                         for row in rows]
                                 for label, rows in data["timelines"].items()}


def gantt(events: list[Event], title: str, blocks: int = 2, window: int | None = None,
          environment: str | None = None):
    """The timeline of the first ``blocks`` blocks: one row per role, one bar per event, compute
    bars shaded by ring slot. ``window``: cycles to show from each block's start.
    ``environment``: a recorded run's environment line, noted under the figure (a figure of this
    machine's run gets its stamp from ``plots.save``)."""
    if not events:
        raise ValueError("events expected a non-empty list (did the TIMELINE build run?)")
    shown = sorted({e.block for e in events})[:blocks]
    fig, axes = plots.figure(title, xlabel="SM clock cycles since the block started",
                             ncols=1, figsize=(11, 1.2 + 1.3 * len(shown) * 1.5))
    fig.clf()  # one row of axes per block, added below
    fig.suptitle(title, fontweight="bold", x=0.01, ha="left")
    stages = max(e.stage for e in events) + 1
    for i, block in enumerate(shown):
        ax = fig.add_subplot(len(shown), 1, i + 1)
        mine = [e for e in events if e.block == block and (window is None or e.start < window)]
        roles = [r for r in ROLE_NAMES if any(e.role == r for e in mine)]
        for e in mine:
            y = roles.index(e.role)
            color = (STAGE_COLORS(0.35 + 0.6 * e.stage / max(stages - 1, 1))
                     if e.kind == "compute" else COLORS[e.kind])
            height = 0.35 if e.kind in ("load", "wait slot") else 0.7
            ax.barh(y, max(e.end - e.start, 1), left=e.start, height=height, color=color,
                    edgecolor="none")
        ax.set_yticks(range(len(roles)), roles)
        ax.invert_yaxis()
        ax.set_title(f"block {block} (SM {mine[0].sm})", fontsize=9, loc="left")
        if window is not None:
            ax.set_xlim(0, window)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    handles.append(plt.Rectangle((0, 0), 1, 1, color=STAGE_COLORS(0.7)))
    fig.legend(handles, [*COLORS, "compute (shade: ring slot)"], loc="upper right", ncols=5,
               fontsize=8, bbox_to_anchor=(0.99, 1 - 0.45 / fig.get_figheight()))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / fig.get_figheight()))
    if environment is not None:
        plots.note(fig, f"recorded on {environment}")
    return fig
