"""The figure of lesson 06's assignment (exercise nvrtc.tiled_matmul): what one block of a tiled
matmul reads and writes, and which of its outputs one thread holds.

    fig = tile_figure.block_tiles(bk=8)

Three panels on one scale: A with the block's strip of rows and, in it, the tile of one step of
K; B with its strip of columns and the matching tile; C with the block's 64 x 64 tile and the 16
outputs of one thread (rows ty + 16 i, columns tx + 16 j: one of the mappings the assignment
allows).
"""

from __future__ import annotations

import matplotlib.patches as mpatches

from course_utils import plots

TILE = 64  # C's tile per block (the assignment's launch)
THREAD = (5, 2)  # (tx, ty) of the thread whose outputs are drawn


def _frame(ax, width: int, height: int, title: str) -> None:
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # row 0 at the top, as a matrix is written
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)
    ax.add_patch(mpatches.Rectangle((0, 0), width, height, fill=False, lw=1.2, clip_on=False))
    ax.set_xticks([])
    ax.set_yticks([])


def block_tiles(bk: int = 8, m: int = 256, n: int = 256, k: int = 160, step: int = 2):
    """A (m x k), B (k x n) and C (m x n) with block (1, 1)'s strips, its tiles at step ``step``
    of K (``bk`` wide) and one thread's 16 outputs; returns the figure."""
    if bk < 1 or step < 0 or (step + 1) * bk > k:
        raise ValueError(f"bk and step expected a tile inside K = {k}, got bk={bk}, "
                         f"step={step}")
    fig, (ax_a, ax_b, ax_c) = plots.figure(
        "One block of a tiled matmul: block (1, 1), one step of K", ncols=3, figsize=(11, 4.2))
    row0 = col0 = TILE  # block (1, 1)
    k0 = step * bk
    tx, ty = THREAD
    _frame(ax_a, k, m, f"A: the block's rows, tile {TILE} x {bk}")
    ax_a.add_patch(mpatches.Rectangle((0, row0), k, TILE, color="#c6dbef"))
    ax_a.add_patch(mpatches.Rectangle((k0, row0), bk, TILE, color="#1f77b4"))
    for i in range(4):  # the thread's rows of the tile: what it reads of A per k
        ax_a.add_patch(mpatches.Rectangle((k0, row0 + ty + 16 * i), bk, 1.6, color="#d62728"))
    _frame(ax_b, n, k, f"B: the block's columns, tile {bk} x {TILE}")
    ax_b.add_patch(mpatches.Rectangle((col0, 0), TILE, k, color="#fdd0a2"))
    ax_b.add_patch(mpatches.Rectangle((col0, k0), TILE, bk, color="#ff7f0e"))
    for j in range(4):  # and its columns of B's tile
        ax_b.add_patch(mpatches.Rectangle((col0 + tx + 16 * j, k0), 1.6, bk, color="#d62728"))
    _frame(ax_c, n, m, "C: the block's 64 x 64 tile")
    ax_c.add_patch(mpatches.Rectangle((col0, row0), TILE, TILE, color="#d9d9d9"))
    for i in range(4):
        for j in range(4):
            ax_c.add_patch(mpatches.Rectangle((col0 + tx + 16 * j, row0 + ty + 16 * i), 1.6,
                                              1.6, color="#d62728"))
    plots.note(fig, f"Per step the block loads the dark tiles of A and B into shared memory "
               f"once ({TILE} x {bk} + {bk} x {TILE} floats) and every thread multiplies from "
               "them.\nThread (tx, ty) = "
               f"({tx}, {ty}) holds the 16 red outputs of C in registers: per k it reads 4 "
               "values of A's tile (its red rows) and 4 of B's (its red columns) for 16 "
               "multiply-adds.")
    return fig
