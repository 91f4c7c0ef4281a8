"""Pictures of a Triton kernel's footprint: which elements of each tensor its first programs load
and store (:func:`exercises.puzzle_checks.footprint`), one panel per tensor, one colour per
program, as Triton-Puzzles draws them.

Lesson 03 draws the reference solution's before each puzzle (:func:`exercises.puzzles.draw`).
On "not yet", the check draws the student's kernel above it, in the same colours: two rows,
"yours" above "expected", every cell where they differ outlined in black in both rows (grey in
yours: the reference touches it there and yours never does), and the lanes that touched memory
outside every tensor counted under the panel of the tensor they missed. The figure belongs to
no pyplot backend (:func:`exercises.check` displays it as a PNG under the verdict), so nothing
opens a window in a headless run or under nbval.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np

# the first four programs in launch order are drawn: tab10's first four colours, named for the
# title (the outline is black, not red: red is the fourth program's colour)
COLOUR_NAMES = ("blue", "orange", "green", "red")
MISSING = (0.78, 0.78, 0.78)  # expected there, yours touched it with no program: grey


def _kind(name: str) -> str:
    """What a panel shows: the output's stores, an input's loads."""
    return "stores" if name == "output" else "loads"


def _programs(touched: dict) -> list[tuple]:
    """The first four programs that touched anything, in launch order."""
    return sorted({q for seen in touched.values() for kind in ("loads", "stores")
                   for q in seen[kind]})[:4]


def _who(seen: dict, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """Per element of a panel of ``shape``, the set of programs (all of them, not only the four
    drawn) that touched it: an object array of frozensets."""
    who = [set() for _ in range(int(np.prod(shape)))]
    for program, flats in seen[kind].items():
        for flat in flats:
            who[flat].add(program)
    out = np.empty(len(who), dtype=object)
    out[:] = [frozenset(s) for s in who]
    return out.reshape(shape)


def _panel_shape(seen: dict) -> tuple[int, int]:
    return seen["shape"] if len(seen["shape"]) == 2 else (1, seen["shape"][0])


def differences(yours: dict, expected: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(differ, missing)``, boolean masks over tensor ``name``'s panel: where the programs
    that touched an element (stored it for the output, loaded it for an input) are not those of
    the reference, and among those the elements yours never touched at all."""
    shape, kind = _panel_shape(expected[name]), _kind(name)
    mine, theirs = _who(yours[name], kind, shape), _who(expected[name], kind, shape)
    differ = mine != theirs
    nobody = np.vectorize(len, otypes=[int])(mine) == 0
    return differ, differ & nobody


def _image(seen: dict, kind: str, programs: list[tuple], colours: dict) -> np.ndarray:
    shape = _panel_shape(seen)
    image = np.ones((*shape, 3))
    for program in reversed(programs):  # where two programs share an element: the first
        for flat in seen[kind].get(program, ()):
            image[np.unravel_index(flat, shape)] = colours[program]
    return image


def _outline(ax, mask: np.ndarray) -> None:
    """Black lines around the cells of ``mask`` (the edges between a marked and an unmarked
    cell), in the imshow's data coordinates: cell (r, c) spans c ± 0.5, r ± 0.5; as thin as
    the cells are small (a 50-row panel's cells are 2 points tall: thick lines would hide
    their colours)."""
    from matplotlib.collections import LineCollection

    box, fig = ax.get_position(), ax.get_figure()
    cell = min(box.width * fig.get_figwidth() / mask.shape[1],
               box.height * fig.get_figheight() / mask.shape[0]) * 72  # points
    width = float(np.clip(0.3 * cell, 0.4, 1.6))

    padded = np.pad(mask, 1)
    above = padded[1:, 1:-1] != padded[:-1, 1:-1]  # (rows + 1, cols): the edge above row r
    left = padded[1:-1, 1:] != padded[1:-1, :-1]  # (rows, cols + 1): the edge left of col c
    segments = [[(c - 0.5, r - 0.5), (c + 0.5, r - 0.5)] for r, c in np.argwhere(above)]
    segments += [[(c - 0.5, r - 0.5), (c - 0.5, r + 0.5)] for r, c in np.argwhere(left)]
    if segments:
        ax.add_collection(LineCollection(segments, colors="black", linewidths=width))


def _notes(yours: dict, expected: dict, name: str, differ: np.ndarray,
           missing: np.ndarray) -> list[str]:
    """What the "yours" panel of tensor ``name`` says under it: the cells that differ, the
    lanes outside every tensor, and the accesses of the kind the panel does not draw (a store
    into an input) where the reference has none."""
    notes = []
    if differ.any():
        wrong = int(differ.sum()) - int(missing.sum())
        notes.append(", ".join(([f"{int(missing.sum())} never touched"] if missing.any() else [])
                               + ([f"{wrong} by the wrong programs"] if wrong else [])))
    for kind, verb in (("loads", "load"), ("stores", "store")):
        if lanes := yours[name]["outside"][kind]:
            notes.append(f"{lanes} {verb} lane{'s' * (lanes != 1)} outside it")
    other = "loads" if _kind(name) == "stores" else "stores"
    count = len(set().union(*yours[name][other].values()))
    if count and not expected[name][other]:
        notes.append(f"also {other[:-1]}d: {count} element{'s' * (count != 1)}")
    return notes


def picture(title: str, expected: dict, yours: dict | None = None,
            new_figure: Callable | None = None):
    """The figure of footprint ``expected`` (one row), or with ``yours`` two rows: "yours"
    above "expected", the cells where they differ outlined in both. ``new_figure(figsize)``
    makes the figure (default: a :class:`matplotlib.figure.Figure` of no pyplot backend)."""
    import matplotlib
    from matplotlib.figure import Figure

    programs = _programs(expected)
    colours = dict(zip(programs, matplotlib.colormaps["tab10"].colors, strict=False))
    rows = [("yours", yours), ("expected", expected)] if yours is not None else [("", expected)]
    names = list(expected)
    fig = (new_figure or (lambda figsize: Figure(figsize=figsize)))(
        (3.2 * len(names), 2.6 + 2.2 * (len(rows) - 1)))
    axes = fig.subplots(len(rows), len(names), squeeze=False)
    marked = stray = noted = False  # (what the title then explains)
    for col, name in enumerate(names):
        kind = _kind(name)
        differ, missing = differences(yours, expected, name) if yours is not None else (None,) * 2
        marked |= bool(differ is not None and differ.any())
        stray |= yours is not None and any(yours[name]["outside"].values())
        for row, (label, touched) in enumerate(rows):
            ax = axes[row][col]
            image = _image(touched[name], kind, programs, colours)
            if label == "yours":
                image[missing] = MISSING
            ax.imshow(image, aspect="auto", interpolation="nearest")
            if differ is not None:
                _outline(ax, differ)
            ax.set_xticks([]), ax.set_yticks([])
            for spine in ax.spines.values():  # (light: a black frame would read as an outline)
                spine.set_edgecolor("#bbbbbb")
            if row == 0:
                ax.set_title(f"{name}: {'stored' if kind == 'stores' else 'loaded'}", fontsize=9)
            if col == 0 and label:
                ax.set_ylabel(label, fontsize=10, fontweight="bold")
            under = [" x ".join(map(str, touched[name]["shape"]))] if row == len(rows) - 1 else []
            if label == "yours" and (notes := _notes(yours, expected, name, differ, missing)):
                under, noted = under + notes, True
            ax.set_xlabel("\n".join(under), fontsize=8)
    grid_2d = any(q[1] for q in programs)
    drawn = [str(q[:2]) if grid_2d else str(q[0]) for q in programs]
    head = (f"{title}: programs {', '.join(drawn)} in "
            f"{', '.join(COLOUR_NAMES[:len(drawn)])}")
    if marked:
        head += ("\noutlined: touched by other programs than the reference's (grey: by none "
                 "of yours)")
    if stray:
        head += "\nlanes outside every tensor: switched off, counted under the nearest one"
    if yours is not None and not noted:
        head += ("\nyour kernel touches the same elements as the reference on this problem: "
                 "what is wrong is in its values, or on another problem (the verdict says)")
    width = int(14 * fig.get_figwidth())  # characters of fontsize 9 across the figure
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in head.split("\n")),
                 fontsize=9)
    fig.tight_layout()
    return fig
