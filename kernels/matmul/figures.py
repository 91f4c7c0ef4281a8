"""Figures of lesson 07, drawn from the same constants as the kernel's generated header.

    cfg = TileConfig(bm=128, bn=128, bk_bytes=64, wm=64, wn=64, stages=3)  # or any object
    figures.tile_hierarchy(cfg)   # block tile -> warp tiles -> m16n8 mma tiles; the K loop
    figures.fragments()           # which lane holds which element of A, B, C (m16n8k16)
    figures.swizzle_banks(cfg)    # shared-memory bank groups with and without the XOR swizzle
    figures.pipeline(cfg)         # cp.async stages over time
    figures.staircase(measured, cublas)   # the steps' TFLOP/s, each bar labelled with its value

Each function returns a matplotlib figure; :func:`save_all` stamps and saves them under
``var/figures/``. A config is anything with the attributes ``bm, bn, bk_bytes, wm, wn, stages``
(the full kernel's tile configuration, or :class:`TileConfig`).
"""

from __future__ import annotations

import dataclasses

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt

from course_utils import plots
from kernels.matmul.mma import swizzle  # the one definition: the kernel's layout

FIELDS = ("bm", "bn", "bk_bytes", "wm", "wn", "stages")
CHUNK = 16  # bytes: one ldmatrix row, one cp.async, one vector load
BANK_GROUPS = 8  # 32 banks x 4 bytes = 128 bytes = 8 chunks of 16 bytes per shared-memory "row"
GROUP_COLORS = plt.get_cmap("tab10").colors[:BANK_GROUPS]


@dataclasses.dataclass(frozen=True)
class TileConfig:
    """A tile configuration: block tile ``bm x bn``, K slice of ``bk_bytes`` per row, warp tile
    ``wm x wn``, ``stages`` shared-memory buffers in the cp.async pipeline."""

    bm: int = 128
    bn: int = 128
    bk_bytes: int = 64
    wm: int = 64
    wn: int = 64
    stages: int = 3


def check_config(config) -> None:
    """Raise ValueError naming the field unless ``config`` describes a valid tiling."""
    missing = [f for f in FIELDS if not hasattr(config, f)]
    if missing:
        raise ValueError(f"config expected attributes {', '.join(FIELDS)}, "
                         f"got {type(config).__name__} without {', '.join(missing)}")
    for name in FIELDS:
        value = getattr(config, name)
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"config.{name} expected a positive int, got {value!r}")
    if config.bk_bytes not in (16, 32, 64, 128):
        raise ValueError(f"config.bk_bytes expected 16, 32, 64 or 128, got {config.bk_bytes}")
    if config.wm % 16 or config.bm % config.wm:
        raise ValueError(f"config.wm expected a multiple of 16 dividing bm={config.bm}, "
                         f"got {config.wm}")
    if config.wn % 8 or config.bn % config.wn:
        raise ValueError(f"config.wn expected a multiple of 8 dividing bn={config.bn}, "
                         f"got {config.wn}")
    if config.stages < 2:
        raise ValueError(f"config.stages expected 2 or more (one loading, one computing), "
                         f"got {config.stages}")


def bank_group(row: int, physical_chunk: int, chunks_per_row: int) -> int:
    """Which of the 8 bank groups (16 bytes = 4 banks each) a stored chunk occupies."""
    return (row * chunks_per_row + physical_chunk) % BANK_GROUPS


def conflict_ways(chunk: int, chunks_per_row: int, swizzled: bool, first_row: int = 0) -> int:
    """How many of the 8 rows one ldmatrix phase reads share the busiest bank group
    (1: conflict-free; n: the phase takes n shared-memory wavefronts)."""
    groups = [bank_group(r, swizzle(r, chunk, chunks_per_row) if swizzled else chunk,
                         chunks_per_row) for r in range(first_row, first_row + 8)]
    return max(groups.count(g) for g in set(groups))


# -- the mma.sync m16n8k16 fragments (PTX ISA, "Matrix fragments for mma.m16n8k16") -------------


def fragment_a(lane: int) -> list[tuple[int, int, int]]:
    """``(row, col, register)`` of the 8 A elements (16 x 16, row-major) lane holds."""
    group, pair = lane // 4, (lane % 4) * 2
    return [(group + 8 * (reg % 2), pair + j + 8 * (reg // 2), reg)
            for reg in range(4) for j in range(2)]


def fragment_b(lane: int) -> list[tuple[int, int, int]]:
    """``(k, n, register)`` of the 4 B elements (16 x 8, "col": k inside a column)."""
    group, pair = lane // 4, (lane % 4) * 2
    return [(pair + j + 8 * reg, group, reg) for reg in range(2) for j in range(2)]


def fragment_c(lane: int) -> list[tuple[int, int, int]]:
    """``(row, col, index)`` of the 4 fp32 accumulators (16 x 8) lane holds."""
    group, pair = lane // 4, (lane % 4) * 2
    return [(group + 8 * (i // 2), pair + i % 2, i) for i in range(4)]


# -- drawing helpers --------------------------------------------------------------------------


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=1.0, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        # a white backing keeps the label readable on hatched boxes
        backing = dict(facecolor="white", edgecolor="none", pad=1) if "hatch" in kw else None
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                bbox=backing)


def _bare(ax, width, height):
    pad = 0.01 * max(width, height)  # so the outer box edges are not clipped
    ax.set_xlim(-pad, width + pad)
    ax.set_ylim(height + pad, -pad)  # row 0 at the top, as a matrix is written
    ax.set_aspect("equal")
    ax.axis("off")


# -- (a) the tile hierarchy --------------------------------------------------------------------


def tile_hierarchy(config, elem_bytes: int = 2, k_slices: int = 4):
    """Block tile ``bm x bn`` split into warp tiles ``wm x wn``, warp 0 split into m16n8 mma
    tiles; A's block row and B's block column cut into BK slices (the K loop)."""
    check_config(config)
    if elem_bytes not in (1, 2, 4):
        raise ValueError(f"elem_bytes expected 1, 2 or 4, got {elem_bytes}")
    bm, bn, wm, wn = config.bm, config.bn, config.wm, config.wn
    bk = config.bk_bytes // elem_bytes
    kw = bk * k_slices  # the stretch of K drawn
    gap = max(bm, bn) * 0.15
    fig, ax = plt.subplots(figsize=(8, 8 * (kw + gap + bm) / (kw + gap + bn)),
                           layout="constrained")
    fig.suptitle(f"tiles: block {bm}x{bn}, warp {wm}x{wn}, mma m16n8k16\n"
                 f"K loop in slices of BK = {bk} elements ({config.bk_bytes} bytes)",
                 fontweight="bold")
    ox, oy = kw + gap, kw + gap  # C's top-left corner: A to its left, B above
    # A [bm x K] and B [K x bn] in BK slices: iteration s of the K loop uses slice s of each
    for s in range(k_slices):
        face = "#c6dbef" if s == 0 else "#f0f0f0"
        _box(ax, s * bk, oy, bk, bm, face=face, text=f"k{s}" if bk >= 8 else None)
        _box(ax, ox, s * bk, bn, bk, face=face, text=f"k{s}" if bk >= 8 else None)
    ax.text(kw / 2, oy + bm + gap * 0.3, f"A: {bm} rows x K\nin BK={bk} slices",
            ha="center", va="top", fontsize=9)
    ax.text(ox - gap * 0.2, kw / 2, f"B: K x {bn} columns\n(stored K-major)", ha="right",
            va="center", fontsize=9)
    # C: warps, and warp 0's mma tiles
    for i in range(bm // wm):
        for j in range(bn // wn):
            warp = i * (bn // wn) + j
            label = None if warp == 0 else f"warp {warp}\n{wm}x{wn}"
            _box(ax, ox + j * wn, oy + i * wm, wn, wm, text=label, face="#fdd0a2", lw=1.5)
    for i in range(wm // 16):
        for j in range(wn // 8):
            _box(ax, ox + j * 8, oy + i * 16, 8, 16, face="#fee6ce", lw=0.4)
    _box(ax, ox, oy, 8, 16, face="#e6550d", lw=0.8)
    ax.text(ox + bn / 2, oy + bm + gap * 0.3,
            f"C block tile {bm}x{bn}: {(bm // wm) * (bn // wn)} warps\nwarp 0: "
            f"{wm // 16}x{wn // 8} mma tiles of 16x8 (one dark)", ha="center", va="top",
            fontsize=9)
    _bare(ax, ox + bn, oy + bm + gap)
    return fig


# -- (b) the fragments ---------------------------------------------------------------------------


def fragments():
    """Lane (number) and register (colour) of every element of A 16x16, B 16x8, C 16x8 in one
    mma.sync.m16n8k16 (the layout is fixed by the instruction, not by the tile config)."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 7), gridspec_kw={"width_ratios": [16, 8, 8]},
                             layout="constrained")
    fig.suptitle("mma.sync.m16n8k16: which lane holds which element (colour = register)",
                 fontweight="bold")
    panels = [("A 16x16 (row-major): 4 regs of 2 bf16", fragment_a, 16, "col k", "row m"),
              ("B 16x8 (col): 2 regs of 2 bf16", fragment_b, 8, "col n", "k"),
              ("C 16x8: 4 fp32", fragment_c, 8, "col n", "row m")]
    colors = plt.get_cmap("Set2").colors
    for ax, (title, layout, cols, xlabel, ylabel) in zip(axes, panels, strict=True):
        for lane in range(32):
            for row, col, reg in layout(lane):
                _box(ax, col, row, 1, 1, text=str(lane), face=colors[reg], lw=0.3, fontsize=7)
        _bare(ax, cols, 16)
        ax.set_title(f"{title}\n{xlabel} across, {ylabel} down", fontsize=9)
    handles = [mpatches.Patch(color=colors[r], label=f"register {r}") for r in range(4)]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=9)
    return fig


# -- (c) the swizzle -----------------------------------------------------------------------------


def swizzle_banks(config, rows: int = 16, chunk: int = 0):
    """Bank group of each (row, 16-byte chunk) of a shared tile, without and with the XOR
    swizzle; outlined: the 8 rows one ldmatrix phase reads (logical chunk ``chunk``)."""
    check_config(config)
    c = config.bk_bytes // CHUNK
    if not 0 <= chunk < c:
        raise ValueError(f"chunk expected 0..{c - 1} for bk_bytes={config.bk_bytes}, got {chunk}")
    if rows < 8:
        raise ValueError(f"rows expected at least 8 (one ldmatrix phase), got {rows}")
    fig, axes = plt.subplots(1, 2, figsize=(max(6.5, 2 + 1.1 * c), 1.8 + 0.45 * rows),
                             layout="constrained")
    fig.suptitle(f"shared tile: rows of {config.bk_bytes} bytes = {c} chunks of 16 B\n"
                 f"number = logical chunk, colour = bank group (4 banks each)",
                 fontweight="bold")
    for ax, swizzled in zip(axes, (False, True), strict=True):
        for r in range(rows):
            for logical in range(c):
                phys = swizzle(r, logical, c) if swizzled else logical
                group = bank_group(r, phys, c)
                reading = logical == chunk and r < 8
                _box(ax, phys, r, 1, 1, text=f"c{logical}", face=GROUP_COLORS[group],
                     edge="black", lw=2.5 if reading else 0.3, fontsize=8,
                     alpha=1.0 if reading else 0.45)
        ways = conflict_ways(chunk, c, swizzled)
        verdict = "conflict-free" if ways == 1 else f"{ways}-way bank conflict"
        name = "with XOR swizzle" if swizzled else "plain (row-major)"
        ax.set_title(f"{name}\nldmatrix of chunk {chunk}, rows 0-7:\n{verdict}", fontsize=9)
        _bare(ax, c, rows)
    return fig


# -- (d) the pipeline ----------------------------------------------------------------------------


def pipeline_schedule(stages: int, k_tiles: int) -> list[tuple[int, str, int, float, float]]:
    """``(buffer, "load"|"mma", k_tile, start, end)`` for an idealised cp.async pipeline.

    Time unit: the math of one k tile. The prologue issues loads of tiles 0..S-2; iteration t
    issues the load of tile t+S-1 into the buffer tile t-1 just left, then computes tile t. A
    load that takes S-1 units arrives just in time, so after the prologue the tensor cores never
    wait: that is what enough stages buys."""
    if stages < 2 or k_tiles < 1:
        raise ValueError(f"stages expected >= 2 and k_tiles >= 1, got {stages}, {k_tiles}")
    latency, events = stages - 1, []
    for t in range(k_tiles):
        issue = t if t >= latency else 0  # at the start of iteration t - (S-1)'s math
        events.append((t % stages, "load", t, issue, issue + latency))
        events.append((t % stages, "mma", t, latency + t, latency + t + 1))
    return events


def pipeline(config, k_tiles: int = 8):
    """cp.async stages over time: each shared buffer alternates between being loaded and being
    read by the mma loop; loads of tile t+S-1 overlap the math of tile t."""
    check_config(config)
    stages = config.stages
    events = pipeline_schedule(stages, k_tiles)
    end = max(e[4] for e in events)
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * end, 1.2 + 0.6 * (stages + 1)),
                           layout="constrained")
    fig.suptitle(f"{stages}-stage cp.async pipeline: loads of k tile t+{stages - 1} overlap "
                 f"the mma of tile t", fontweight="bold")
    for buffer, kind, tile, start, stop in events:
        if kind == "load":
            text = f"load k{tile}" if stop - start >= 2 else f"ld{tile}"
            _box(ax, start, buffer, stop - start, 0.8, text=text, face="#c6dbef",
                 hatch="//", fontsize=8)
        else:
            _box(ax, start, buffer, stop - start, 0.8, text=f"mma{tile}", face="#fdae6b",
                 fontsize=8)
            _box(ax, start, stages, stop - start, 0.8, face="#e6550d")  # tensor-core lane
    ax.set_xlim(0, end)
    ax.set_ylim(stages + 1, -0.2)
    ax.set_yticks([b + 0.4 for b in range(stages + 1)],
                  [f"smem buffer {b}" for b in range(stages)] + ["tensor cores"])
    ax.set_xlabel("time (units of one k tile's mma)")
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(False)
    return fig


# -- the staircase: every step measured ------------------------------------------------------------


def step_ratios(measured: dict[str, float]) -> list[float]:
    """How many times faster each step is than the one before it (in ``measured``'s order)."""
    values = list(measured.values())
    if any(not v > 0 for v in values):
        raise ValueError(f"measured expected positive rates, got {measured}")
    return [after / before for before, after in zip(values, values[1:], strict=False)]


def staircase(measured: dict[str, float], cublas: float | None = None, size: int = 4096,
              where: str = ""):
    """Bars of the steps' TFLOP/s on a log scale (the climb spans three orders of magnitude),
    each labelled with its value and its gain over the step before; cuBLAS of the same run
    dashed. ``measured``: ``{step: TFLOP/s}`` in the order of the climb."""
    from kernels.recorded_figures import label_bars

    if not measured:
        raise ValueError("measured expected {step: TFLOP/s} for at least one step, got none")
    ratios = [None, *step_ratios(measured)]
    fig, ax = plots.figure(f"the steps, bf16 {size}³{' on ' + where if where else ''}",
                           ylabel="TFLOP/s (log scale)", figsize=(10, 4.8))
    labels = [name.replace("_", "\n") for name in measured]
    bars = ax.bar(labels, list(measured.values()), color=plots.color("nvrtc"))
    ax.set_yscale("log")
    top = max([*measured.values(), cublas or 0])
    ax.set_ylim(min(measured.values()) / 3, top * 3)
    if cublas:
        plots.ceiling(ax, cublas, "cuBLAS, same run")
    label_bars(ax, bars, [f"{v:.3g}" + (f"\n×{r:.1f}" if r else "")
                          for v, r in zip(measured.values(), ratios, strict=True)])
    ax.tick_params(axis="x", labelsize=7)
    plots.note(fig, "on each bar: TFLOP/s, and × the step before")
    return fig


def save_all(config, prefix: str = "05") -> list:
    """Draw, stamp and save the four figures under ``var/figures/``; return their paths."""
    drawn = [("tiles", tile_hierarchy(config)), ("fragments", fragments()),
             ("swizzle", swizzle_banks(config)), ("pipeline", pipeline(config))]
    paths = [plots.save(fig, f"{prefix}_{name}") for name, fig in drawn]
    for _, fig in drawn:
        plt.close(fig)
    return paths
