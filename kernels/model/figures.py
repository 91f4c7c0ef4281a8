"""Lesson 12's figures, from live measurements or from the records of a GPU.

* :func:`waterfall`: the step's time from eager, each swap of a course kernel a floating bar
  (green faster, red slower), the last bar all course kernels, ``torch.compile`` beside it;
* :func:`loss_curves`: loss against step, one line per configuration, from one seed;
* :func:`memory_timelines`: memory allocated during one step, phases shaded.
"""

from __future__ import annotations

from course_utils import plots
from kernels.model.breakdown import Timeline

ORDER = ("eager", "+attention", "+norm", "all-course")
LABELS = {"eager": "eager", "+attention": "+ attention", "+norm": "+ norm",
          "all-course": "+ activation\n(all course)", "compile": "torch.compile\n(eager model)",
          "compile-ro": "torch.compile\nreduce-overhead",
          "all-course-graph": "all course,\none CUDA graph", "fp32": "eager in fp32"}
COLORS = {"eager": "#8c564b", "all-course": "#1f77b4", "compile": "#7f7f7f",
          "all-course-graph": "#2ca02c", "fp32": "#000000"}


def waterfall(times: dict[str, float], title: str, environment: str | None = None):
    """Step milliseconds by configuration key (eager, +attention, +norm, all-course, compile)."""
    if "eager" not in times:
        raise ValueError(f"times expected an 'eager' step time, got keys {sorted(times)}")
    fig, ax = plots.figure(title, ylabel="ms per training step", figsize=(9, 4.5))
    keys = [k for k in ORDER if k in times]
    previous = None
    for i, key in enumerate(keys):
        ms = times[key]
        if previous is None or key == keys[-1]:
            bar = ax.bar(i, ms, color=COLORS.get(key, "#1f77b4"))
        else:
            step = ms - previous
            bar = ax.bar(i, step, bottom=previous, color="#2ca02c" if step < 0 else "#d62728")
        ax.bar_label(bar, [f"{ms:.1f}"], fontsize=8)
        previous = ms
    if "compile" in times:
        bar = ax.bar(len(keys) + 0.5, times["compile"], color=COLORS["compile"], hatch="//")
        ax.bar_label(bar, [f"{times['compile']:.1f}"], fontsize=8)
        keys = [*keys, "compile"]
    ax.set_xticks([*range(len(keys) - ("compile" in times)), *([len(keys) - 0.5]
                                                              if "compile" in times else [])])
    ax.set_xticklabels([LABELS.get(k, k) for k in keys], fontsize=8)
    ax.set_ylim(0, max(times.values()) * 1.15)
    if environment:
        plots.note(fig, f"recorded by make bench on {environment}")
    return fig


def loss_curves(curves: dict[str, dict[int, float] | list[float]], title: str,
                environment: str | None = None):
    """Loss against step; a list is taken as the loss of steps 1, 2, ..."""
    fig, ax = plots.figure(title, xlabel="step", ylabel="loss (cross-entropy)")
    for key, curve in curves.items():
        points = curve if isinstance(curve, dict) else dict(enumerate(curve, start=1))
        ax.plot(list(points), list(points.values()), "o-" if len(points) < 30 else "-",
                label=LABELS.get(key, key).replace("\n", " "), color=COLORS.get(key),
                alpha=0.8, ls={"all-course": "--", "all-course-graph": ":"}.get(key, "-"))
    ax.legend()
    if environment:
        plots.note(fig, f"recorded by make bench on {environment}")
    return fig


def memory_timelines(timelines: dict[str, Timeline], title: str):
    """Allocated memory during one step, one line per configuration, phases shaded."""
    fig, ax = plots.figure(title, xlabel="ms since the step began",
                           ylabel="MiB allocated above the start")
    shades = {"forward": "#e8f0fb", "backward": "#fbeee8", "optimizer": "#eefbe8"}
    first = next(iter(timelines.values()), None)
    for key, timeline in timelines.items():
        if not timeline.points:
            continue
        xs, ys = zip(*timeline.points, strict=True)
        ax.step(xs, ys, where="post", label=f"{key} (peak {timeline.peak:,.1f} MiB)",
                color=COLORS.get(key))
    if first is not None:  # the first configuration's phases
        for phase, (a, b) in first.phases.items():
            ax.axvspan(a, b, color=shades.get(phase, "#f0f0f0"), zorder=0)
            ax.text((a + b) / 2, 1.01, phase, transform=ax.get_xaxis_transform(), ha="center",
                    fontsize=8)
    ax.legend(loc="upper right")
    return fig
