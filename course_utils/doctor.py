"""``make doctor`` / ``python -m course doctor``: what this machine will and will not show.

First the machine (Python, torch and its CUDA build, the GPU, nvcc, NVRTC, Triton and its mode,
a C++ compiler), then one line per lesson: does it run fully here, or which cells fall back and
why. The lesson table is derived from the ``%%requires`` lines found in each notebook, so it
cannot go stale when a notebook changes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import env, requirements

NOTEBOOKS = env.ROOT / "notebooks"


@dataclass
class Lesson:
    """A notebook and the requirements of its ``%%requires`` cells."""

    path: Path
    cells: int  # code cells
    requirements: list[tuple[str, ...]] = field(default_factory=list)  # one per %%requires cell

    @property
    def name(self) -> str:
        return self.path.stem

    def fallbacks(self) -> list[tuple[tuple[str, ...], list[str]]]:
        """(requirements, reasons) for each ``%%requires`` cell that would skip here."""
        return [(reqs, reasons) for reqs in self.requirements if (reasons := _reasons(reqs))]


def _reasons(reqs: tuple[str, ...]) -> list[str]:
    try:
        return requirements.unmet(*reqs)
    except ValueError as err:  # a typo in a notebook: the cell would fail, say so
        return [f"error: {err}"]


def read_lesson(path: Path) -> Lesson:
    """Parse a notebook's JSON for its code cells and their ``%%requires`` lines."""
    nb = json.loads(Path(path).read_text())
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    lesson = Lesson(path=Path(path), cells=len(code))
    for cell in code:
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        first = source.lstrip().splitlines()[0] if source.strip() else ""
        if first.startswith("%%requires"):
            names = first.removeprefix("%%requires").replace(",", " ").split()
            lesson.requirements.append(tuple(names))
    return lesson


def lessons(folder: Path = NOTEBOOKS) -> list[Lesson]:
    # the lessons (NN_name) and the appendices (A1_name), in that order
    return [read_lesson(p) for p in sorted(Path(folder).glob("*.ipynb"))]


# --------------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------------


def _cxx() -> str | None:
    for cxx in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if cxx and (path := shutil.which(cxx)):
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=20)
                return f"{path} ({out.stdout.splitlines()[0].strip()})"
            except (OSError, subprocess.SubprocessError, IndexError):
                return path
    return None


def machine_rows() -> list[tuple[str, str]]:
    """(what, finding) pairs describing this machine."""
    import torch

    info = env.device_info()
    rows = [("Python", f"{platform.python_version()} ({sys.executable})"),
            ("torch", f"{torch.__version__}, CUDA build {torch.version.cuda or 'none (CPU-only)'}")]
    if info.kind == "cuda":
        rows += [("GPU", info.name),
                 ("compute capability", f"{info.arch} ({info.capability[0]}.{info.capability[1]})"),
                 ("SMs", str(info.sms)),
                 ("memory", f"{info.memory_gb:.1f} GiB"),
                 ("driver", info.driver or "unknown (nvidia-smi not found)")]
        peaks = ", ".join(f"{k} {v:g}" for k, v in info.peaks.items())
        rows.append(("datasheet peaks", peaks or "not in the course's table"))
    else:
        rows += [("GPU", f"none: {'; '.join(requirements.unmet('cuda'))}"), ("CPU", info.name)]
    nvcc = env.nvcc_path()
    rows.append(("nvcc", f"{nvcc} (release {env.nvcc_version()})" if env.nvcc_version()
                 else "not found (set CUDA_HOME or put nvcc on PATH)"))
    rows.append(("CUDA_HOME", os.environ.get("CUDA_HOME", "(not set)")))
    nvrtc = requirements.unmet("nvrtc")
    rows.append(("NVRTC", "available" if not nvrtc else f"unavailable: {'; '.join(nvrtc)}"))
    triton = env.triton_version()
    if triton is None:
        rows.append(("Triton", "not installed"))
    else:
        mode = ("interpreter (TRITON_INTERPRET=1: kernels run on the CPU, slowly)"
                if env.TRITON_INTERPRET else "GPU (compiled kernels)")
        rows.append(("Triton", f"{triton}, {mode}"))
    rows.append(("C++ compiler", _cxx() or "not found (c++/g++/clang++ not on PATH)"))
    rows.append(("COURSE_STRICT", "1 (unmet requirements are errors)" if env.STRICT else "off"))
    return rows


def lesson_rows(found: list[Lesson]) -> list[tuple[str, str, str]]:
    """(lesson, verdict, detail) per notebook."""
    rows = []
    for lesson in found:
        fallbacks = lesson.fallbacks()
        if not lesson.requirements:
            rows.append((lesson.name, "runs fully", f"{lesson.cells} code cells, none needs "
                         f"special hardware"))
        elif not fallbacks:
            needs = sorted({r for reqs in lesson.requirements for r in reqs})
            rows.append((lesson.name, "runs fully",
                         f"all {len(lesson.requirements)} %%requires cells met "
                         f"({', '.join(needs)})"))
        else:
            needs: dict[str, int] = {}  # requirement line -> cells that skip with it
            reasons: dict[str, None] = {}  # each distinct reason once, in order
            for reqs, why in fallbacks:
                needs[" ".join(reqs)] = needs.get(" ".join(reqs), 0) + 1
                reasons.update(dict.fromkeys(why))
            detail = (f"needs {', '.join(f'{k} ({n}×)' for k, n in needs.items())}: "
                      f"{'; '.join(reasons)}")
            rows.append((lesson.name, f"falls back ({len(fallbacks)} of {lesson.cells} cells "
                         f"skip)", detail))
    return rows


def requirement_rows() -> list[tuple[str, str]]:
    """Each name ``%%requires`` knows, with "met" or the reason it is not met here."""
    names = [*requirements.REQUIREMENTS, env.device_info().arch or "sm_80"]
    return [(name, "; ".join(requirements.unmet(name)) or "met") for name in names]


def output_rows(found: list[Lesson]) -> tuple[list[tuple[str, ...]], float]:
    """Per lesson, what its code cells show here: real output, a GPU recording (fresh or
    stale) or only the skip line; and the share of real output over every lesson."""
    from course_utils import recordings

    by_name = {f.notebook: f for f in recordings.freshness(found[0].path.parent)}
    rows, real_total, cells_total = [], 0, 0
    for lesson in found:
        nb = json.loads(lesson.path.read_text())
        skipped = [c["id"] for c in recordings.requires_cells(nb)
                   if _reasons(tuple(doctor_names(c)))]
        fresh = by_name[lesson.name]
        outdated = set(fresh.stale) | set(fresh.kernels_changed)  # the cell or its kernels
        recorded = sum(1 for i in skipped if i in fresh.fresh and i not in outdated)
        stale = sum(1 for i in skipped if i in outdated)
        real = lesson.cells - len(skipped)
        real_total, cells_total = real_total + real, cells_total + lesson.cells
        rows.append((lesson.name, f"{real}/{lesson.cells} real ({real / lesson.cells:.0%})",
                     f"recorded {recorded}, stale {stale}, "
                     f"skip line only {len(skipped) - recorded - stale}"))
    return rows, real_total / max(cells_total, 1)


def doctor_names(cell: dict) -> list[str]:
    """The requirement names of a ``%%requires`` cell (as JSON)."""
    first = "".join(cell["source"]).lstrip().splitlines()[0]
    return first.removeprefix("%%requires").replace(",", " ").split()


def _print_pairs(rows: list[tuple[str, ...]], out) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)] + [row[-1]]
        print("  " + "  ".join(cells), file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course doctor",
                                     description="What this machine can run, lesson by lesson.")
    parser.add_argument("--notebooks", default=str(NOTEBOOKS),
                        help="folder with the NN_name.ipynb lessons (default: notebooks/)")
    args = parser.parse_args(argv)
    out = sys.stdout
    print("# This machine", file=out)
    _print_pairs(machine_rows(), out)
    print("\n# %%requires names (met, or why not)", file=out)
    _print_pairs(requirement_rows(), out)
    found = lessons(Path(args.notebooks))
    print("\n# Lessons (from the %%requires lines in each notebook)", file=out)
    if not found:
        print(f"  no notebooks found in {args.notebooks}", file=out)
        return 1
    _print_pairs(lesson_rows(found), out)
    print("\n# What the code cells show here (real output, or a GPU recording under the skip "
          "line)", file=out)
    rows, share = output_rows(found)
    _print_pairs(rows, out)
    print(f"  real output in {share:.0%} of code cells (the course aims at >= 80% without a "
          "GPU, and a recording for every other cell)", file=out)
    typos = [(lesson.name, why) for lesson in found for _, whys in lesson.fallbacks()
             for why in whys if why.startswith("error:")]
    for name, why in typos:
        print(f"\n{name}: a %%requires line names an unknown requirement: {why}", file=out)
    print(f"\n[{env.environment_line()}]", file=out)
    return 1 if typos else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
