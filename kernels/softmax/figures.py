"""Figure of lesson 13's section 2: two stopwatches timing the course's softmax.

    figures.stopwatches()   # what the host and the GPU do while each stopwatch times a small call

Both stopwatches time a call between two CUDA events, and their loops differ in one line:
``course_utils.timing.benchmark`` records ``begin``, calls, records ``end``, call after call;
``triton.testing.do_bench`` first launches its L2-clearing write (``clear_cache``: zeroing a
256 MB buffer) and then does the same. :func:`stopwatch_schedule` plays those loops on one host
thread and one GPU stream (the GPU runs what the host queued, in order, once it has been
queued); the durations are made up, in proportion to a small problem on an H100 (a launch that
takes the host longer than the kernel takes the GPU). Returns a matplotlib figure.
"""

from __future__ import annotations

import dataclasses

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt

COLORS = {"launch": "#9ecae1", "kernel": "#fd8d3c", "clear L2": "#bdbdbd"}


@dataclasses.dataclass(frozen=True)
class Durations:
    """Schematic durations (units: one launch of the call by the host)."""

    launch: float = 1.0  # the host's part of one call: Python, the registry, Triton's launcher
    kernel_warm: float = 0.35  # the kernel with its input in L2 (benchmark(): nothing clears it)
    kernel_cold: float = 0.5  # the same kernel after do_bench's clear: its input comes from DRAM
    clear_launch: float = 0.1  # the host's part of cache.zero_()
    clear: float = 2.0  # the GPU's part: 256 MB written


def stopwatch_schedule(timer: str, calls: int = 3, d: Durations = Durations()):
    """``(host, gpu, measured)`` for ``calls`` timed calls of ``timer`` ("benchmark" or
    "do_bench"): host and gpu as ``(what, start, end)`` spans, measured as ``(begin event, end
    event)`` times on the GPU, one pair per call. An event is recorded when the GPU reaches it
    in the stream: after everything queued before it."""
    if timer not in ("benchmark", "do_bench") or calls < 1:
        raise ValueError(f"timer expected 'benchmark' or 'do_bench' and calls >= 1, got "
                         f"{timer!r}, {calls}")
    host, gpu, measured = [], [], []
    t = free = 0.0  # the host's clock; when the GPU is done with what it has been given

    def run(what: str, queued: float, length: float) -> float:
        nonlocal free
        start = max(queued, free)
        free = start + length
        gpu.append((what, start, free))
        return free

    for _ in range(calls):
        if timer == "do_bench":  # runtime.driver.active.clear_cache(cache), before the events
            host.append(("clear L2", t, t + d.clear_launch))
            t += d.clear_launch
            run("clear L2", t, d.clear)
        begin = max(t, free)  # begin.record(): reached once the stream has drained to it
        host.append(("launch", t, t + d.launch))
        t += d.launch
        run("kernel", t, d.kernel_cold if timer == "do_bench" else d.kernel_warm)
        measured.append((begin, free))  # end.record(): right after the kernel
    return host, gpu, measured


def stopwatches(calls: int = 3, d: Durations = Durations()):
    """Host and GPU over ``calls`` timed calls, for each stopwatch, with what its events
    measure: ``benchmark()``'s calls run back to back, so when a launch takes the host longer
    than the kernel the GPU waits for the host, and the events time the launch; ``do_bench``'s
    L2-clearing write keeps the GPU busy while the host launches the next call, so its events
    time the kernel alone, from a cold L2."""
    fig, axes = plt.subplots(2, 1, figsize=(11, 4.8), layout="constrained", sharex=True)
    fig.suptitle("two stopwatches, one small kernel (schematic durations: a launch takes the "
                 "host longer than the kernel takes the GPU)", fontweight="bold", fontsize=10)
    schedules = {t: stopwatch_schedule(t, calls, d) for t in ("benchmark", "do_bench")}
    end = max(s[2] for sched in schedules.values() for s in sched[1])
    names = {"benchmark": "benchmark(): begin, call, end, back to back (L2 warm)",
             "do_bench": "do_bench: clear_cache (256 MB), then begin, call, end (L2 cold)"}
    for ax, (timer, (host, gpu, measured)) in zip(axes, schedules.items(), strict=True):
        for y, spans in ((0, host), (1, gpu)):
            for what, start, stop in spans:
                ax.add_patch(mpatches.Rectangle((start, y + 0.15), stop - start, 0.7,
                                                facecolor=COLORS[what], edgecolor="black",
                                                lw=0.4))
        for begin, stop in measured:
            ax.annotate("", xy=(stop, 2.05), xytext=(begin, 2.05),
                        arrowprops=dict(arrowstyle="|-|", lw=0.8, mutation_scale=3))
            ax.text((begin + stop) / 2, 2.15, f"{stop - begin:.2g}", ha="center", va="top",
                    fontsize=7)
        per_call = measured[-1][1] - measured[-1][0]
        ax.set_title(f"{names[timer]}: measures {per_call:.2g} a call", fontsize=9, loc="left")
        ax.set_yticks([0.5, 1.5, 2.3], ["host", "GPU", "events"], fontsize=8)
        ax.set_ylim(2.6, 0)
        ax.set_xlim(0, end + 0.1)
        ax.grid(False)
    axes[1].set_xlabel("time (units of one launch by the host)", fontsize=8)
    handles = [mpatches.Patch(facecolor=c, edgecolor="black", label=w) for w, c in COLORS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
    return fig
