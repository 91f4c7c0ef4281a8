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


def ceilings(ax, lines: list[tuple[float, str, str | None]], suffix: str = "") -> None:
    """Dashed horizontal lines for several ceilings ``(value, label, colour)``: one line and one
    label per distinct value (dtypes sharing a peak share it: "bfloat16 / float16 ..."), each
    label at the right end of its line, moved apart vertically where labels would collide;
    ``suffix`` ends every label ("datasheet peak")."""
    merged: dict[float, list[tuple[str, str | None]]] = {}
    for value, label, colour in lines:
        merged.setdefault(round(float(value), 6), []).append((label, colour))
    texts = []
    for value, entries in merged.items():
        colour = entries[0][1] if len({c for _, c in entries}) == 1 else "#000000"
        ax.axhline(value, ls="--", lw=1, color=colour or PROVIDER_COLORS["ceiling"], alpha=0.6)
        names = " / ".join(dict.fromkeys(lb for lb, _ in entries))
        texts.append(ax.annotate(f"{names}{' ' + suffix if suffix else ''}: {_cell(value)}",
                                 xy=(0.99, value), ha="right", va="bottom",
                                 xycoords=("axes fraction", "data"), xytext=(0, 2),
                                 textcoords="offset points", fontsize=8,
                                 color=colour or PROVIDER_COLORS["ceiling"],
                                 # readable where a curve or a bar runs behind the label
                                 bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 1}))
    _spread_vertically(ax, texts)


def _boxes_overlap(a, b, pad: float = 1.0) -> bool:
    return not (a.x1 + pad < b.x0 or b.x1 + pad < a.x0 or a.y1 + pad < b.y0 or b.y1 + pad < a.y0)


def _spread_vertically(ax, texts: list) -> None:
    """Nudge annotations (offset in points) up until none overlaps one placed before it."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    placed = []
    for text in sorted(texts, key=lambda t: t.xy[1]):
        for _ in range(40):
            box = text.get_window_extent(renderer)
            if not any(_boxes_overlap(box, other) for other in placed):
                break
            dx, dy = text.xyann
            text.xyann = (dx, dy + 4)
        placed.append(text.get_window_extent(renderer))


def label_points(ax, points: list[tuple[float, float, str]], fontsize: int = 7,
                 merge_px: float = 8.0) -> list:
    """Label scatter points without overlapping text: points closer than ``merge_px`` pixels
    share one label ("gelu: eager, triton"), and each label takes the first of a few positions
    around its point that collides with no label or point placed so far. Call it after the
    axes' scales and data are final. Returns the annotations."""
    ax.autoscale_view()
    renderer = ax.figure.canvas.get_renderer()
    to_px = ax.transData.transform
    clusters: list[list[tuple[float, float, str]]] = []
    for point in points:
        px = to_px((point[0], point[1]))
        for cluster in clusters:
            cx = to_px((cluster[0][0], cluster[0][1]))
            if abs(px[0] - cx[0]) < merge_px and abs(px[1] - cx[1]) < merge_px:
                cluster.append(point)
                break
        else:
            clusters.append([point])
    occupied = [_point_box(to_px((x, y))) for x, y, _ in points]
    texts = []
    offsets = [(5, -3), (5, 7), (5, -13), (-5, 7), (-5, -13), (5, 17), (5, -23), (-5, 17),
               (-5, -23), (5, 27), (5, -33)]
    for cluster in clusters:
        text = ax.annotate(_merged_label([lb for _, _, lb in cluster]),
                           (cluster[0][0], cluster[0][1]), fontsize=fontsize,
                           textcoords="offset points", xytext=offsets[0])
        for dx, dy in offsets:
            text.xyann = (dx, dy)
            text.set_ha("left" if dx > 0 else "right")
            box = text.get_window_extent(renderer)
            if not any(_boxes_overlap(box, other) for other in occupied):
                break
        occupied.append(text.get_window_extent(renderer))
        texts.append(text)
    return texts


def _point_box(xy):
    from matplotlib.transforms import Bbox

    return Bbox.from_extents(xy[0] - 3, xy[1] - 3, xy[0] + 3, xy[1] + 3)


def _merged_label(labels: list[str]) -> str:
    """"gelu eager", "gelu triton" -> "gelu: eager, triton" (a shared first word once)."""
    if len(labels) == 1:
        return labels[0]
    heads = {lb.split(" ", 1)[0] for lb in labels}
    if len(heads) == 1 and all(" " in lb for lb in labels):
        return f"{heads.pop()}: {', '.join(lb.split(' ', 1)[1] for lb in labels)}"
    return ", ".join(labels)


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes, off the data (``save`` keeps it in the PNG)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def note(fig, text: str) -> None:
    """A short explanation under the figure, above the environment stamp (break lines with
    newlines: a figure does not wrap text)."""
    fig.text(0.01, _lowest_text(fig) - 0.03, text, fontsize=8, ha="left", va="top")


def _lowest_text(fig) -> float:
    """The bottom, in figure coordinates, of the texts already placed under the axes and of the
    axes themselves with their tick labels and axis label (rotated labels reach far down)."""
    renderer = fig.canvas.get_renderer()
    to_fig = fig.transFigure.inverted().transform
    bottoms = [to_fig((0, t.get_window_extent(renderer).y0))[1] for t in fig.texts
               if t.get_position()[1] < 0.05]
    bottoms += [to_fig((0, ax.get_tightbbox(renderer).y0))[1] for ax in fig.axes]
    return min([0.0, *bottoms])


def stamp(fig) -> None:
    # the last line of a figure, under any note()
    fig.text(0.01, _lowest_text(fig) - 0.02, env.environment_line(), fontsize=7,
             color="#555555", ha="left", va="top")


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
