"""``make bench``: run every lesson's benchmark and write this device's results files.

Each benchmark module exposes ``run(quick: bool = False) -> list[Record | Note]``: it measures
its kernels, their ceiling and their peer in the same run, prints a table of ratios, and
returns the records. This runner groups them by lesson and saves each lesson once (a lesson's
records replace its earlier ones; other lessons are kept).
"""

from __future__ import annotations

import argparse
import importlib
from collections import defaultdict
from pathlib import Path

from course_utils import env, results


def discover(root: Path = env.ROOT / "kernels") -> list[str]:
    """Every benchmark module under ``kernels/``: a file named ``bench*.py``
    (``kernels/add/bench.py``, ``kernels/matmul/bench_mma.py``, ...). A new lesson's benchmark
    joins ``make bench`` by its file name alone; sorted by path, so an op's run together. Then
    the few above ``kernels/`` (``course/bench_*.py``: an exercise's reference solution timed
    against the course's kernels, which cannot import an exercise)."""
    found = sorted(p for p in Path(root).rglob("bench*.py") if "__pycache__" not in p.parts)
    names = [".".join(p.relative_to(Path(root).parent).with_suffix("").parts) for p in found]
    if Path(root) == env.ROOT / "kernels":
        names += [f"course.{p.stem}" for p in sorted((env.ROOT / "course").glob("bench_*.py"))]
    return names


def choose(modules: list[str], only: list[str]) -> list[str]:
    """The modules ``only`` names, in ``modules``' order (all of them when it names none). Each
    word picks one module when it is a module's exact name (``kernels.matmul.bench`` is also a
    prefix of ``kernels.matmul.bench_mma``), else every module whose name contains it; one
    exact name does not stop another word from matching by its part (``kernels.bench_overhead
    rmsnorm`` runs both)."""
    if not only:
        return list(modules)
    picked = set()
    for word in only:
        picked |= {word} if word in modules else {m for m in modules if word in m}
    return [m for m in modules if m in picked]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course bench", description=__doc__)
    parser.add_argument("only", nargs="*", help="module names to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--out", default=str(env.RESULTS_DIR),
                        help="results folder (default: docs/results)")
    args = parser.parse_args(argv)
    print(f"# {env.environment_line()}")
    records: dict[str, list[results.Record]] = defaultdict(list)
    notes: dict[str, list[str]] = defaultdict(list)
    modules = discover()
    chosen = choose(modules, args.only)
    if not chosen:
        parser.error(f"only: no benchmark module matches {args.only}; known: {modules}")
    for name in chosen:
        print(f"\n## {name}")
        module = importlib.import_module(name)
        if not callable(getattr(module, "run", None)):  # a bench*.py file must be one
            raise TypeError(f"{name} is named like a benchmark but has no run(quick=...)")
        for item in module.run(quick=args.quick):
            if isinstance(item, results.Note):
                notes[item.lesson].append(item.text)
            else:
                records[item.lesson].append(item)
    for lesson in sorted(set(records) | set(notes)):
        path = results.save(lesson, records[lesson], directory=args.out,
                            notes="\n\n".join(notes[lesson]) or None)
        print(f"wrote {len(records[lesson])} records of {lesson} to {path}")
    return 0
