"""Lesson 01's measurements: the matmul scaling sweep and the profile of a few workloads.

Notebook 01 calls the same functions (one code path), and ``python -m course bench``
calls :func:`run`, which turns them into results records:

* the sweep: achieved TFLOP/s of ``a @ b`` (square, n up to 8192 on a GPU) per dtype, against
  the device's datasheet dense peak for that dtype (``env.device_info().peak_tflops``); the CPU
  has no datasheet peak here, so CPU records carry none;
* the profile summary: for each workload, the kernels one call launches and their device time
  (on the CPU: ATen ops with a CPU kernel and their self CPU time; see course_utils.profiling).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_utils import env, plots, profiling, results, timing

LESSON = "profiling"

# float32 with TF32 allowed is its own "dtype" here: same storage, tensor cores, 10-bit mantissa
SWEEP_DTYPES = {"cuda": ("float32", "tf32", "bfloat16", "float16"), "cpu": ("float32",)}


def sweep_sizes(device: str, quick: bool = False) -> list[int]:
    """Square sizes for the scaling sweep: up to 8192 on a GPU, small on the CPU (2 cores)."""
    if device == "cuda":
        return [256, 512, 1024, 2048, 4096] if quick else [256, 512, 1024, 2048, 4096, 8192]
    return [16, 64, 256] if quick else [16, 32, 64, 128, 256, 512]


@dataclass(frozen=True)
class SweepPoint:
    dtype: str  # "float32", "tf32", "bfloat16", "float16"
    n: int
    timing: timing.Timing
    peak: float | None  # datasheet dense peak for the dtype, TFLOP/s (None: unknown / CPU)

    @property
    def tflops(self) -> float:
        return timing.tflops(timing.matmul_flop(self.n, self.n, self.n), self.timing.median)

    @property
    def best_tflops(self) -> float:
        """Throughput of the fastest call: what the hardware did when nothing disturbed it."""
        return timing.tflops(timing.matmul_flop(self.n, self.n, self.n), self.timing.min)

    @property
    def worst_tflops(self) -> float:
        return timing.tflops(timing.matmul_flop(self.n, self.n, self.n), self.timing.max)

    @property
    def of_peak(self) -> float | None:
        return self.tflops / self.peak if self.peak else None

    def row(self) -> dict:
        return {"dtype": self.dtype, "n": self.n, "median": timing.format_ms(self.timing.median),
                "TFLOP/s": self.tflops, "peak TFLOP/s": self.peak,
                "of peak": f"{self.of_peak:.0%}" if self.of_peak else "n/a"}


def _measure(dtype_name: str, n: int, device: str) -> SweepPoint:
    dtype = torch.float32 if dtype_name == "tf32" else getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(n)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    allow = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    try:
        t = timing.benchmark(torch.matmul, a, b, name=f"matmul {dtype_name} n={n}",
                             min_time_s=0.1 if device == "cpu" else 0.2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow
    peak = env.device_info().peak_tflops(dtype_name) if device == "cuda" else None
    return SweepPoint(dtype=dtype_name, n=n, timing=t, peak=peak)


def matmul_sweep(device: str | None = None, sizes: list[int] | None = None,
                 dtypes: tuple[str, ...] | None = None, quick: bool = False) -> list[SweepPoint]:
    """Benchmark ``a @ b`` for every (dtype, n), with a progress bar."""
    device = device or env.DEFAULT_DEVICE
    sizes = sizes or sweep_sizes(device, quick)
    dtypes = dtypes or SWEEP_DTYPES[device]
    params = [(d, n) for d in dtypes for n in sizes]
    return timing.sweep(lambda p: _measure(p[0], p[1], device), params,
                        desc=f"matmul sweep on {device}")


def plot_sweep(points: list[SweepPoint], name: str = "matmul_sweep"):
    """TFLOP/s against n per dtype (median call, bars from the slowest to the fastest call),
    with the datasheet peaks as dashed lines (one line and label per distinct peak), the legend
    beside the axes, and a note where the bars are long."""
    device = env.device_info()
    fig, ax = plots.figure(f"matmul a @ b: achieved TFLOP/s on {device.name}",
                           xlabel="n (square n×n @ n×n)", ylabel="TFLOP/s")
    colors = {"float32": "#7f7f7f", "tf32": "#9467bd", "bfloat16": "#1f77b4",
              "float16": "#2ca02c"}
    peaks = []
    for dtype in dict.fromkeys(p.dtype for p in points):
        pts = [p for p in points if p.dtype == dtype]
        # marker: the median call; bar: from the slowest to the fastest call
        ax.errorbar([p.n for p in pts], [p.tflops for p in pts],
                    yerr=[[p.tflops - p.worst_tflops for p in pts],
                          [p.best_tflops - p.tflops for p in pts]],
                    fmt="o-", capsize=3, label=dtype, color=colors.get(dtype))
        if pts[0].peak:
            peaks.append((pts[0].peak, dtype, colors.get(dtype)))
    ax.set_xscale("log", base=2)
    ax.set_xticks([p.n for p in points[: len({p.n for p in points})]])
    ax.get_xaxis().set_major_formatter(lambda v, _: f"{int(v)}")
    plots.legend_outside(ax, title="dtype")
    if peaks:
        plots.ceilings(ax, peaks, suffix="datasheet peak")
    if note := spread_note(points):
        plots.note(fig, note)
    return fig, plots.save(fig, name)


def spread_note(points: list[SweepPoint], threshold: float = 0.25) -> str | None:
    """Why some bars are long, naming where: None when every bar is short."""
    wide = [p for p in points if p.tflops and (p.best_tflops - p.worst_tflops) / p.tflops
            > threshold]
    if not wide:
        return None
    where = ", ".join(f"{p.dtype} n={p.n}" for p in wide[:4]) + (" ..." if len(wide) > 4 else "")
    if wide[0].timing.device != "cuda":
        why = "on a CPU other processes share the cores and the clock follows the load"
    else:
        why = ("a call there takes only tens to hundreds of µs: the GPU waits on Python to "
               "launch the next call,\nso CUDA events also time any CPU delay, and the clocks "
               "shift (boost, then power limits under sustained tensor-core load)")
    return (f"Long bars at {where}:\n{why}.\nThe marker, the median call, is the number to "
            "quote; the bar shows how far one unlucky sample could be off.")


# --------------------------------------------------------------------------------------------
# The profiled workloads
# --------------------------------------------------------------------------------------------


def profile_workloads(device: str | None = None,
                      quick: bool = False) -> dict[str, tuple[Callable, tuple]]:
    """``name -> (fn, args)`` for the ops lesson 01 profiles, sized for the device.

    An elementwise add, a matmul at two sizes (cuBLAS picks a different kernel, with a different
    tile, for each), a pairwise distance (``torch.cdist``, which is several kernels), GeLU,
    softmax and a small MLP.
    """
    device = device or env.DEFAULT_DEVICE
    gpu = device == "cuda"
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=device, generator=gen).to(dtype)

    n_elem = (1 << 24) if gpu else (1 << 18)
    small, large = (256, 4096) if gpu else (64, 384)
    mm_dtype = torch.bfloat16 if gpu else torch.float32
    points = 4096 if gpu else 512
    width = 1024 if gpu else 256
    batch = 512 if gpu else 64
    mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                              torch.nn.Linear(4 * width, width)).to(device)
    x = randn(batch, width)

    def mlp_forward(x):
        with torch.no_grad():
            return mlp(x)

    return {
        "add": (torch.add, (randn(n_elem), randn(n_elem))),
        f"matmul_{small}": (torch.matmul, (randn(small, small, dtype=mm_dtype),
                                           randn(small, small, dtype=mm_dtype))),
        f"matmul_{large}": (torch.matmul, (randn(large, large, dtype=mm_dtype),
                                           randn(large, large, dtype=mm_dtype))),
        "cdist": (torch.cdist, (randn(points, 64), randn(points, 64))),
        "gelu": (torch.nn.functional.gelu, (randn(n_elem),)),
        "softmax": (lambda t: torch.softmax(t, dim=-1), (randn(n_elem // 1024, 1024),)),
        "mlp": (mlp_forward, (x,)),
    }


def profile_all(device: str | None = None, quick: bool = False,
                show: bool = False) -> dict[str, profiling.Profile]:
    """Profile every workload of :func:`profile_workloads`; ``name -> Profile``."""
    device = device or env.DEFAULT_DEVICE
    found = {}
    for name, (fn, args) in profile_workloads(device, quick).items():
        found[name] = profiling.profile(fn, *args, name=f"01_{name}", show=show, device=device)
    return found


def profile_rows(profiles: dict[str, profiling.Profile]) -> list[dict]:
    """One table row per workload: kernels per call, their time, the most expensive kernel."""
    rows = []
    for name, p in profiles.items():
        top = p.top_kernels(1)
        label = profiling.kernel_labels(p.kernels)[top[0][0]] if top else ""
        rows.append({"workload": name, "kernels/call": p.launches,
                     "kernel time": timing.format_ms(p.kernel_time_ms),
                     "top kernel": label[:60]})
    return rows


# --------------------------------------------------------------------------------------------
# make bench
# --------------------------------------------------------------------------------------------


def run(quick: bool = False) -> list[results.Record | results.Note]:
    """The sweep and the profile summary as records (GPU: the committed results)."""
    device = env.DEFAULT_DEVICE
    points = matmul_sweep(device, quick=quick)
    print(plots.stamped_table([p.row() for p in points], title="matmul sweep"))
    records: list[results.Record | results.Note] = []
    for p in points:
        peak = {"ceiling": p.peak, "ceiling_what": f"datasheet dense peak, {p.dtype}"} \
            if p.peak else {}
        records.append(results.Record(
            lesson=LESSON, what=f"matmul torch.matmul {p.dtype} n={p.n}", value=p.tflops,
            unit="TFLOP/s", **peak))

    profiles = profile_all(device, quick=quick)
    print(plots.stamped_table(profile_rows(profiles), title="profiles"))
    time_unit = "µs device time" if device == "cuda" else "µs self CPU time"
    what_kernels = "CUDA kernels" if device == "cuda" else "ATen ops with a CPU kernel"
    lines = [f"Kernels per call in each profiled workload ({what_kernels}):", ""]
    for name, p in profiles.items():
        records.append(results.Record(lesson=LESSON, what=f"profile {name}: kernels per call",
                                      value=p.launches, unit=what_kernels))
        records.append(results.Record(lesson=LESSON, what=f"profile {name}: kernel time per call",
                                      value=p.kernel_time_ms * 1e3, unit=time_unit))
        labels = profiling.kernel_labels(p.kernels)
        kernels = ", ".join(f"`{labels[k]}` ×{profiling.format_count(c)}"
                            for k, c, _ in p.top_kernels(5))
        lines.append(f"- **{name}**: {kernels}")
    records.append(results.Note(lesson=LESSON, text="\n".join(lines)))
    return records
