"""Run the kernel-writing exercises' checks on a GPU: every reference solution (must pass) and
every known-wrong answer (must not), printing each verdict; with ``--record``, write what the
solutions' checks printed to ``docs/results/exercises-gpu.json``, which the same checks show on
a machine without a GPU (:func:`exercises.kernel_checks.recorded_lines`).

    python -m exercises.gpu_check_kernels                 # the kernel exercises of 03, 05, 07
    python -m exercises.gpu_check_kernels 03.transpose 05.smem --record
    python -m exercises.gpu_check_kernels --all           # every exercise of the course

Exit status 1 when a solution does not pass or a wrong answer passes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import exercises
from course_utils import env
from exercises import kernel_checks, solutions

KERNEL_EXERCISES = ("03.transpose", "03.warp_sum", "05.smem", "05.swizzle_cuda", "05.triton_dot",
                    "07.parity", "07.promote")


def _run(id: str, source: str, label: str) -> exercises.Result:
    ex = exercises.get(id)
    names = exercises.load_cell(source, f"gpu_{label}_{id}")
    return exercises.run_check(id, *(names[n] for n in ex.answers))


def check(ids) -> tuple[dict[str, exercises.Result], list[str]]:
    """Every solution and wrong answer of ``ids``: the solutions' results and the failures."""
    answers = solutions.answers()
    passed, failures = {}, []
    for id in ids:
        solution, wrong = answers[id]
        start = time.perf_counter()
        result = _run(id, solution, "solution")
        print(f"\n[{time.perf_counter() - start:5.1f} s] solution of {id}\n{result}", flush=True)
        if not result.passed:
            failures.append(f"{id} solution: {result.status}")
        passed[id] = result
        for label, source in wrong.items():
            start = time.perf_counter()
            result = _run(id, source, "wrong")
            print(f"\n[{time.perf_counter() - start:5.1f} s] {id} known-wrong "
                  f"'{label}'\n{result}", flush=True)
            if result.status != "not yet":
                failures.append(f"{id} '{label}': {result.status}")
    return passed, failures


def record(results: dict[str, exercises.Result]) -> None:
    """Add the solutions' GPU results to :data:`kernel_checks.RECORDED`, each with the
    environment it ran in (the other exercises' records are kept)."""
    path = kernel_checks.RECORDED
    data = json.loads(path.read_text()) if path.exists() else {}
    stamp = env.environment()
    entries = data.setdefault("exercises", {})
    for id, result in results.items():
        entries[id] = {"status": result.status, "lines": result.lines, "environment": stamp}
    data["exercises"] = dict(sorted(entries.items()))
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote {len(results)} results to {path.relative_to(env.ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exercises.gpu_check_kernels",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help=f"exercise ids (default: {KERNEL_EXERCISES})")
    parser.add_argument("--all", action="store_true", help="every registered exercise")
    parser.add_argument("--record", action="store_true",
                        help="write the results of the solutions that passed, for the "
                             "exercises whose kernel runs in a GPU child (kernel_checks.CHILDREN)"
                             ": a CPU shows them beside what it could check")
    args = parser.parse_args(argv)
    if not env.HAS_CUDA:
        print("needs a CUDA GPU: on a CPU `pytest tests/test_exercises.py` runs what it can")
        return 2
    print(f"# {env.environment_line()}")
    ids = [e.id for e in exercises.all_exercises()] if args.all else args.ids or KERNEL_EXERCISES
    results, failures = check(ids)
    if args.record:
        record({id: r for id, r in results.items() if r.passed and id in kernel_checks.CHILDREN})
    print("\n" + ("all solutions pass and every known-wrong answer is rejected" if not failures
                  else "FAILURES:\n" + "\n".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
