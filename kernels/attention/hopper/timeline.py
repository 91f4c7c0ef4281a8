"""The attention kernel's timeline: lesson 17's recording and Gantt chart, with two more kinds.

A TIMELINE build of ``attention.cu`` records, from one thread per role, what the Hopper matmul's
kernels record (the producer's ``wait slot`` and ``load``; a consumer's ``wait data``, ``compute``
from issuing its ``wgmma`` to their end, ``store``) and two kinds of its own: ``softmax`` (the
online softmax of a tile, in registers) and ``wait turn`` (step 4: waiting for the other warpgroup
to finish issuing its matmuls). The buffer, its decoding and the chart are lesson 17's
(:mod:`kernels.matmul.hopper.timeline`); this module only adds the two kinds on top of it.

    events = timeline.capture(4, (1, 16, 4096, 128))   # on an H100
    timeline.gantt(events, "step 4", window=60_000)     # anywhere
"""

from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import torch

from kernels.attention.hopper import fwd
from kernels.matmul.hopper import timeline as hopper_matmul
from kernels.matmul.hopper import wgmma

KINDS = {6: "softmax", 7: "wait turn"}  # attention.cuh's AttentionKind, beside lesson 17's 1-5
COLORS = {"softmax": "#ff7f0e", "wait turn": "#17becf"}
Event = hopper_matmul.Event
save, load = hopper_matmul.save, hopper_matmul.load


def decode(buffer: torch.Tensor) -> list[Event]:
    """Lesson 17's decoding, with this kernel's own kinds named (lesson 17 calls them ``?``)."""
    # lesson 17 lists the recorded events block by block, role by role, in recording order:
    # walk the raw tags in the same order to name the kinds it does not know
    raw = [tag & 0xFF for roles in buffer.cpu().tolist() for events in roles
           for _, _, tag, _ in events if tag & 0xFF]
    return [dataclasses.replace(e, kind=KINDS.get(kind, "?")) if e.kind == "?" else e
            for e, kind in zip(hopper_matmul.decode(buffer), raw, strict=True)]


def capture(s: int, shape=(1, 16, 4096, 128), causal: bool = False,
            dtype: torch.dtype = torch.bfloat16) -> list[Event]:
    """Run one step's TIMELINE build once (after a warm-up) and return what it recorded."""
    b, h, sq, d = shape
    q, k, v = (torch.randn(b, h, sq, d, device="cuda", dtype=dtype) for _ in range(3))
    out = torch.empty_like(q)
    buffer = torch.zeros(wgmma.TIMELINE_BLOCKS, wgmma.ROLES, wgmma.TIMELINE_EVENTS, 4,
                         dtype=torch.int64, device="cuda")
    for _ in range(2):  # the first launch loads the module; record the second
        buffer.zero_()
        fwd.launch(s, q, k, v, causal, out, timeline=buffer)
    torch.cuda.synchronize()
    return decode(buffer)


def fractions(events: list[Event]) -> dict[str, float]:
    """Share of the consumers' recorded time per kind (``compute``: tensor cores at work)."""
    totals: dict[str, int] = {}
    for e in events:
        if e.role != "producer":
            totals[e.kind] = totals.get(e.kind, 0) + e.end - e.start
    whole = sum(totals.values()) or 1
    return {kind: t / whole for kind, t in sorted(totals.items())}


def gantt(events: list[Event], title: str, blocks: int = 1, window: int | None = None,
          environment: str | None = None):
    """Lesson 17's chart of the events it knows, then softmax and wait-turn bars drawn on the
    same rows (one row per role)."""
    known = [e for e in events if e.kind not in COLORS]
    fig = hopper_matmul.gantt(known, title, blocks=blocks, window=window, environment=environment)
    shown = sorted({e.block for e in known})[:blocks]
    for ax, block in zip(fig.axes, shown, strict=False):
        mine = [e for e in events if e.block == block and (window is None or e.start < window)]
        roles = [r for r in hopper_matmul.ROLE_NAMES if any(e.role == r for e in mine
                                                        if e.kind not in COLORS)]
        for e in mine:
            if e.kind in COLORS and e.role in roles:
                ax.barh(roles.index(e.role), max(e.end - e.start, 1), left=e.start,
                        height=0.7 if e.kind == "softmax" else 0.35, color=COLORS[e.kind],
                        edgecolor="none")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    fig.legend(handles, list(COLORS), loc="lower right", ncols=2, fontsize=8)
    return fig
