"""Folded stacks (Brendan Gregg's format) and the flame graph drawn from them, as SVG."""

from __future__ import annotations

import html
import zlib
from collections import Counter
from pathlib import Path

from course_utils import env
from course_utils.profiling.trace import INDUCTOR_CPU_KERNEL


def write_folded(path: Path, stacks: Counter) -> None:
    """Brendan Gregg's folded format: ``frame;frame;frame <integer weight>`` per line."""
    lines = [f"{stack} {max(1, round(us))}" for stack, us in sorted(stacks.items()) if us > 0]
    path.write_text("\n".join(lines) + ("\n" if lines else ""))


def read_folded(path: str | Path) -> dict[str, int]:
    """Parse a folded-stacks file back into ``{stack: weight}``."""
    stacks: dict[str, int] = {}
    for line in Path(path).read_text().splitlines():
        stack, _, weight = line.rpartition(" ")
        if stack:
            stacks[stack] = stacks.get(stack, 0) + int(weight)
    return stacks


def _frame_color(name: str) -> str:
    """Warm colours for host code, green for GPU work, hue jitter from the name (stable)."""
    jitter = zlib.crc32(name.encode()) % 1000 / 1000
    if name.startswith("[GPU]"):
        r, g, b = 60 + 40 * jitter, 170 + 50 * jitter, 90
    elif name.startswith("aten::") or INDUCTOR_CPU_KERNEL.search(name):
        r, g, b = 230, 110 + 60 * jitter, 50
    elif name.startswith(("cuda", "cu")):
        r, g, b = 90, 140 + 40 * jitter, 220
    else:  # Python frames and annotations
        r, g, b = 235, 190 + 40 * jitter, 70 + 40 * jitter
    return f"rgb({int(r)},{int(g)},{int(b)})"


def flamegraph_svg(stacks: dict[str, float], title: str = "flame graph", width: int = 1200,
                   row_height: int = 17) -> str:
    """Render folded stacks as a flame graph (root at the bottom), in pure Python.

    Each frame is as wide as the weight of every stack through it; hover a frame for its full
    name, weight and share. The environment stamp is written under the title.
    """
    tree: dict = {"name": "all", "value": 0.0, "children": {}}
    for stack, weight in stacks.items():
        if weight <= 0:
            continue
        tree["value"] += weight
        node = tree
        for frame in stack.split(";"):
            node = node["children"].setdefault(frame, {"name": frame, "value": 0.0,
                                                       "children": {}})
            node["value"] += weight

    def depth(node: dict) -> int:
        return 1 + max((depth(c) for c in node["children"].values()), default=0)

    levels = depth(tree)
    top, pad = 48, 10
    height = top + levels * row_height + pad
    total = tree["value"] or 1.0
    scale = (width - 2 * pad) / total
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="Menlo,DejaVu Sans Mono,monospace" '
             f'font-size="11">',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fdfdf8"/>',
             f'<text x="{pad}" y="18" font-size="15" font-weight="bold">'
             f'{html.escape(title)}</text>',
             f'<text x="{pad}" y="34" font-size="10" fill="#555">'
             f'{html.escape(env.environment_line())}</text>']

    def draw(node: dict, x: float, level: int) -> None:
        w = node["value"] * scale
        if w < 0.5:
            return
        y = height - pad - (level + 1) * row_height
        share = node["value"] / total
        label = node["name"]
        parts.append(
            f'<g><title>{html.escape(label)}\n{node["value"]:,.0f} µs ({share:.1%})</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.6, 0.4):.2f}" '
            f'height="{row_height - 1}" '
            f'rx="2" fill="{_frame_color(label)}"/>')
        chars = int((w - 6) / 6.6)
        if chars >= 3:
            text = label if len(label) <= chars else label[:chars - 2] + ".."
            parts.append(f'<text x="{x + 3:.2f}" y="{y + row_height - 5}">'
                         f'{html.escape(text)}</text>')
        parts.append("</g>")
        child_x = x
        for child in sorted(node["children"].values(), key=lambda c: c["name"]):
            draw(child, child_x, level + 1)
            child_x += child["value"] * scale

    if tree["value"] > 0:
        draw(tree, pad, 0)
    else:
        parts.append(f'<text x="{pad}" y="{top + 12}">(no samples)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"

