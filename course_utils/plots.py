"""One plot style for the course; every figure saved under ``var/figures/`` and stamped.

    fig, ax = plots.figure("GeLU: achieved bandwidth", xlabel="elements", ylabel="GB/s")
    ax.plot(...)
    plots.ceiling(ax, copy_gbs, "copy bandwidth (measured)")
    plots.save(fig, "gelu_bandwidth")      # stamps the environment, saves PNG, returns the path

The stamp (device, driver, CUDA, torch, Triton, git revision) sits at the bottom of each figure so
a screenshot pasted anywhere still says where the numbers came from.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use(matplotlib.get_backend())  # keep the notebook's inline backend when there is one
import matplotlib.pyplot as plt  # noqa: E402

from course_utils import env  # noqa: E402

STYLE = {
    "figure.figsize": (8, 4.5),
    "figure.dpi": 100,
    "savefig.dpi": 120,
    "savefig.bbox": "tight",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titleweight": "bold",
    "legend.frameon": False,
    "font.size": 10,
}
# colour per provider, so a kernel keeps its colour from one lesson's plot to the next
PROVIDER_COLORS = {
    "eager": "#7f7f7f", "manual": "#bcbd22", "compile": "#9467bd", "triton": "#1f77b4",
    "cuda": "#2ca02c", "nvrtc": "#d62728", "load_inline": "#ff7f0e", "ceiling": "#000000",
}


def apply_style() -> None:
    plt.rcParams.update(STYLE)


def figure(title: str, xlabel: str = "", ylabel: str = "", ncols: int = 1, **kwargs):
    """A new figure in the course style: returns ``(fig, ax)`` (``ax`` an array when ncols > 1)."""
    apply_style()
    fig, ax = plt.subplots(1, ncols, **kwargs)
    axes = ax if ncols > 1 else [ax]
    fig.suptitle(title, fontweight="bold")
    for a in axes:
        a.set_xlabel(xlabel)
        a.set_ylabel(ylabel)
    return fig, ax


def color(provider: str) -> str | None:
    """The course colour for a provider name (first word of a kernel label)."""
    return PROVIDER_COLORS.get(provider.split()[0].split("/")[-1])


def ceiling(ax, value: float, label: str) -> None:
    """A dashed horizontal line for a ceiling (peak, copy bandwidth) with its label."""
    ax.axhline(value, ls="--", lw=1.2, color=PROVIDER_COLORS["ceiling"], alpha=0.7)
    ax.annotate(f"{label}: {_cell(float(value))}", xy=(0.01, value),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3), textcoords="offset points", fontsize=8)


def stamp(fig) -> None:
    fig.text(0.01, -0.02, env.environment_line(), fontsize=7, color="#555555", ha="left",
             va="top")


def save(fig, name: str) -> Path:
    """Stamp the environment on ``fig``, save it as ``var/figures/<name>.png``, return the path."""
    stamp(fig)
    path = env.var_dir("figures") / f"{name}.png"
    fig.savefig(path)
    return path


def stamped_table(rows: list[dict], title: str | None = None) -> str:
    """A plain-text table of ``rows`` (dicts with the same keys) with the environment stamp."""
    if not rows:
        return f"{title or 'table'}: (no rows)\n{env.environment_line()}"
    keys = list(rows[0])
    cells = [[_cell(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    # numbers right-aligned (digits line up), text left-aligned
    numeric = [all(isinstance(r.get(k), int | float) or r.get(k) is None for r in rows)
               for k in keys]
    line = lambda values: "  ".join(
        v.rjust(w) if num else v.ljust(w)
        for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()
    out = [title] if title else []
    out += [line(keys), line(["-" * w for w in widths]), *(line(c) for c in cells),
            f"[{env.environment_line()}]"]
    return "\n".join(out)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "" if value is None else str(value)
