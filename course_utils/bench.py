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

from course_utils import env, results

# lesson benchmark modules, in syllabus order
MODULES = (
    "kernels.matmul.bench",  # 01: matmul sweep against the datasheet peak, profile summary
    "kernels.gelu.bench",  # 02/03: GeLU providers against copy bandwidth
    "kernels.softmax.bench",  # 02: softmax providers over row lengths
    "kernels.add.bench",  # 04: load_inline vs NVRTC compile times
    "kernels.overhead",  # 04: host time per call of each layer, beside torch's
    "kernels.matmul.bench_mma",  # 05: every mma.sync variant vs its ceiling and cuBLAS
    "kernels.matmul.fp64.bench",  # 06: the FP64 GEMMs' design spaces against torch.mm float64
    "kernels.matmul.hopper.bench",  # 07: the Hopper steps vs the wgmma ceiling and cuBLAS
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils bench", description=__doc__)
    parser.add_argument("only", nargs="*", help="module names to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--out", default=str(env.RESULTS_DIR),
                        help="results folder (default: docs/results)")
    args = parser.parse_args(argv)
    print(f"# {env.environment_line()}")
    records: dict[str, list[results.Record]] = defaultdict(list)
    notes: dict[str, list[str]] = defaultdict(list)
    for name in MODULES:
        if args.only and not any(o in name for o in args.only):
            continue
        print(f"\n## {name}")
        for item in importlib.import_module(name).run(quick=args.quick):
            if isinstance(item, results.Note):
                notes[item.lesson].append(item.text)
            else:
                records[item.lesson].append(item)
    for lesson in sorted(set(records) | set(notes)):
        path = results.save(lesson, records[lesson], directory=args.out,
                            notes="\n\n".join(notes[lesson]) or None)
        print(f"wrote {len(records[lesson])} records of {lesson} to {path}")
    return 0
