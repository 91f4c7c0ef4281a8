"""Warp divergence, measured (lesson 04): ``branch_lane`` against ``branch_warp``, the same
work per thread, the branch taken by the lane or by the warp; and the 2-D add with threadIdx.x
along a row against down a column (coalescing).

A warp whose lanes disagree runs both sides of the branch one after the other, so
``branch_lane`` should take about twice ``branch_warp``'s time: the record is that ratio.

    python -m course bench first_kernels
"""

from __future__ import annotations

import torch

from course_utils import env, results, timing
from kernels import first_kernels

LESSON = "first_kernels"
ELEMENTS = 1 << 24  # enough warps to fill every SM many times over
ADD_SHAPE = (8192, 8192)


def divergence(elements: int = ELEMENTS, min_time_s: float = 0.2) -> dict[str, float]:
    """Median ms of ``branch_lane`` and ``branch_warp`` on ``elements`` floats, and their
    ratio ("lane / warp")."""
    x = torch.randn(elements, device="cuda")
    found = {on: timing.benchmark(first_kernels.branch, x, on, name=f"branch_{on}",
                                  min_time_s=min_time_s).median for on in ("lane", "warp")}
    found["lane / warp"] = found["lane"] / found["warp"]
    return found


def coalescing(shape=ADD_SHAPE, min_time_s: float = 0.2) -> dict[str, float]:
    """GB/s of the 2-D add with threadIdx.x along a row and down a column, and the copy
    bandwidth on the same bytes (3 floats moved per element)."""
    a, b = (torch.randn(*shape, device="cuda") for _ in range(2))
    nbytes = 3 * a.numel() * 4
    found = {axis: timing.gbps(nbytes, timing.benchmark(
        first_kernels.add_2d, a, b, axis, name=f"add_2d {axis}", min_time_s=min_time_s).median)
        for axis in ("row", "column")}
    found["copy"] = timing.copy_bandwidth(nbytes // 2, min_time_s=min_time_s)
    return found


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("first kernels benchmark: needs a CUDA GPU; nothing measured")
        return []
    elements = ELEMENTS // (4 if quick else 1)
    div = divergence(elements)
    print(f"branch_lane {timing.format_ms(div['lane'])}, branch_warp "
          f"{timing.format_ms(div['warp'])}: lane / warp = {div['lane / warp']:.2f}")
    add = coalescing()
    print(f"add_2d: threadIdx.x along a row {add['row']:,.0f} GB/s, down a column "
          f"{add['column']:,.0f} GB/s, copy {add['copy']:,.0f} GB/s")
    size = "x".join(map(str, ADD_SHAPE))
    return [
        results.Record(lesson=LESSON, what=f"branch_lane time / branch_warp time n={elements}",
                       value=round(div["lane / warp"], 2), unit="x",
                       peer=round(div["warp"], 4), peer_what="branch_warp ms, same run"),
        *(results.Record(lesson=LESSON, what=f"add_2d threadIdx.x {where} float32 {size}",
                         value=round(add[axis], 1), unit="GB/s", ceiling=round(add["copy"], 1),
                         ceiling_what="device copy bandwidth, same run")
          for axis, where in (("row", "along a row"), ("column", "down a column"))),
    ]
