"""``make run`` / ``python -m course run``: execute every notebook headless, summarise.

Each notebook runs top to bottom in a fresh kernel (nbclient), with ``notebooks/`` as the working
directory, and is written with its outputs to ``var/executed/<name>.ipynb``. The kernel gets the
project root on its ``PYTHONPATH``, so whichever Python runs it imports the course from this
checkout, installed or not. The summary table says, per notebook: status, seconds, how many of
them went to CUDA extension builds (each build of :mod:`course_utils.cuda_ext`, subprocesses
included, appends a line to ``var/executed/<name>.builds.jsonl``), code cells run, and the cells
that ``%%requires`` skipped with the reason each printed ("skipped this cell: needs cuda: no CUDA
GPU ..."). Under the table it lists each notebook's three slowest cells with their times (where
a lecture loses its minutes).

Lecture mode promises every notebook in under a minute on a prepared GPU box, apart from the
cells that time a cold build on purpose (lesson 06 builds ``load_inline`` in a fresh folder to
show what NVRTC saves). Such a cell carries the Jupyter tag ``cold-build`` in its metadata; the
table gives each notebook's seconds without those cells and a verdict against LECTURE_SECONDS.
Every cell's time goes to ``cell-times.json`` beside the executed notebooks, with the
environment line: what a results log commits. The exit status is non-zero when any notebook
failed (a slow one only gets its verdict).

    python -m course run                 # every notebook
    python -m course run 01 03           # notebooks whose file name contains 01 or 03
    python -m course run --timeout 300   # per-cell timeout in seconds
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import cuda_ext, env

NOTEBOOKS = env.ROOT / "notebooks"
# the one line course_utils.requirements.requires prints for an unmet requirement
SKIP_LINE = re.compile(r"^skipped this cell: needs (.+)$", re.MULTILINE)
COLD_BUILD_TAG = "cold-build"  # a cell that times a cold build on purpose (see above)
LECTURE_SECONDS = 60  # what lecture mode promises per notebook, cold-build cells apart


@dataclass(frozen=True)
class CellTime:
    number: int  # among the code cells, from 0, as nbval names them ("Cell 21")
    seconds: float
    first_line: str  # of its source, so a reader finds the cell
    cold_build: bool = False  # tagged COLD_BUILD_TAG: its time is reported apart

    def __str__(self) -> str:
        line = self.first_line if len(self.first_line) <= 60 else self.first_line[:57] + "..."
        tag = f" [{COLD_BUILD_TAG}]" if self.cold_build else ""
        return f"cell {self.number} {self.seconds:.1f} s{tag}: {line}"


class _CellClock:
    """nbclient hooks timing each code cell from the moment it is sent to the kernel to its
    reply: the time a student waits for it."""

    def __init__(self, nb):
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        self._number = {index: n for n, index in enumerate(code)}
        self._started: dict[int, float] = {}
        self.times: list[CellTime] = []

    def started(self, cell, cell_index, **_) -> None:
        self._started[cell_index] = time.perf_counter()

    def running(self) -> str:
        """The code cell sent to the kernel and not yet answered, as "cell N", or ""."""
        waiting = [self._number[i] for i in self._started if i in self._number]
        return f"cell {max(waiting)}" if waiting else ""

    def finished(self, cell, cell_index, **_) -> None:
        if cell_index in self._started and cell_index in self._number:
            source = cell.source.strip().splitlines()
            tags = cell.get("metadata", {}).get("tags", [])
            self.times.append(CellTime(self._number[cell_index],
                                       time.perf_counter() - self._started.pop(cell_index),
                                       source[0] if source else "", COLD_BUILD_TAG in tags))


@dataclass
class Outcome:
    notebook: str
    status: str  # "ok", "failed", "timeout"
    seconds: float
    cells_run: int
    cells: int
    skipped: list[str] = field(default_factory=list)  # reasons, one per skipped cell
    error: str = ""
    executed_path: Path | None = None
    build_seconds: float = 0.0  # in cuda_ext builds (compiling or loading an extension)
    builds_compiled: int = 0  # of those builds, how many compiled
    cell_times: list[CellTime] = field(default_factory=list)  # every code cell that ran

    @property
    def cold_build_seconds(self) -> float:
        """Seconds in cells tagged ``cold-build``."""
        return sum(c.seconds for c in self.cell_times if c.cold_build)

    @property
    def lecture_seconds(self) -> float:
        """The notebook's seconds without its cold-build cells: what lecture mode promises."""
        return self.seconds - self.cold_build_seconds

    def slowest(self, count: int = 3) -> list[CellTime]:
        return sorted(self.cell_times, key=lambda c: c.seconds, reverse=True)[:count]

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def find_notebooks(selectors: list[str], folder: Path = NOTEBOOKS) -> list[Path]:
    """Notebooks in ``folder`` (or given as paths) whose file name contains a selector."""
    found: list[Path] = []
    for sel in selectors:
        if sel.endswith(".ipynb") and Path(sel).exists():
            found.append(Path(sel).resolve())
    every = sorted(Path(folder).glob("*.ipynb"))
    names = [s for s in selectors if not s.endswith(".ipynb") or not Path(s).exists()]
    if not selectors:
        found = every
    else:
        found += [p for p in every if any(s in p.name for s in names)]
    return list(dict.fromkeys(found))


def skipped_reasons(nb) -> list[str]:
    """The reason of every cell that ``%%requires`` skipped, from the executed notebook."""
    reasons = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                reasons += SKIP_LINE.findall(output.get("text", ""))
    return reasons


def read_build_log(path: Path) -> tuple[float, int]:
    """(seconds, compiled count) of the builds a log holds; (0, 0) when there is none."""
    if not Path(path).exists():
        return 0.0, 0
    builds = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return sum(b["seconds"] for b in builds), sum(bool(b["compiled"]) for b in builds)


def execute(path: Path, timeout: int = 600, out_dir: Path | None = None,
            kernel_name: str = "python3") -> Outcome:
    """Run one notebook in a fresh kernel and write the executed copy to ``out_dir``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    out_dir = Path(out_dir or env.var_dir("executed"))
    out_dir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(str(path), as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    clock = _CellClock(nb)
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                            on_cell_execute=clock.started, on_cell_executed=clock.finished,
                            resources={"metadata": {"path": str(Path(path).parent)}},
                            # the kernel's own start-up chatter ("running over TCP ...")
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])
    status, error = "ok", ""
    start = time.perf_counter()
    # The kernel process's own stderr (Kineto's profiler chatter, compiler noise) goes to a log
    # beside the executed notebook instead of the summary table's terminal.
    stderr_log = out_dir / (Path(path).stem + ".kernel-stderr.log")
    build_log = out_dir / (Path(path).stem + ".builds.jsonl")
    build_log.unlink(missing_ok=True)
    try:
        with stderr_log.open("w") as kernel_stderr:
            # the kernel imports the course from this checkout and logs its builds
            client.execute(stderr=kernel_stderr, env=env.child_environment(
                **{cuda_ext.BUILD_LOG_VARIABLE: str(build_log)}))
    except CellTimeoutError as err:
        status, error = "timeout", _first_line(err)
    except (CellExecutionError, DeadKernelError) as err:
        status, error = "failed", _first_cell_error(nb) or _error_summary(err)
    except Exception as err:  # the kernel failed to start or died, nbclient broke: keep going
        # (on an H100, notebook 07 once ended in a bare AssertionError from nbclient's kernel
        # polling; where it happened and the kernel's last words are what one needs to know)
        where = clock.running() or "no cell running"
        last_words = (stderr_log.read_text(errors="replace").strip().splitlines()
                      if stderr_log.exists() else [])
        status, error = "failed", (f"{type(err).__name__}: {_first_line(err)} ({where}"
                                   + (f"; the kernel's stderr ends: {last_words[-1][:160]}"
                                      if last_words else "") + ")")
    seconds = time.perf_counter() - start
    executed = out_dir / Path(path).name
    nbformat.write(nb, str(executed))
    build_seconds, builds_compiled = read_build_log(build_log)
    return Outcome(notebook=Path(path).name, status=status, seconds=seconds,
                   cells_run=sum(1 for c in code_cells if c.get("execution_count") is not None),
                   cells=len(code_cells), skipped=skipped_reasons(nb), error=error,
                   executed_path=executed, build_seconds=build_seconds,
                   builds_compiled=builds_compiled, cell_times=clock.times)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _first_cell_error(nb) -> str:
    """The first error a cell showed, with the cell's number and first line ("" if none).

    A cell under ``%%requires`` shows two: its body's own traceback, then the magic's
    "the cell under %%requires failed (traceback above)"; the first is the one that says what
    broke, and a recording run on a GPU box keeps only this summary line."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    for number, cell in enumerate(code, 1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                lines = [line for line in cell.source.splitlines()
                         if line.strip() and not line.startswith("%%")]
                head = lines[0][:60] if lines else ""
                return (f"{output.get('ename')}: {output.get('evalue')} (code cell {number}: "
                        f"{head!r})")
    return ""


def _error_summary(err: BaseException) -> str:
    """The exception line of a cell error (nbclient puts the whole traceback in the message)."""
    ename = getattr(err, "ename", None)
    evalue = getattr(err, "evalue", None)
    if ename:
        return f"{ename}: {evalue}".strip()
    return _first_line(err)


def summary_rows(outcomes: list[Outcome]) -> list[dict]:
    rows = []
    for o in outcomes:
        reasons: dict[str, int] = {}
        for r in o.skipped:
            reasons[r] = reasons.get(r, 0) + 1
        skipped = "; ".join(f"{n}× {r}" if n > 1 else r for r, n in reasons.items())
        builds = f"{o.build_seconds:.1f}" + (f" ({o.builds_compiled} compiled)"
                                              if o.builds_compiled else "")
        lecture = (f"{o.lecture_seconds:.1f} "
                   + ("ok" if o.lecture_seconds < LECTURE_SECONDS else "over"))
        rows.append({"notebook": o.notebook, "status": o.status, "seconds": round(o.seconds, 1),
                     "of which builds s": builds,
                     "cold-build cells s": round(o.cold_build_seconds, 1),
                     f"without them (< {LECTURE_SECONDS} s?)": lecture,
                     "cells run": f"{o.cells_run}/{o.cells}", "skipped": len(o.skipped),
                     "why skipped / error": o.error or skipped})
    return rows


def write_cell_times(outcomes: list[Outcome], path: Path) -> None:
    """Every notebook's time and every code cell's, as JSON (machine-readable beside the table)."""
    notebooks = [{"notebook": o.notebook, "status": o.status, "seconds": round(o.seconds, 2),
                  "lecture_seconds": round(o.lecture_seconds, 2),
                  "cells": [{"cell": c.number, "seconds": round(c.seconds, 2),
                             "first_line": c.first_line, "cold_build": c.cold_build}
                            for c in o.cell_times]}
                 for o in outcomes]
    path.write_text(json.dumps({"environment": env.environment_line(),
                                "lecture_seconds_limit": LECTURE_SECONDS,
                                "notebooks": notebooks}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course run",
                                     description="Execute notebooks headless into var/executed/.")
    parser.add_argument("notebooks", nargs="*",
                        help="notebook paths, or parts of file names (default: all)")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout, seconds")
    parser.add_argument("--out", default=None, help="folder for executed notebooks "
                        "(default: var/executed)")
    parser.add_argument("--folder", default=str(NOTEBOOKS), help="where notebooks live")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    args = parser.parse_args(argv)
    paths = find_notebooks(args.notebooks, Path(args.folder))
    if not paths:
        print(f"no notebooks matched {args.notebooks or '(all)'} in {args.folder}",
              file=sys.stderr)
        return 2
    outcomes = []
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        outcome = execute(path, timeout=args.timeout, out_dir=args.out, kernel_name=args.kernel)
        print(f"  {outcome.status} in {outcome.seconds:.1f} s"
              + (f": {outcome.error}" if outcome.error else ""), flush=True)
        outcomes.append(outcome)
    from course_utils.plots import stamped_table

    print()
    print(stamped_table(summary_rows(outcomes), title="notebooks"))
    total, builds = sum(o.seconds for o in outcomes), sum(o.build_seconds for o in outcomes)
    print(f"{total:.0f} s in all, of which {builds:.0f} s building or loading CUDA extensions")
    over = [f"{o.notebook} {o.lecture_seconds:.0f} s" for o in outcomes
            if o.lecture_seconds >= LECTURE_SECONDS]
    print(f"lecture mode (every notebook under {LECTURE_SECONDS} s apart from its "
          f"{COLD_BUILD_TAG} cells): " + ("kept" if not over else "not kept: " + ", ".join(over)))
    print()
    print("slowest cells:")
    for o in outcomes:
        print(f"  {o.notebook}: " + ("; ".join(map(str, o.slowest(3))) or "(no cell ran)"))
    for o in outcomes:
        if o.lecture_seconds >= LECTURE_SECONDS:  # where the minute went, to decide what to cut
            print(f"{o.notebook} is over: its cells of 1 s or more, in order:")
            print("\n".join(f"  {c}" for c in o.cell_times if c.seconds >= 1.0))
    where = outcomes[0].executed_path.parent if outcomes[0].executed_path else Path(args.out)
    write_cell_times(outcomes, where / "cell-times.json")
    print(f"executed notebooks are in {where}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
