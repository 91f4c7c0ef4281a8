"""What the ``%%requires`` cells showed on a real GPU, for machines that skip them.

``make record`` (``python -m course record``, on a GPU box, with ``COURSE_STRICT=1``)
executes the notebooks and stores, per ``%%requires`` cell, what it printed and drew:
``docs/recordings/<slug>.json``, named by the lesson's topic slug (the environment once,
then per cell its id, the hash of its source, the source, its outputs and the hashes of the
kernel files it ran, found by :mod:`course_utils.cell_kernels`) and
``docs/recordings/<slug>/<cell id>-<k>.png`` for figures. Stderr (profiler and compiler
chatter) is left out; long text is cut. A cell whose recording was carried over from another
notebook's run (its unchanged source moved there when a lesson was split) keeps that run's
environment in its own ``"environment"``, which wins over the file's.

When a cell skips, the magic calls :func:`show`: it finds the recording whose source hash is the
cell's, or else the most similar recorded cell with the same ``%%requires`` line, shown marked
**stale** (recorded for an earlier version of the cell). A recording of the cell's own source
is stale too when a kernel file it ran has changed since: the label names the files.
:func:`freshness` lists stale, orphaned and missing recordings per notebook, and those whose
kernels changed (``tests/test_recordings.py`` fails on a cell changed without its recording, so
they are refreshed with the cell; a kernel's change shows in the label until ``make record``
runs on a GPU; ``make doctor`` counts real, recorded and stale output).
"""

from __future__ import annotations

import argparse
import base64
import difflib
import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from course_utils import cell_kernels, env, syllabus

RECORDINGS = env.ROOT / "docs" / "recordings"
NOTEBOOKS = env.ROOT / "notebooks"
MAX_TEXT = 12_000  # characters of text kept per cell: a screenful or three
MAX_SVG = 300_000  # bytes; a larger SVG (a big flame graph) is left out
FORMAT = 1


def recording_key(notebook: str) -> str:
    """The name of a notebook's recordings: its lesson's topic slug (``"attention"`` for
    ``09_attention``, or for a former name such as ``08_attention``), so that renumbering the
    syllabus moves no file; a notebook outside the syllabus keeps its stem."""
    try:
        return syllabus.lesson(notebook).slug
    except KeyError:
        return notebook


def source_hash(source: str) -> str:
    """The key of a cell: its source without trailing whitespace, hashed."""
    lines = [line.rstrip() for line in source.strip().splitlines()]
    if lines and lines[0].startswith("%%requires"):  # the magic sees the names, not the spacing
        lines[0] = " ".join(["%%requires", *lines[0][10:].replace(",", " ").split()])
    text = "\n".join(lines)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def requires_cells(nb: dict) -> list[dict]:
    """The code cells of a notebook (as JSON) whose first line is ``%%requires``."""
    return [c for c in nb.get("cells", []) if c.get("cell_type") == "code"
            and _source(c).lstrip().startswith("%%requires")]


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------


def _outputs(cell, folder: Path, cell_id: str) -> list[dict]:
    kept: list[dict] = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") == "stdout":
            text = _source({"source": output.get("text", "")})
            if kept and "text" in kept[-1]:
                kept[-1]["text"] += text
            else:
                kept.append({"text": text})
        elif kind in ("display_data", "execute_result"):
            data = output.get("data", {})
            index = sum(1 for k in kept if "image" in k)
            if "image/png" in data:
                name = f"{cell_id}-{index}.png"
                (folder / name).write_bytes(base64.b64decode(data["image/png"]))
                kept.append({"image": name})
            elif "image/svg+xml" in data and len(_source({"source": data["image/svg+xml"]})
                                                 ) < MAX_SVG:
                name = f"{cell_id}-{index}.svg"
                (folder / name).write_text(_source({"source": data["image/svg+xml"]}))
                kept.append({"image": name})
            elif "text/plain" in data:
                kept.append({"text": _source({"source": data["text/plain"]}) + "\n"})
    for item in kept:
        if len(item.get("text", "")) > MAX_TEXT:
            item["text"] = item["text"][:MAX_TEXT] + "\n[... cut: the recording keeps the start]\n"
    return kept


def record_notebook(executed: dict, name: str, environment: dict,
                    folder: Path | None = None) -> Path:
    """Write the recording of one executed notebook; returns the JSON path."""
    folder = folder or RECORDINGS
    images = folder / name
    if images.exists():
        for old in images.iterdir():
            old.unlink()
    images.mkdir(parents=True, exist_ok=True)
    cells, graph = [], cell_kernels.Graph()
    code = [c for c in executed.get("cells", []) if c.get("cell_type") == "code"]
    sources = [_source(c) for c in code]
    for index, cell in enumerate(code):
        if not sources[index].lstrip().startswith("%%requires"):
            continue
        cells.append({"id": cell["id"], "hash": source_hash(_source(cell)),
                      "source": _source(cell), "outputs": _outputs(cell, images, cell["id"]),
                      "kernels": cell_kernels.hashes(
                          cell_kernels.kernel_files(sources, index, graph), graph)})
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"format": FORMAT, "notebook": f"{name}.ipynb",
                                "environment": environment, "cells": cells}, indent=1,
                               ensure_ascii=False) + "\n")
    if not any(images.iterdir()):
        images.rmdir()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course record",
                                     description="Execute notebooks on a GPU and record what "
                                                 "their %%requires cells show.")
    parser.add_argument("notebooks", nargs="*", help="parts of notebook names (default: all)")
    parser.add_argument("--timeout", type=int, default=900, help="per-cell timeout, seconds")
    args = parser.parse_args(argv)
    if not env.HAS_CUDA:
        print("record: needs a CUDA GPU (recordings show what a GPU shows)", file=sys.stderr)
        return 2
    os.environ["COURSE_STRICT"] = "1"  # the kernels inherit it: no cell may skip
    from course_utils import run_notebooks

    environment = env.environment()
    failed = 0
    for path in run_notebooks.find_notebooks(args.notebooks, NOTEBOOKS):
        print(f"recording {path.name} ...", flush=True)
        outcome = run_notebooks.execute(path, timeout=args.timeout,
                                        out_dir=env.var_dir("recorded"))
        if not outcome.ok:
            print(f"  {outcome.status}: {outcome.error} (recording of {path.name} kept as it "
                  "was)", flush=True)
            failed += 1
            continue
        executed = json.loads(outcome.executed_path.read_text())
        key = recording_key(path.stem)
        written = record_notebook(executed, key, environment)
        size = sum(p.stat().st_size for p in RECORDINGS.rglob(f"{key}*") if p.is_file())
        print(f"  {len(requires_cells(executed))} cells in {outcome.seconds:.0f} s -> "
              f"{written.relative_to(env.ROOT)} ({size / 1e3:.0f} kB)", flush=True)
    total = sum(p.stat().st_size for p in RECORDINGS.rglob("*") if p.is_file())
    print(f"docs/recordings: {total / 1e6:.2f} MB in all")
    return 1 if failed else 0


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    notebook: str
    cell: dict
    environment: dict
    folder: Path

    def kernels_changed(self) -> list[str]:
        """The kernel files this cell ran whose text has changed since it was recorded."""
        return cell_kernels.changed(self.cell.get("kernels", {}))

    def label(self, stale: bool, changed: list[str] | tuple[str, ...] = ()) -> str:
        e = self.environment
        where = " · ".join(str(x) for x in (e.get("device"), f"torch {e.get('torch')}",
                                             e.get("date"), f"git {e.get('git')}"))
        if stale:
            return (f"── recorded on {where}, for an EARLIER VERSION of this cell (stale: "
                    "re-record with `make record` on a GPU) ──")
        if changed:
            named = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more"
                                              if len(changed) > 3 else "")
            return (f"── recorded on {where}; the kernels it ran have CHANGED since ({named}): "
                    "stale, the numbers may differ now (`make record` on a GPU) ──")
        return f"── recorded on {where}: what this cell showed there ──"


def _load(folder: Path) -> list[Recorded]:
    found = []
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text())
        found += [Recorded(recording_key(path.stem), cell,
                           cell.get("environment") or data.get("environment", {}),
                           Path(folder) / path.stem)
                  for cell in data.get("cells", [])]
    return found


@functools.cache
def _index(folder: str, stamp: float) -> list[Recorded]:
    return _load(Path(folder))


def all_recorded(folder: Path | None = None) -> list[Recorded]:
    folder = folder or RECORDINGS
    stamp = max((p.stat().st_mtime for p in Path(folder).glob("*.json")), default=0.0)
    return _index(str(folder), stamp)


def find(source: str, folder: Path | None = None) -> tuple[Recorded | None, bool]:
    """(the recording for this cell source, whether it is stale)."""
    recorded = all_recorded(folder)
    key = source_hash(source)
    for rec in recorded:
        if rec.cell["hash"] == key:
            return rec, False
    first = source.strip().splitlines()[0] if source.strip() else ""
    similar = [(difflib.SequenceMatcher(None, rec.cell["source"], source).ratio(), i)
               for i, rec in enumerate(recorded)
               if rec.cell["source"].strip().splitlines()[0] == first]
    best = max(similar, default=(0.0, -1))
    return (recorded[best[1]], True) if best[0] >= 0.6 else (None, False)


def show(source: str, folder: Path | None = None) -> bool:
    """Print and display the recording of this cell under its skip line; False when none."""
    rec, stale = find(source, folder)
    if rec is None:
        return False
    print(rec.label(stale, () if stale else rec.kernels_changed()))
    for item in rec.cell["outputs"]:
        if "text" in item:
            print(item["text"], end="" if item["text"].endswith("\n") else "\n")
        elif "image" in item:
            from IPython.display import SVG, Image, display

            path = rec.folder / item["image"]
            display(SVG(filename=str(path)) if path.suffix == ".svg" else Image(str(path)))
    return True


@dataclass
class Freshness:
    notebook: str
    cells: int  # %%requires cells in the notebook
    fresh: list[str]  # cell ids with a recording of their current source
    stale: list[str]  # recorded for an earlier source
    orphaned: list[str]  # recorded cells no longer in the notebook
    missing: list[str]  # %%requires cells without any recording
    kernels_changed: list[str]  # fresh by source, but a kernel file they ran changed since


def freshness(notebooks: Path | None = None, folder: Path | None = None) -> list[Freshness]:
    """Per notebook: which %%requires cells have a fresh, stale or no recording."""
    notebooks, report = notebooks or NOTEBOOKS, []
    for path in sorted(Path(notebooks).glob("*.ipynb")):  # the lessons and the appendices
        current = {c["id"]: source_hash(_source(c))
                   for c in requires_cells(json.loads(path.read_text()))}
        mine = [r for r in all_recorded(folder) if r.notebook == recording_key(path.stem)]
        recorded = {r.cell["id"]: r.cell["hash"] for r in mine}
        report.append(Freshness(
            notebook=path.stem, cells=len(current),
            fresh=[i for i, h in current.items() if recorded.get(i) == h],
            stale=[i for i, h in current.items() if i in recorded and recorded[i] != h],
            orphaned=[i for i in recorded if i not in current],
            missing=[i for i in current if i not in recorded],
            kernels_changed=[r.cell["id"] for r in mine
                             if current.get(r.cell["id"]) == r.cell["hash"]
                             and r.kernels_changed()]))
    return report


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
