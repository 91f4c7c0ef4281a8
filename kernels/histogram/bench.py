"""Histogram benchmark (lesson 04): global atomics against a shared-memory histogram per
block, on uniform and on skewed values (90% in one bin: contention), beside ``torch.bincount``.

A histogram reads each element of x once (4 bytes) and writes a few counters, so its ceiling is
the copy bandwidth on x's bytes, measured in the same run; what keeps a kernel below it is the
atomics, not the reads.

    python -m course bench histogram
"""

from __future__ import annotations

from course_utils import env, plots, results, timing
from kernels.histogram.op import skewed, uniform
from kernels.registry import all_kernels, reference

LESSON = "first_kernels.histogram"
GPU_ELEMENTS = 1 << 26
CPU_ELEMENTS = 1 << 16
BINS = 256
DATA = {"uniform": uniform, "skewed": skewed}
PEER = "torch.bincount"


def measure(data: str = "uniform", bins: int = BINS, elements: int | None = None,
            device: str | None = None, min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Every histogram kernel on ``elements`` values made by ``DATA[data]``: (copy GB/s on x's
    bytes, one row per kernel: ms, GB/s of x read, "of copy", "vs torch.bincount" or why not)."""
    if data not in DATA:
        raise ValueError(f"data expected one of {', '.join(DATA)}, got {data!r}")
    device = device or env.DEFAULT_DEVICE
    elements = elements or (GPU_ELEMENTS if device == "cuda" else CPU_ELEMENTS)
    x = DATA[data](elements, bins, device)
    nbytes = timing.tensor_bytes(x)
    copy = timing.copy_bandwidth(max(nbytes // 2, 1 << 20), device=device,
                                 min_time_s=min_time_s)
    peer_ms = timing.benchmark(reference("histogram"), x, bins, name=PEER,
                               min_time_s=min_time_s).median
    rows = []
    for kernel in all_kernels("histogram"):
        base = {"kernel": kernel.label, "data": data, "ms": None, "GB/s": None,
                "of copy": None, f"vs {PEER}": None}
        if reason := kernel.supports(x, bins):
            rows.append({**base, "note": reason})
            continue
        kernel.load()
        ms = peer_ms if kernel.is_reference else timing.benchmark(
            kernel, x, bins, name=kernel.name, min_time_s=min_time_s).median
        gbs = timing.gbps(nbytes, ms)
        rows.append({**base, "ms": ms, "GB/s": gbs, "of copy": gbs / copy,
                     f"vs {PEER}": peer_ms / ms, "note": ""})
    return copy, rows


def plot(found: dict[str, tuple[float, list[dict]]], title: str = "Histogram, 256 bins"):
    """GB/s of x read per kernel, uniform and skewed side by side, under the copy line."""
    fig, ax = plots.figure(title, ylabel="GB/s of x read")
    labels = [r["kernel"] for r in next(iter(found.values()))[1] if r["GB/s"]]
    width = 0.8 / len(found)
    for k, (data, (_, rows)) in enumerate(found.items()):
        speeds = {r["kernel"]: r["GB/s"] for r in rows if r["GB/s"]}
        ax.bar([i + k * width for i in range(len(labels))], [speeds.get(lb, 0) for lb in labels],
               width, label=data)
    ax.set_xticks([i + width * (len(found) - 1) / 2 for i in range(len(labels))], labels)
    plots.ceiling(ax, max(copy for copy, _ in found.values()), "copy bandwidth (measured)")
    ax.legend()
    return fig


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("histogram benchmark: needs a CUDA GPU; nothing measured")
        return []
    elements = GPU_ELEMENTS // (4 if quick else 1)
    found = {data: measure(data, elements=elements) for data in DATA}
    print(plots.stamped_table([r for _, rows in found.values() for r in rows],
                              title=f"histogram, {BINS} bins, {elements:,} int32 values"))
    records = []
    for data, (copy, rows) in found.items():
        peer = next(r["GB/s"] for r in rows if r["kernel"] == "eager")
        for row in rows:
            if row["GB/s"] is None or row["kernel"] == "eager":
                continue
            records.append(results.Record(
                lesson=LESSON, what=f"histogram {row['kernel']} {data} {BINS} bins n={elements}",
                value=round(row["GB/s"], 1), unit="GB/s", ceiling=round(copy, 1),
                ceiling_what="device copy bandwidth, same run", peer=round(peer, 1),
                peer_what=f"{PEER} of the values in range, same run"))
    return records
