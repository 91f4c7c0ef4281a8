"""Strided-copy benchmark (lesson 05): GB/s against the stride, beside the copy bandwidth.

Every stride moves the same bytes per element (one read, one write), so the copy bandwidth on
the same bytes is the ceiling; what falls with the stride is how much of each 32-byte DRAM
sector a warp's reads use. :func:`sector_model` is that napkin math, drawn beside the measure.

    python -m course bench strided_copy
"""

from __future__ import annotations

import torch

from course_utils import env, plots, results, timing
from kernels.registry import all_kernels, reference

LESSON = "cuda_gelu.strided_copy"
STRIDES = (1, 2, 4, 8, 16, 32, 64)
# threads per grid row (x.numel() = M * stride): large enough that a sector's next use, a grid
# row later, comes after more sectors than L2 holds (2^22 x 32 B = 128 MB > 50 MB on an H100)
GPU_M = 1 << 22
CPU_M = 1 << 10
SECTOR = 32  # bytes: the unit DRAM and L2 move


def sector_model(stride: int, element_size: int = 4) -> float:
    """Napkin fraction of copy bandwidth: a warp's reads fetch min(stride, 32 B / element) times
    the bytes they use, the writes stay exact: 2 / (1 + min(stride, elements per sector))."""
    if stride < 1 or element_size < 1:
        raise ValueError(f"stride and element_size expected >= 1, got {stride}, {element_size}")
    return 2 / (1 + min(stride, SECTOR // element_size))


def measure(stride: int, dtype: torch.dtype = torch.float32, m: int | None = None,
            device: str | None = None, min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time every strided_copy kernel on m * stride elements: (copy GB/s, a row per kernel)."""
    device = device or env.DEFAULT_DEVICE
    m = m or (GPU_M if device == "cuda" else CPU_M)
    x = torch.randn(m * stride, device=device).to(dtype)
    nbytes = 2 * timing.tensor_bytes(x)
    copy = timing.copy_bandwidth(nbytes // 2, device=device, min_time_s=min_time_s)
    rows = []
    for kernel in all_kernels("strided_copy"):
        base = {"kernel": kernel.label, "stride": stride, "ms": None, "GB/s": None,
                "of copy": None, "copy GB/s": copy,
                "model": sector_model(stride, x.element_size())}
        if reason := kernel.supports(x, stride):
            rows.append({**base, "note": reason})
            continue
        kernel.load()
        ms = timing.benchmark(kernel, x, stride, name=f"{kernel.name} stride {stride}",
                              min_time_s=min_time_s).median
        gbs = timing.gbps(nbytes, ms)
        rows.append({**base, "ms": ms, "GB/s": gbs, "of copy": gbs / copy, "note": ""})
    return copy, rows


def sweep(strides=STRIDES, m: int | None = None, min_time_s: float = 0.2,
          device: str | None = None) -> tuple[float, list[dict]]:
    """:func:`measure` over ``strides`` (a progress bar): (the median copy GB/s, every row)."""
    found = timing.sweep(lambda s: measure(s, m=m, device=device, min_time_s=min_time_s),
                         list(strides), desc="strides")
    copies = sorted(copy for copy, _ in found)
    return copies[len(copies) // 2], [row for _, rows in found for row in rows]


def plot(copy: float, rows: list[dict], title: str = "A copy with a growing stride"):
    """GB/s against the stride per kernel, the copy line, and the sector model's prediction."""
    fig, ax = plots.figure(title, xlabel="stride between neighbouring threads' reads "
                           "(elements)", ylabel="GB/s")
    strides = sorted({r["stride"] for r in rows})
    ax.plot(strides, [copy * sector_model(s) for s in strides], ls="--", color="gray",
            label="napkin: whole 32-byte sectors fetched")
    for label in dict.fromkeys(r["kernel"] for r in rows if r["GB/s"]):
        pts = [(r["stride"], r["GB/s"]) for r in rows if r["kernel"] == label and r["GB/s"]]
        ax.plot(*zip(*pts, strict=True), marker="o", label=label, color=plots.color(label))
        for s, gbs in pts:
            ax.annotate(f"{gbs / copy:.0%}", (s, gbs), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7)
    plots.ceiling(ax, copy, "copy bandwidth (measured)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(strides, [str(s) for s in strides])
    ax.legend()
    return fig


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("strided copy benchmark: needs a CUDA GPU; nothing measured")
        return []
    copy, rows = sweep(STRIDES[::2] if quick else STRIDES, m=GPU_M // (2 if quick else 1))
    print(plots.stamped_table(rows, title="strided copy, float32"))
    records = []
    for row in rows:
        if row["GB/s"] is None or row["kernel"] == reference("strided_copy").label:
            continue
        peer = next(r["GB/s"] for r in rows if r["stride"] == row["stride"]
                    and r["kernel"] == reference("strided_copy").label)
        records.append(results.Record(
            lesson=LESSON, what=f"strided_copy {row['kernel']} float32 stride {row['stride']} "
                                f"m=2^{(GPU_M // (2 if quick else 1)).bit_length() - 1}",
            value=round(row["GB/s"], 1), unit="GB/s", ceiling=round(row["copy GB/s"], 1),
            ceiling_what="device copy bandwidth, same run", peer=round(peer, 1),
            peer_what="x.view(-1, stride).t() copied by PyTorch, same run"))
    return records
