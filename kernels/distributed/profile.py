"""Where a rank's GPU time goes when communication runs beside compute: the profiler's kernels,
and how much of NCCL's time overlapped the rest.

Overlap is the point of bucketed data parallelism and of the pipelined tensor-parallel matmul,
and a step time alone cannot say whether it happened or what it cost: NCCL's kernels run on
SMs too, so compute that shares the GPU with them may itself slow down. Three numbers say it,
from one profiled step (:func:`kernel_events`, then :func:`busy`):

* ``compute_ms``: the time at least one non-NCCL kernel ran (the union of their intervals);
* ``nccl_ms``: the time at least one NCCL kernel ran;
* ``overlap_ms``: the time both did. ``nccl_ms - overlap_ms`` is communication left exposed;
  a ``compute_ms`` larger than another method's on the same work is compute slowed by sharing.
"""

from __future__ import annotations

import torch


def kernel_events(prof: torch.profiler.profile) -> list[dict]:
    """The CUDA kernels ``prof`` saw: ``{"name", "stream", "start_us", "dur_us"}``, start from
    the first, in start order."""
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and e.device_resource_id is not None]
    if not kernels:
        return []
    t0 = min(e.time_range.start for e in kernels)
    return sorted(({"name": e.name, "stream": int(e.device_resource_id),
                    "start_us": e.time_range.start - t0, "dur_us": e.time_range.elapsed_us()}
                   for e in kernels), key=lambda r: r["start_us"])


def is_nccl(event: dict) -> bool:
    return "nccl" in event["name"].lower()


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length where two unions of intervals (each sorted, disjoint) both hold."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def busy(events: list[dict]) -> dict[str, float]:
    """``{"compute_ms", "nccl_ms", "overlap_ms", "span_ms"}`` of ``events``
    (:func:`kernel_events`); ``span_ms`` from the first kernel's start to the last one's end."""
    spans = {kind: _union([(e["start_us"], e["start_us"] + e["dur_us"]) for e in events
                           if is_nccl(e) == (kind == "nccl")]) for kind in ("compute", "nccl")}
    end = max((e["start_us"] + e["dur_us"] for e in events), default=0.0)
    return {"compute_ms": _length(spans["compute"]) / 1e3,
            "nccl_ms": _length(spans["nccl"]) / 1e3,
            "overlap_ms": _intersection(spans["compute"], spans["nccl"]) / 1e3,
            "span_ms": end / 1e3}
