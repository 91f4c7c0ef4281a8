"""Figures of lesson 13's section 3 (block pointers and tensor descriptors), drawn from
``triton_tiles.py`` and the exercise's own launch.

    figures.ragged_tile(10, 13)        # the edge tile a block pointer loads, each padding_option
    figures.transpose_tiles(52, 100)   # exercise triton_tools.transpose: which tile goes where

:func:`ragged_tile` runs the course's ``edge_tile`` kernel (Triton's interpreter on a CPU) on a
matrix whose values are their own indices, so every cell shows what the kernel loaded there.
:func:`transpose_tiles` draws the exercise's grid (``BM`` x ``BN`` tiles, ``cdiv`` of each side)
and the two descriptors its hint gives. Each returns a matplotlib figure.
"""

from __future__ import annotations

import math
import warnings

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import torch

from course_utils import env
from kernels.tiles import triton_tiles
from kernels.triton_launch import cdiv

PROGRAM_COLORS = plt.get_cmap("Pastel2").colors
PADDING, INSIDE, CHOSEN = "#d9d9d9", "#c6dbef", "#fdae6b"
EXERCISE_BLOCK = (16, 32)  # BM, BN: exercises/triton_tools.py's launch (non-square on purpose)


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=0.5, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        backing = dict(facecolor="white", edgecolor="none", pad=1) if "hatch" in kw else None
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                bbox=backing, in_layout=False)


def _bare(ax, width, height, top=0.0, left=0.0):
    ax.set_xlim(left - 0.3, width + 0.3)
    ax.set_ylim(height + 0.3, top - 0.3)  # row 0 at the top, as a matrix is written
    ax.set_aspect("equal")
    ax.axis("off")


# -- what a ragged tile holds ------------------------------------------------------------------


def loaded_edge_tiles(m: int, n: int, block: tuple[int, int] = (8, 8)) -> dict[str, torch.Tensor]:
    """``{padding: tile}``: the bottom-right tile of an ``m x n`` matrix holding 0, 1, 2, ...
    row by row, as ``triton_tiles.edge_tile`` loads it with each ``padding_option``."""
    x = torch.arange(m * n, dtype=torch.float32, device=env.DEFAULT_DEVICE).reshape(m, n)
    with warnings.catch_warnings():  # Triton 3.8 deprecates block pointers: the lesson says so
        warnings.filterwarnings("ignore", message="tl.make_block_ptr is deprecated")
        return {p: triton_tiles.edge_tile(x, p, block).cpu() for p in ("zero", "nan")}


def ragged_tile(m: int = 10, n: int = 13, block: tuple[int, int] = (8, 8)):
    """Left: an ``m x n`` matrix covered by ``block`` tiles, one program each, the bottom-right
    tile outlined. Right: that tile as a block pointer loads it with ``padding_option="zero"``
    and ``"nan"``: the cells inside the matrix hold its values (their own indices), the rest
    what the padding says."""
    bm, bn = block
    if not (1 <= m <= 64 and 1 <= n <= 64 and 1 <= bm <= 16 and 1 <= bn <= 16):
        raise ValueError(f"m, n expected 1..64 and the block 1..16 a side, got {m}, {n}, {block}")
    tiles = loaded_edge_tiles(m, n, block)
    row0, col0 = (m - 1) // bm * bm, (n - 1) // bn * bn  # edge_tile's corner
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), layout="constrained",
                             gridspec_kw={"width_ratios": [n + bn, bn + 1, bn + 1]})
    fig.suptitle(f"a ragged tile: the {bm} x {bn} tile at ({row0}, {col0}) of a {m} x {n} "
                 f"matrix holds {min(bm, m - row0)} x {min(bn, n - col0)} of its elements",
                 fontweight="bold")
    ax = axes[0]
    for p0 in range(cdiv(m, bm)):
        for p1 in range(cdiv(n, bn)):
            face = PROGRAM_COLORS[(p0 * cdiv(n, bn) + p1) % len(PROGRAM_COLORS)]
            _box(ax, p1 * bn, p0 * bm, bn, bm, None, face=face, lw=0.3, alpha=0.6)
            ax.text(p1 * bn + 0.3, p0 * bm + 0.3, f"program ({p0}, {p1})", ha="left",
                    va="top", fontsize=7)
    _box(ax, 0, 0, n, m, None, face="none", lw=2.0)
    _box(ax, col0, row0, bn, bm, None, face="none", edge="#d94801", lw=2.0, ls="--")
    ax.text(n / 2, m + 0.4, f"the matrix: {m} x {n} (solid); past it, the tiles reach\n"
            "memory the matrix does not own (outside the solid line)", ha="center", va="top",
            fontsize=8)
    _bare(ax, cdiv(n, bn) * bn, cdiv(m, bm) * bm + 2.5)
    for ax, (padding, tile) in zip(axes[1:], tiles.items(), strict=True):
        for r in range(bm):
            for c in range(bn):
                inside = row0 + r < m and col0 + c < n
                value = tile[r, c].item()
                text = "nan" if math.isnan(value) else f"{value:g}"
                _box(ax, c, r, 1, 1, text, face=INSIDE if inside else PADDING, lw=0.3,
                     fontsize=7)
        ax.set_title(f'padding_option="{padding}"', fontsize=9)
        _bare(ax, bn, bm)
    axes[1].text(bn / 2, bm + 0.4, "blue: inside the matrix (value = its index r·n + c)\n"
                 "grey: boundary_check=(0, 1) masked it", ha="center", va="top", fontsize=7)
    axes[2].text(bn / 2, bm + 0.4, '"zero" for a sum or tl.dot over K; "nan" makes a\n'
                 "forgotten mask show; a tensor descriptor pads with zeros", ha="center",
                 va="top", fontsize=7)
    return fig


# -- exercise triton_tools.transpose -------------------------------------------------------------


def transpose_tiles(m: int = 52, n: int = 100, program: tuple[int, int] = (1, 2),
                    block: tuple[int, int] = EXERCISE_BLOCK):
    """x (``m x n``) in ``BM x BN`` tiles, one program each, and z = xᵀ (``n x m``) in ``BN x
    BM`` tiles: program ``(p0, p1)`` loads x's tile at rows ``p0·BM``, columns ``p1·BN`` and
    stores it transposed at z's rows ``p1·BN``, columns ``p0·BM``. Ragged tiles hatched: the
    descriptor masks their edges."""
    bm, bn = block
    p0, p1 = program
    grid = (cdiv(m, bm), cdiv(n, bn))
    if not (m > 0 and n > 0 and 0 <= p0 < grid[0] and 0 <= p1 < grid[1]):
        raise ValueError(f"program expected (0..{grid[0] - 1}, 0..{grid[1] - 1}) for a {m} x {n} "
                         f"x in {bm} x {bn} tiles, got {program}")
    fig, axes = plt.subplots(1, 2, figsize=(14, 7.5), layout="constrained",
                             gridspec_kw={"width_ratios": [n, m]})
    fig.suptitle(f"transpose_kernel: grid (cdiv(M, BM), cdiv(N, BN)) = {grid}, BM = {bm}, "
                 f"BN = {bn}; offsets in elements, not tiles", fontweight="bold")
    panels = ((axes[0], m, n, bm, bn, False, f"x: M x N = {m} x {n}\ndescriptor shape [M, N], "
               f"strides [N, 1], block [BM, BN]\nload at [p0·BM, p1·BN]"),
              (axes[1], n, m, bn, bm, True, f"z = xᵀ: N x M = {n} x {m}\ndescriptor shape "
               f"[N, M], strides [M, 1], block [BN, BM]\nstore tl.trans(tile) at [p1·BN, p0·BM]"))
    for ax, rows, cols, th, tw, transposed, title in panels:
        for a in range(grid[0]):
            for b in range(grid[1]):
                r, c = (b, a) if transposed else (a, b)  # z's tile (p1, p0) is x's (p0, p1)
                y, x = r * th, c * tw
                h, w = min(th, rows - y), min(tw, cols - x)
                ragged = h < th or w < tw
                face = CHOSEN if (a, b) == program else PROGRAM_COLORS[(a * grid[1] + b)
                                                                       % len(PROGRAM_COLORS)]
                _box(ax, x, y, w, h, f"({a}, {b})", face=face, lw=0.6, fontsize=7,
                     **({"hatch": ".."} if ragged else {}))
        ax.set_title(title, fontsize=9)
        _bare(ax, cols, rows)
    axes[0].text(n / 2, m + 1, "number: the program (p0, p1); dotted: a ragged tile, its "
                 "edges masked by the descriptor", ha="center", va="top", fontsize=8)
    return fig
