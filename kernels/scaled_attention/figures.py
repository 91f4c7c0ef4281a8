"""Figure of lesson 19's exercise hopper_backward.quantize, drawn from ``quantize.py`` itself.

    figures.quantize_tiles(seq=300, head_dim=80)   # one program's tile, its scale, e4m3's range

The block size, the largest e4m3 value, the grid and ``BLOCK_D`` are the quantiser's
(:data:`~kernels.scaled_attention.quantize.SCALE_BLOCK`, ``E4M3_MAX``, ``scale_blocks``,
``next_power_of_2``); the values and the strides come from running its PyTorch reference
(``quantize_blocks_torch``) on a small random tensor, so the picture is what the kernel must
produce. Returns a matplotlib figure, as lesson 16's and 17's figure modules do.
"""

from __future__ import annotations

import math

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import torch

from kernels.scaled_attention import quantize
from kernels.scaled_matmul import E4M3
from kernels.triton_launch import next_power_of_2

PROGRAM_COLORS = plt.get_cmap("Pastel1").colors
MASKED = "#bdbdbd"


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=0.5, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        backing = dict(facecolor="white", edgecolor="none", pad=1) if "hatch" in kw else None
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                bbox=backing, in_layout=False)


def _programs(ax, seq: int, head_dim: int, bh: int) -> None:
    """One (batch, head) of x: rows in programs of SCALE_BLOCK, BLOCK_D columns each, the lanes
    past ``seq`` and ``head_dim`` masked (read as 0, so never the block's largest |x|)."""
    block, block_d = quantize.SCALE_BLOCK, next_power_of_2(head_dim)
    n = quantize.scale_blocks(seq)
    for b in range(n):
        rows = min(block, seq - b * block)
        _box(ax, 0, b * block, head_dim, rows, f"program ({b}, {bh})\nrows {b * block}-"
             f"{b * block + rows - 1}: one scale", face=PROGRAM_COLORS[b % len(PROGRAM_COLORS)],
             lw=1.0)
        if rows < block:  # the ragged last block
            _box(ax, 0, b * block + rows, block_d, block - rows, f"rows ≥ seq = {seq}: masked",
                 face=MASKED, hatch="//", lw=0.3, fontsize=7)
    if block_d > head_dim:
        _box(ax, head_dim, 0, block_d - head_dim, min(seq, n * block), "columns ≥\nhead_dim\n"
             "masked", face=MASKED, hatch="//", lw=0.3, fontsize=7)
    ax.text(head_dim / 2, -4, f"head_dim = {head_dim}", ha="center", va="bottom", fontsize=8)
    ax.text(block_d, -4, f"BLOCK_D = {block_d}", ha="right", va="bottom", fontsize=8)
    ax.set_title(f"x[b, h] (bh = b·H + h = {bh}): {seq} tokens in blocks of {block}\nmasked "
                 "lanes load other=0.0: they add nothing to the block's largest |x|", fontsize=9)
    ax.set_xlim(-2, block_d + 2)
    ax.set_ylim(n * block + 4, -22)
    ax.set_aspect("equal")
    ax.axis("off")


def _scales(ax, batch: int, heads: int, n_blocks: int, bh: int) -> None:
    """The (B, H, n_blocks) float32 scales: program (block, bh) writes one cell,
    ``scale_ptr + bh · n_blocks + block``."""
    for r in range(batch * heads):
        for b in range(n_blocks):
            mine = r == bh
            _box(ax, b, r, 1, 1, f"{r * n_blocks + b}", fontsize=8, lw=1.2 if mine else 0.4,
                 face=PROGRAM_COLORS[b % len(PROGRAM_COLORS)] if mine else "#f7f7f7")
        ax.text(-0.15, r + 0.5, f"b={r // heads}, h={r % heads}", ha="right", va="center",
                fontsize=7)
    for b in range(n_blocks):
        ax.text(b + 0.5, -0.1, f"block {b}", ha="center", va="bottom", fontsize=7)
    ax.set_title(f"scale: float32 ({batch}, {heads}, {n_blocks}), contiguous\nnumber = offset "
                 "bh · n_blocks + block", fontsize=9)
    ax.set_xlim(-1.6, n_blocks + 0.1)
    ax.set_ylim(batch * heads + 0.1, -0.7)
    ax.set_aspect("equal")
    ax.axis("off")


def _range(ax, x: torch.Tensor) -> None:
    """Where one block's values land in e4m3 once divided by its scale, and with one token made
    1000 times larger: the scale follows the block's largest |x|, the rest move down."""
    finfo = torch.finfo(E4M3)
    normal, smallest = finfo.tiny, finfo.tiny * finfo.eps  # 2^-6, 2^-9 (subnormal steps)
    spiky = x.clone()
    spiky[:, :, 5] *= 1000  # one outlier token in block 0
    bins = [v / 4 for v in range(-48, 40)]  # log2 |x8| in quarter steps, 2^-12 .. 2^10
    top = math.log2(quantize.E4M3_MAX)
    regions = ((-12, math.log2(smallest) - 1, "#f0f0f0", "0"),
               (math.log2(smallest) - 1, math.log2(normal), "#fdd0a2", "subnormal:\nfewer bits"),
               (math.log2(normal), top, "#c7e9c0", "normal: 3 mantissa bits"))
    for low, high, face, label in regions:
        ax.axvspan(low, high, color=face, lw=0)
        ax.text((low + high) / 2, 0.97, label, transform=ax.get_xaxis_transform(), ha="center",
                va="top", fontsize=7)
    ax.axvline(top, color="black", lw=1)
    for data, color, name in ((x, "#3182bd", "random block"),
                              (spiky, "#de2d26", "same block, one token x1000")):
        x8, scale = quantize.quantize_blocks_torch(data)
        first = x8[0, 0, :quantize.SCALE_BLOCK].float().abs().flatten()
        logs = first[first > 0].log2().clamp(min=-12).tolist()
        ax.hist(logs, bins=bins, histtype="step", color=color, lw=1.5,
                label=f"{name}: scale = amax / {quantize.E4M3_MAX:g} = {scale[0, 0, 0]:.3g}, "
                      f"{(first == 0).sum().item()} zeros")
    ax.set_xlabel(f"log2 |x8|, x8 = e4m3(x / scale): the block's largest |x| lands on "
                  f"{quantize.E4M3_MAX:g} = 2^{top:.2f}; x ≈ scale · x8", fontsize=8)
    ax.set_ylabel("values of block 0", fontsize=8)
    ax.set_xlim(-12, 10)
    ax.legend(fontsize=7, loc="center left")
    ax.set_title("one scale per block: e4m3 keeps 3 bits from 2^-6 up to 448", fontsize=9)


def _strides(ax, x8_q: torch.Tensor, x8_v: torch.Tensor, rows: int = 8, cols: int = 4) -> None:
    """Memory offsets of the first rows x cols elements of x8 (Q, K: D contiguous) and of V's
    x8 (keys contiguous): the same kernel, other strides s8s, s8d."""
    for k, (t, name) in enumerate(((x8_q, "Q, K: x8[b, h, s, d]"),
                                   (x8_v, "V: the same view, keys contiguous"))):
        s8s, s8d = t.stride(2), t.stride(3)
        x0 = k * (cols + 2.5)
        for s in range(rows):
            for d in range(cols):
                _box(ax, x0 + d, s, 1, 1, str(s * s8s + d * s8d), fontsize=7,
                     face="#c6dbef" if (s * s8s + d * s8d) < cols else "white")
        ax.text(x0 + cols / 2, -0.2, f"{name}\nstrides (s8s, s8d) = ({s8s}, {s8d})",
                ha="center", va="bottom", fontsize=7)
    ax.set_title(f"memory offset of x8[0, 0, s, d] (S = {x8_q.shape[2]}, D = {x8_q.shape[3]}; "
                 "rows s, columns d)", fontsize=9)
    ax.set_xlim(-0.2, 2 * cols + 2.7)
    ax.set_ylim(rows + 0.2, -2.0)
    ax.set_aspect("equal")
    ax.axis("off")


def quantize_tiles(seq: int = 300, head_dim: int = 80, batch: int = 2, heads: int = 2,
                   bh: int = 1, seed: int = 0):
    """Exercise hopper_backward.quantize in one figure: program ``(block, bh)``'s tile of
    ``SCALE_BLOCK`` tokens x ``BLOCK_D`` (the lanes past ``seq`` and ``head_dim`` masked), the
    scale it writes into the ``(B, H, n_blocks)`` grid, where one block's values land in e4m3
    once divided by that scale, and the strides of ``x8`` for Q and K against V's."""
    for name, value, low in (("seq", seq, 1), ("head_dim", head_dim, 1), ("batch", batch, 1),
                             ("heads", heads, 1), ("bh", bh, 0)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} expected an int >= {low}, got {value!r}")
    if bh >= batch * heads:
        raise ValueError(f"bh expected 0..{batch * heads - 1} (batch x heads), got {bh}")
    n = quantize.scale_blocks(seq)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, seq, head_dim, generator=gen)
    fig = plt.figure(figsize=(14, 9), layout="constrained")
    grid = fig.add_gridspec(2, 3, width_ratios=[1.2, 1.0, 1.0], height_ratios=[1.1, 1.0])
    fig.suptitle(f"quantize_kernel: one program per block of {quantize.SCALE_BLOCK} tokens of one "
                 f"(batch, head); scale = max(amax / {quantize.E4M3_MAX:g}, 2^"
                 f"{math.log2(quantize.SCALE_FLOOR):.0f}), x8 = e4m3(clamp(x / scale, ±"
                 f"{quantize.E4M3_MAX:g}))", fontweight="bold", fontsize=10)
    _programs(fig.add_subplot(grid[:, 0]), seq, head_dim, bh)
    _scales(fig.add_subplot(grid[0, 1]), batch, heads, n, bh)
    small = torch.randn(1, 1, 8, 4, generator=gen)
    _strides(fig.add_subplot(grid[0, 2]), quantize.quantize_blocks_torch(small)[0],
             quantize.quantize_blocks_torch(small, keys_contiguous=True)[0])
    _range(fig.add_subplot(grid[1, 1:]), x)
    return fig
