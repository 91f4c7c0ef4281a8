"""Figures of lesson 16, drawn from :mod:`kernels.matmul.hopper.layout` (the kernel's layout).

    figures.tma_box_swizzle()                       # a TMA box landing in 128B-swizzled smem
    figures.descriptor_fields(layout.descriptor_for(0x400, 1))  # the 64-bit wgmma descriptor
    figures.mbarrier_phases(stages=3, iterations=9)  # slots and parities of the mbarrier ring

Each function returns a matplotlib figure; :func:`save_all` stamps them with the environment
(``course_utils.plots.save``) and writes them under ``var/figures/``, as lesson 07's figures do.
"""

from __future__ import annotations

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt

from course_utils import plots
from kernels.matmul.hopper import layout

CHUNK_COLORS = plt.get_cmap("tab10").colors[:layout.CHUNKS_PER_ROW]
FIELD_COLORS = {"start_address": "#9ecae1", "leading_byte_offset": "#c7e9c0",
                "stride_byte_offset": "#fdd0a2", "base_offset": "#dadaeb", "swizzle": "#fcbba1"}
FIELD_LABELS = {"start_address": "start address", "leading_byte_offset": "leading byte offset",
                "stride_byte_offset": "stride byte offset", "base_offset": "base offset",
                "swizzle": "swizzle mode"}


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=0.5, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        # inside its box, so inside the axes: keeping it out of the layout's bounding-box
        # search makes a figure of a few hundred cells draw in a fraction of a second
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                in_layout=False)


def _bare(ax, width, height, top=0.0):
    pad = 0.01 * max(width, height)
    ax.set_xlim(-pad, width + pad)
    ax.set_ylim(height + pad, top - pad)  # row 0 at the top, as a matrix is written
    ax.set_aspect("equal")
    ax.axis("off")


# -- (a) a TMA box landing in swizzled shared memory ----------------------------------------------


def tma_box_swizzle(rows: int = 16, chunk: int = 0):
    """Left: a TMA box of ``rows`` x 128 bytes as it is in global memory, 16-byte chunks
    coloured by logical chunk. Right: the same chunks in shared memory after the 128-byte
    swizzle (column = physical chunk = bank group). Outlined: logical chunk ``chunk`` of rows
    0-7, which a read of one K column touches: 8 rows, 8 different bank groups."""
    layout._check_int("rows", rows, layout.ATOM_ROWS)
    layout._check_int("chunk", chunk, 0, layout.CHUNKS_PER_ROW - 1)
    c = layout.CHUNKS_PER_ROW
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.2 + 0.38 * rows), layout="constrained")
    fig.suptitle(f"TMA box {rows} rows x 128 bytes -> shared memory, CU_TENSOR_MAP_SWIZZLE_128B"
                 f"\nchunk c of row r is stored at chunk c XOR (r mod 8); colour = logical chunk",
                 fontweight="bold")
    groups = [layout.bank_group(layout.smem_offset(r, chunk * layout.CHUNK_BYTES))
              for r in range(layout.ATOM_ROWS)]
    panels = ((axes[0], False, "global memory (the box, row-major)\ncolumn = logical chunk"),
              (axes[1], True, f"shared memory (1024-byte aligned)\ncolumn = bank group; chunk "
                              f"{chunk} of rows 0-7 -> groups {sorted(set(groups))}"))
    for ax, swizzled, title in panels:
        for r in range(rows):
            for logical in range(c):
                column = layout.swizzle_128b(r, logical) if swizzled else logical
                reading = logical == chunk and r < layout.ATOM_ROWS
                _box(ax, column, r, 1, 1, text=f"c{logical}", face=CHUNK_COLORS[logical],
                     lw=2.5 if reading else 0.3, alpha=1.0 if reading else 0.55)
        for atom in range(layout.ATOM_ROWS, rows, layout.ATOM_ROWS):  # 1024-byte atom borders
            ax.plot([0, c], [atom, atom], color="black", lw=1.5, ls="--")
        ax.set_title(title, fontsize=9)
        _bare(ax, c, rows)
    verdict = ("8 bank groups: one wavefront" if len(set(groups)) == layout.BANK_GROUPS
               else f"{layout.BANK_GROUPS // len(set(groups))}-way conflict")
    axes[1].text(c / 2, rows + 0.3, f"chunk {chunk}, rows 0-7: {verdict}\n"
                 "dashed: a new 1024-byte swizzle atom, same pattern", ha="center", va="top",
                 fontsize=8)
    return fig


# -- (b) the wgmma descriptor --------------------------------------------------------------------


def _field_of_bit(bit: int) -> str | None:
    for name, first, width, _ in layout.FIELDS:
        if first <= bit < first + width:
            return name
    return None


def _field_line(desc: layout.Descriptor, name: str) -> str:
    first, width = next((f, w) for n, f, w, _ in layout.FIELDS if n == name)
    value = desc.fields()[name]
    meaning = {"start_address": f"{desc.start_address:#x} >> 4",
               "leading_byte_offset": f"{desc.leading_byte_offset} B >> 4 (unused when "
                                      "swizzled K-major)",
               "stride_byte_offset": f"{desc.stride_byte_offset} B >> 4 (8 rows to the next 8)",
               "base_offset": "0: the tile is 1024-aligned" if value == 0 else "row of the atom",
               "swizzle": f"{desc.swizzle}B" if desc.swizzle else "none"}[name]
    return f"bits {first}-{first + width - 1}  {FIELD_LABELS[name]} = {value}  ({meaning})"


def descriptor_fields(desc):
    """The 64-bit wgmma shared-memory descriptor ``desc`` (a :class:`layout.Descriptor` or its
    encoded int) as two rows of 32 bits, each bit's value shown and coloured by field, with
    each field's value and meaning listed underneath."""
    if isinstance(desc, int) and not isinstance(desc, bool):
        desc = layout.Descriptor.decode(desc)
    if not isinstance(desc, layout.Descriptor):
        raise ValueError(f"desc expected a layout.Descriptor or its 64-bit int, got "
                         f"{type(desc).__name__}")
    word = desc.encode()
    fig, ax = plt.subplots(figsize=(11, 3.3), layout="constrained")
    fig.suptitle(f"wgmma shared-memory matrix descriptor = {word:#018x}", fontweight="bold")
    for y, high in ((0, 63), (2.2, 31)):
        for i in range(32):
            bit = high - i  # most significant bit on the left, as the word is written
            field = _field_of_bit(bit)
            _box(ax, i, y, 1, 1, text=str((word >> bit) & 1),
                 face=FIELD_COLORS[field] if field else "#f0f0f0", fontsize=8)
        for i in (0, 31):
            ax.text(i + 0.5, y - 0.15, str(high - i), ha="center", va="bottom", fontsize=7)
        ax.text(-0.3, y + 0.5, f"bits {high}..{high - 31}", ha="right", va="center", fontsize=8)
    for row, (name, *_rest) in enumerate(layout.FIELDS):
        y = 4.0 + 0.62 * row
        _box(ax, 0, y, 0.9, 0.45, face=FIELD_COLORS[name])
        ax.text(1.3, y + 0.22, _field_line(desc, name), ha="left", va="center", fontsize=9)
    ax.text(0, 4.0 + 0.62 * len(layout.FIELDS) + 0.1, "grey: bits no field uses (zero)",
            ha="left", va="top", fontsize=8, color="#555555")
    ax.set_xlim(-4.2, 32.2)
    ax.set_ylim(4.0 + 0.62 * len(layout.FIELDS) + 0.6, -0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


# -- (c) the mbarrier ring -------------------------------------------------------------------------


def mbarrier_phases(stages: int = 3, iterations: int = 9):
    """The ring over the K loop: one column per iteration, one row per slot. The slot an
    iteration uses shows ``F p``: the parity its consumers wait for on the slot's full barrier,
    and ``E q``: the parity the producer waits for on the empty barrier before the TMA load.
    Colour: the pass over the ring (the slot's phase). The first pass waits on empty with
    parity 1, which a fresh barrier counts as already completed."""
    layout._check_int("stages", stages, 1, 16)
    layout._check_int("iterations", iterations, 1, 48)
    steps = layout.ring_schedule(iterations, stages)
    passes = ("#c6dbef", "#fdd0a2")
    fig, ax = plt.subplots(figsize=(2.2 + 0.75 * iterations, 1.8 + 0.75 * stages),
                           layout="constrained")
    fig.suptitle(f"mbarrier ring, {stages} stages: iteration i uses slot i mod {stages}; "
                 f"F = full parity (consumers), E = empty parity (producer)", fontweight="bold",
                 fontsize=10)
    for step in steps:
        for slot in range(stages):
            if slot == step.slot:
                _box(ax, step.iteration, slot, 1, 1,
                     text=f"F{step.full_parity}\nE{step.empty_parity}",
                     face=passes[(step.iteration // stages) % 2], lw=1.0, fontsize=8)
            else:
                _box(ax, step.iteration, slot, 1, 1, face="#f7f7f7", lw=0.3)
        ax.text(step.iteration + 0.5, -0.15, str(step.iteration), ha="center", va="bottom",
                fontsize=8)
    for slot in range(stages):
        ax.text(-0.15, slot + 0.5, f"slot {slot}", ha="right", va="center", fontsize=8)
    ax.text(iterations / 2, -0.75, "iteration", ha="center", va="bottom", fontsize=9)
    handles = [mpatches.Patch(facecolor=passes[0], edgecolor="black", label="even pass (phase "
                              "parity 0)"),
               mpatches.Patch(facecolor=passes[1], edgecolor="black", label="odd pass (phase "
                              "parity 1)")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8)
    ax.set_xlim(-1.6, iterations + 0.1)
    ax.set_ylim(stages + 0.1, -1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def save_all(prefix: str = "07") -> list:
    """Draw, stamp and save the three figures under ``var/figures/``; return their paths."""
    drawn = [("tma_swizzle", tma_box_swizzle()),
             ("descriptor", descriptor_fields(layout.descriptor_for(0x400, 1))),
             ("mbarrier_ring", mbarrier_phases())]
    paths = [plots.save(fig, f"{prefix}_{name}") for name, fig in drawn]
    for _, fig in drawn:
        plt.close(fig)
    return paths
