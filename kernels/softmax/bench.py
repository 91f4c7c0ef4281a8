"""Softmax benchmark (lesson 02): every provider over row lengths, against copy bandwidth.

A fused softmax reads each element once and writes it once, so the ceiling is the device's
copy bandwidth on the same bytes, measured in the same run; the peer is ``torch.softmax``.

    python -m course bench softmax       # float32 rows of 1K..16K columns
"""

from __future__ import annotations

import torch

from course_utils import env, results
from course_utils.plots import stamped_table
from kernels import compare

LESSON = "fusion"
COLUMNS = (1024, 2048, 4096, 8192, 16384)
GPU_ELEMENTS = 1 << 27  # per problem: rows = GPU_ELEMENTS // columns (512 MiB of float32)
CPU_ELEMENTS = 1 << 16
PEER = "torch.softmax"


def measure(cols: int, dtype: torch.dtype = torch.float32, elements: int | None = None,
            device: str | None = None, providers: list | None = None,
            min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time every softmax kernel on a (elements // cols) x cols matrix.

    Returns (copy bandwidth in GB/s on the same bytes, rows of kernel/ms/GB/s/ratios).
    """
    device = device or env.DEFAULT_DEVICE
    elements = elements or (GPU_ELEMENTS if device == "cuda" else CPU_ELEMENTS)
    rows_count = max(1, elements // cols)
    x = torch.randn(rows_count, cols, device=device).to(dtype)
    copy, rows = compare.memory_bound("softmax", x, peer_column="vs torch", providers=providers,
                                      min_time_s=min_time_s)
    return copy, [{"kernel": r["kernel"], "cols": cols, **r} for r in rows]


def run(quick: bool = False) -> list[results.Record]:
    columns = COLUMNS[::2] if quick else COLUMNS
    elements = (GPU_ELEMENTS // (8 if quick else 1)) if env.HAS_CUDA else CPU_ELEMENTS
    records = []
    table = []
    for cols in columns:
        copy, rows = measure(cols, torch.float32, elements)
        peer = next(r["GB/s"] for r in rows if r["kernel"] == "eager")
        for row in rows:
            table.append({**row, "copy GB/s": copy})
            if row["GB/s"] is None or row["kernel"] == "eager":
                continue
            records.append(results.Record(
                lesson=LESSON,
                what=f"softmax {row['kernel']} float32 {elements // cols}x{cols}",
                value=round(row["GB/s"], 1), unit="GB/s",
                ceiling=round(copy, 1), ceiling_what="device copy bandwidth, same run",
                peer=round(peer, 1), peer_what=f"{PEER}, same run"))
    print(stamped_table(table, title="Softmax, float32 rows"))
    return records
