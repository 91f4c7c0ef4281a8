"""GeLU benchmark (lesson 05, also used by lesson 02): every provider against copy bandwidth.

GeLU reads each element once and writes it once, so its ceiling is the device's copy bandwidth,
measured here in the same run on the same number of bytes. The peer is ``F.gelu``.
``run()`` also runs ``compute-sanitizer`` (memcheck and racecheck) on the CUDA kernels and
returns its summary as a note.

    python -m course bench gelu          # 2^28 elements, float32 and bfloat16
"""

from __future__ import annotations

import time

import torch

from course_utils import env, results, sanitizer
from course_utils.plots import stamped_table
from kernels import compare
from kernels.registry import get_kernel

LESSON = "cuda_gelu"
GPU_ELEMENTS = 1 << 28
CPU_ELEMENTS = 1 << 18  # the Triton interpreter is ~450x slower than torch: keep CPU runs small
PEER = "F.gelu"


def measure(n: int, dtype: torch.dtype, device: str | None = None,
            providers: list | None = None, min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time every GeLU kernel that runs a length-``n`` ``dtype`` vector here.

    Returns (copy bandwidth in GB/s on the same bytes, rows of name/ms/GB/s/ratios). Kernels that
    cannot run here get a row with their reason instead of a time.
    """
    device = device or env.DEFAULT_DEVICE
    x = torch.randn(n, device=device).to(dtype)
    return compare.memory_bound("gelu", x, peer_column="vs F.gelu", providers=providers,
                                min_time_s=min_time_s)


sanitizer_path = sanitizer.path


def sanitize(*tools: str) -> list[tuple[str, str, int]]:
    """``compute-sanitizer --tool <tool>`` on :mod:`kernels.gelu.sanitize_check` for each tool,
    all at once: per tool, in order, (the command, its summary line, exit status)."""
    return [(run.command, run.summary_line, run.returncode)
            for run in sanitizer.run_all(tools, "kernels.gelu.sanitize_check")]


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if env.HAS_CUDA:
        n = 1 << 24 if quick else GPU_ELEMENTS
    else:
        n = CPU_ELEMENTS // (4 if quick else 1)
    records: list[results.Record | results.Note] = []
    for dtype in (torch.float32, torch.bfloat16):
        copy, rows = measure(n, dtype)
        dtype_name = str(dtype).removeprefix("torch.")
        print(stamped_table(rows, title=f"GeLU, n=2^{n.bit_length() - 1} {dtype_name}, "
                                        f"copy bandwidth {copy:,.0f} GB/s"))
        peer = next(r["GB/s"] for r in rows if r["kernel"] == "eager")
        for row in rows:
            if row["GB/s"] is None or row["kernel"] == "eager":
                continue
            records.append(results.Record(
                lesson=LESSON, what=f"gelu {row['kernel']} {dtype_name} n=2^{n.bit_length() - 1}",
                value=round(row["GB/s"], 1), unit="GB/s",
                ceiling=round(copy, 1), ceiling_what="device copy bandwidth, same run",
                peer=round(peer, 1), peer_what=f"{PEER}, same run"))
    if env.HAS_CUDA and sanitizer_path():
        get_kernel("gelu", "cuda", "vectorized").load()  # build before the sanitizer runs
        start = time.perf_counter()
        lines = [f"    $ {command}\n    {summary}   (exit {status})"
                 for command, summary, status in sanitize("memcheck", "racecheck")]
        lines.append(f"    (both at once: {time.perf_counter() - start:.0f} s)")
        print("\n".join(lines))
        records.append(results.Note(LESSON, "compute-sanitizer on the CUDA GeLU kernels "
                                    "(naive; vectorised with the default launch and with a "
                                    "capped grid, unroll 1, 2, 4; float32, float16, bfloat16; "
                                    "odd lengths, an unaligned view, empty):\n\n"
                                    + "\n".join(lines)))
    else:
        print("compute-sanitizer: skipped (needs a CUDA GPU and the CUDA toolkit's "
              "compute-sanitizer)")
    return records
