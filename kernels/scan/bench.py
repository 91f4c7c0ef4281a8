"""Scan benchmark (lesson 21): the registered scans against the copy bandwidth and
``torch.cumsum`` in the same run, and the CUDA scan's coarsening sweep (elements per thread).

A scan reads x once and writes y once, the bytes of a copy, so the copy bandwidth on the same
bytes is its ceiling (targets: 0.8 of it, and 1.0x ``torch.cumsum``, which on a GPU is CUB's
single-pass decoupled look-back). The Triton provider's reduce-then-scan reads x twice: 2/3 of
the copy at best, which the table shows.

    python -m course bench scan
"""

from __future__ import annotations

import torch

from course_utils import env, plots, results, timing
from kernels.registry import all_kernels, reference
from kernels.scan import nvrtc

LESSON = "patterns.scan"
GPU_ELEMENTS = 1 << 26  # 256 MiB of float32
CPU_ELEMENTS = 1 << 14
PEER = "torch.cumsum"


def measure(elements: int | None = None, dtype: torch.dtype = torch.float32,
            device: str | None = None, min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time every scan kernel on ``elements`` values (1-D): (copy GB/s on the same bytes, one
    row per kernel with ms, GB/s, "of copy", "vs torch.cumsum", or the reason it did not run)."""
    device = device or env.DEFAULT_DEVICE
    elements = elements or (GPU_ELEMENTS if device == "cuda" else CPU_ELEMENTS)
    x = (torch.randn(elements, device=device) if dtype.is_floating_point
         else torch.randint(-8, 9, (elements,), device=device)).to(dtype)
    nbytes = 2 * timing.tensor_bytes(x)  # read x, write y
    copy = timing.copy_bandwidth(nbytes // 2, device=device, min_time_s=min_time_s)
    peer_ms = timing.benchmark(reference("scan"), x, name=PEER, min_time_s=min_time_s).median
    rows = []
    for kernel in all_kernels("scan"):
        base = {"kernel": kernel.label, "ms": None, "GB/s": None, "of copy": None,
                f"vs {PEER}": None}
        if reason := kernel.supports(x):
            rows.append({**base, "note": reason})
            continue
        kernel.load()
        ms = peer_ms if kernel.is_reference else timing.benchmark(
            kernel, x, name=kernel.name, min_time_s=min_time_s).median
        gbs = timing.gbps(nbytes, ms)
        rows.append({**base, "ms": ms, "GB/s": gbs, "of copy": gbs / copy,
                     f"vs {PEER}": peer_ms / ms, "note": ""})
    return copy, rows


def sweep_items(items=nvrtc.ITEMS_SWEPT, elements: int = GPU_ELEMENTS,
                min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Thread coarsening measured (a GPU): the CUDA scan with each number of elements per thread
    on the same ``elements`` float32 values; (copy GB/s on the same bytes, one row per factor)."""
    x = torch.randn(elements, device="cuda")
    nbytes = 2 * timing.tensor_bytes(x)
    copy = timing.copy_bandwidth(nbytes // 2, min_time_s=min_time_s)
    rows = []
    for k in timing.progress(list(items), "elements per thread"):
        ms = timing.benchmark(nvrtc.scan_cuda, x, items=k, name=f"scan items={k}",
                              min_time_s=min_time_s).median
        gbs = timing.gbps(nbytes, ms)
        rows.append({"items per thread": k, "tile": nvrtc.BLOCK * k,
                     "blocks": -(-elements // (nvrtc.BLOCK * k)), "ms": ms, "GB/s": gbs,
                     "of copy": gbs / copy})
    return copy, rows


def plot_items(copy: float, rows: list[dict], title: str = "Thread coarsening: the CUDA scan"):
    """GB/s against elements per thread, with the copy bandwidth as the ceiling."""
    fig, ax = plots.figure(title, xlabel="elements per thread (256 threads a block)",
                           ylabel="GB/s")
    ax.plot([r["items per thread"] for r in rows], [r["GB/s"] for r in rows], marker="o",
            label="scan.cu, decoupled look-back", color=plots.color("nvrtc"))
    plots.ceiling(ax, copy, "copy bandwidth (measured)")
    ax.set_xscale("log", base=2)
    ax.legend()
    return fig


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("scan benchmark: needs a CUDA GPU; nothing measured")
        return []
    elements = GPU_ELEMENTS // (4 if quick else 1)
    copy, rows = measure(elements)
    size = f"n=2^{elements.bit_length() - 1}"
    print(plots.stamped_table(rows, title=f"inclusive scan, float32, {size}"))
    peer = next(r["GB/s"] for r in rows if r["kernel"] == "eager")
    records = []
    for row in rows:
        if row["GB/s"] is None or row["kernel"] == "eager":
            continue
        print(f"{row['kernel']}: {row['of copy']:.2f} of copy bandwidth, "
              f"{row[f'vs {PEER}']:.2f}x {PEER}")
        records.append(results.Record(
            lesson=LESSON, what=f"scan {row['kernel']} float32 {size}",
            value=round(row["GB/s"], 1), unit="GB/s", ceiling=round(copy, 1),
            ceiling_what="device copy bandwidth, same run", peer=round(peer, 1),
            peer_what=f"{PEER}(x, -1), same run"))
    copy, swept = sweep_items(elements=elements)
    print(plots.stamped_table(swept, title="the CUDA scan, elements per thread"))
    for row in swept:
        records.append(results.Record(
            lesson="patterns.coarsening",
            what=f"scan nvrtc items={row['items per thread']} float32 {size}",
            value=round(row["GB/s"], 1), unit="GB/s", ceiling=round(copy, 1),
            ceiling_what="device copy bandwidth, same run"))
    return records
