"""Row-sum benchmark (lesson 05): the CUDA reductions against ``torch.sum`` and the copy.

A row sum reads every element once and writes one float per row, so its bytes are x's (plus
the small y) and its ceiling is the copy bandwidth on the same bytes, measured in the same
run; the peer is ``torch.sum(x, -1, dtype=torch.float32)``.

    python -m course bench row_sum
"""

from __future__ import annotations

import torch

from course_utils import env, plots, results, timing
from kernels.registry import all_kernels, reference

LESSON = "cuda_gelu.row_sum"
COLUMNS = (128, 1024, 8192, 65536)
GPU_ELEMENTS = 1 << 28  # per problem: rows = GPU_ELEMENTS // columns (1 GiB of float32)
CPU_ELEMENTS = 1 << 16
PEER = "torch.sum"


def measure(cols: int, dtype: torch.dtype = torch.float32, elements: int | None = None,
            device: str | None = None, min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time every row_sum kernel on an (elements // cols) x cols matrix: (copy GB/s on the
    same bytes, one row per kernel with ms, GB/s, "of copy", "vs torch.sum" or its reason)."""
    device = device or env.DEFAULT_DEVICE
    elements = elements or (GPU_ELEMENTS if device == "cuda" else CPU_ELEMENTS)
    x = torch.randn(max(1, elements // cols), cols, device=device).to(dtype)
    nbytes = timing.tensor_bytes(x) + 4 * x.shape[0]  # read x once, write a float per row
    copy = timing.copy_bandwidth(nbytes // 2, device=device, min_time_s=min_time_s)
    peer_ms = timing.benchmark(reference("row_sum"), x, name=PEER, min_time_s=min_time_s).median
    rows = []
    for kernel in all_kernels("row_sum"):
        base = {"kernel": kernel.label, "cols": cols, "ms": None, "GB/s": None,
                "of copy": None, f"vs {PEER}": None}
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


def sweep(columns=COLUMNS, elements: int | None = None, min_time_s: float = 0.2
          ) -> list[tuple[float, list[dict]]]:
    """:func:`measure` over row lengths, with a progress bar."""
    return timing.sweep(lambda cols: measure(cols, elements=elements, min_time_s=min_time_s),
                        list(columns), desc="row lengths")


def plot(found: list[tuple[float, list[dict]]], title: str = "Row sums, float32"):
    """GB/s against the row length per kernel, with the copy bandwidth as the ceiling."""
    fig, ax = plots.figure(title, xlabel="columns per row (same bytes in every problem)",
                           ylabel="GB/s")
    rows = [r for _, rs in found for r in rs if r["GB/s"]]
    for label in dict.fromkeys(r["kernel"] for r in rows):
        pts = [(r["cols"], r["GB/s"]) for r in rows if r["kernel"] == label]
        ax.plot(*zip(*pts, strict=True), marker="o", label=label, color=plots.color(label))
    plots.ceiling(ax, max(copy for copy, _ in found), "copy bandwidth (measured)")
    ax.set_xscale("log", base=2)
    ax.legend()
    return fig


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("row sum benchmark: needs a CUDA GPU; nothing measured")
        return []
    elements = GPU_ELEMENTS // (4 if quick else 1)
    found = sweep(COLUMNS[::2] if quick else COLUMNS, elements=elements)
    print(plots.stamped_table([r for _, rs in found for r in rs], title="row sums, float32"))
    records = []
    for copy, rows in found:
        peer = next(r["GB/s"] for r in rows if r["kernel"] == "eager")
        for row in rows:
            if row["GB/s"] is None or row["kernel"] == "eager":
                continue
            records.append(results.Record(
                lesson=LESSON, what=f"row_sum {row['kernel']} float32 "
                                    f"{elements // row['cols']}x{row['cols']}",
                value=round(row["GB/s"], 1), unit="GB/s", ceiling=round(copy, 1),
                ceiling_what="device copy bandwidth, same run", peer=round(peer, 1),
                peer_what=f"{PEER}(x, -1, dtype=float32), same run"))
    return records
