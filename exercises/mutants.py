"""Mutation testing of the exercise checks: do they say "not yet" to every wrong kernel?

A check that says "passed" to a wrong kernel teaches the wrong lesson, and the student cannot
tell. So the checks are tested the way mutation testing tests a test suite: wrong answers are
derived from each kernel exercise's reference solution (``exercises/solutions``), one small
change at a time, by the operators of :mod:`exercises.mutant_operators` (a bound moved by one,
a mask or a barrier dropped, thread axes or subscripts swapped, an accumulator narrowed, a term
dropped, a constant moved, an operand's state space changed, ...), and each mutant is run
through the exercise's check as a student's answer would be. Next to them run the
hand-written wrong answers (``WRONG[id]``: the mistakes students actually make).

Every mutant must get "not yet" on a GPU. On a CPU it gets "not yet" where a CPU can decide
it, otherwise "cannot check here" naming what it could not check; never "passed". A mutant
that behaves exactly like the solution (the same kernel, written differently) is listed with
its reason in ``EQUIVALENT[id]`` of the lesson's solutions module (``{mutant key: why}``) and
skipped; "hard to check" is not a reason.

    python -m course exercises mutants                 # every kernel exercise
    python -m course exercises mutants fusion.reverse -j 4 # one, four at a time
    python -m course exercises mutants --list cuda_gelu.warp_sum   # the mutants, not run

The mutants run in child processes, up to 12 to a child and spread over the jobs (a wrong kernel
can crash the process that runs it; the parent names the mutant and goes on in a fresh child).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from course_utils import env
from exercises.mutant_operators import OPERATORS, code_part

# the exercises in which the student writes a kernel (or a piece of one)
KERNEL_EXERCISES = ("fusion.reverse", "fusion.silu_mul",
                    "cuda_gelu.silu", "cuda_gelu.transpose", "cuda_gelu.warp_sum",
                    "nvrtc.divergence",
                    "mma_matmul.smem", "mma_matmul.swizzle_cuda", "mma_matmul.triton_dot",
                    "hopper_matmul.parity", "hopper_measured.promote",
                    "attention.online_step", "attention.attend_block", "attention.key_range",
                    "attention.backward_dkdv",
                    "attention_variants.window_range", "attention_variants.varlen_locate",
                    "attention_variants.combine_splits", "attention_variants.flash_tiles",
                    "attention_variants.flash_triton",
                    "hopper_attention.pingpong",
                    "hopper_backward.quantize", "hopper_backward.dq_add",
                    "model.swap", "model.predict", "model.cross_entropy",
                    "distributed.halves", "distributed.fsdp_backward", "distributed.pipeline",
                    "distributed.one_shot",
                    "puzzles.add", "puzzles.add_blocks", "puzzles.outer", "puzzles.outer_blocks",
                    "puzzles.row_sum", "puzzles.long_sum", "puzzles.col_sum", "puzzles.softmax",
                    "puzzles.long_softmax", "puzzles.matvec", "puzzles.dot", "puzzles.attention",
                    "rmsnorm.backward", "triton_tools.transpose",
                    "first_kernels.flip_rows", "first_kernels.histogram",
                    "patterns.block_scan",
                    "nvrtc.tiled_matmul")


@dataclass(frozen=True)
class Mutant:
    """One wrong answer: the reference solution with one change (or a hand-written one)."""

    exercise: str
    operator: str  # the operator's name, or "hand-written"
    label: str  # what changed: "bound: if (r < rows) -> if (r <= rows)" or the WRONG label
    source: str  # the whole answer cell

    @property
    def key(self) -> str:
        return f"{self.operator}: {self.label}"


def _is_comment(line: str, cuda: bool) -> bool:
    s = line.strip()
    return not s or s.startswith("//" if cuda else "#") or s.startswith(('"""', "'''", "@"))


def _cuda_lines(source: str) -> set[int]:
    """Indices of the lines inside the answer's CUDA strings (r\"\"\" ... \"\"\")."""
    inside, found = False, set()
    for i, line in enumerate(source.splitlines()):
        quotes = line.count('"""')
        if inside:
            found.add(i)
        if quotes % 2:
            inside = not inside
    return found


def _skipped(line: str) -> bool:
    """Lines no operator touches: imports, signatures, the launch's keyword plumbing."""
    s = line.strip()
    return s.startswith(("import ", "from ", "def ", "@", "#include", "extern \"C\"",
                         "__global__", "template")) or "raise ValueError" in s


def generate(exercise: str, source: str) -> list[Mutant]:
    """Every single-change mutant of ``source`` (the solution of ``exercise``), deduplicated."""
    lines = source.splitlines()
    cuda = _cuda_lines(source)
    found: dict[str, Mutant] = {}
    for i, line in enumerate(lines):
        in_cuda = i in cuda
        if _is_comment(line, in_cuda) or _skipped(line):
            continue
        code = code_part(line, in_cuda)
        comment = line[len(code):]
        for name, operator in OPERATORS.items():
            for new_code in operator(code):
                if new_code == code:
                    continue
                mutated = "\n".join([*lines[:i], new_code.rstrip() + comment, *lines[i + 1:]])
                label = f"line {i + 1}: {code.strip()}  ->  {new_code.strip() or '(removed)'}"
                found.setdefault(mutated, Mutant(exercise, name, label, mutated + "\n"))
    return list(found.values())


ORIGINS = ("generated", "hand-written", "blind")  # where a wrong answer came from


def origin(mutant: Mutant) -> str:
    """"hand-written" (``WRONG``), "blind" (written from the statement alone) or "generated"."""
    return mutant.operator if mutant.operator in ORIGINS else "generated"


def hand_written(exercise: str) -> list[Mutant]:
    """The exercise's known-wrong answers of ``exercises/solutions`` (``WRONG[id]``)."""
    from exercises import solutions

    _, wrong = solutions.answers()[exercise]
    return [Mutant(exercise, "hand-written", label, source) for label, source in wrong.items()]


def blind(exercise: str) -> list[Mutant]:
    """The wrong answers of ``exercise`` written from its statement and stub alone, by someone
    who never saw the check or the solution (:func:`exercises.solutions.blind_answers`)."""
    from exercises import solutions

    return [Mutant(exercise, "blind", label, source)
            for label, source in solutions.blind_answers().get(exercise, {}).items()]


def all_mutants(exercise: str) -> tuple[list[Mutant], list[tuple[Mutant, str]]]:
    """(the mutants to run: generated and hand-written, the equivalent ones with their
    reasons) of ``exercise``."""
    from exercises import solutions

    known = solutions.equivalent().get(exercise, {})
    listed = generate(exercise, solutions.answers()[exercise][0]) + blind(exercise)
    run = [m for m in listed if m.key not in known] + hand_written(exercise)
    return run, [(m, known[m.key]) for m in listed if m.key in known]


# --------------------------------------------------------------------------------------------
# Running: one child process per exercise, restarted after a crash
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # "not yet", "cannot check here", "passed", "not attempted", "crashed"
    said: str  # the verdict as the student would read it
    seconds: float

    @property
    def killed(self) -> bool:
        """Rejected as it must be: "not yet", or on a machine that cannot decide it
        "cannot check here" that names what it could not check."""
        named = "not verified here" in self.said or "this check needs" in self.said
        return self.status == "not yet" or (self.status == "cannot check here" and named
                                             and not env.HAS_CUDA)


def _verdict(mutant: Mutant) -> tuple[str, str]:
    import exercises

    ex = exercises.get(mutant.exercise)
    try:
        names = exercises.load_cell(mutant.source, f"mutant_{mutant.exercise}")
        answers = [names[n] for n in ex.answers]
    except Exception as err:  # the mutant does not even load: a student would see that
        return "not yet", f"the cell raised {type(err).__name__}: {err}"
    result = exercises.run_check(mutant.exercise, *answers)
    return result.status, str(result)


def worker(path: str) -> int:
    """The child: run the mutants listed in the JSON file ``path``, one JSON line each."""
    for item in json.loads(open(path).read()):
        mutant = Mutant(**item)
        print(json.dumps({"start": mutant.key}), flush=True)
        start = time.perf_counter()
        status, said = _verdict(mutant)
        print(json.dumps({"key": mutant.key, "status": status, "said": said,
                          "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    return 0


def run(mutants: list[Mutant], timeout: float = 900) -> list[Outcome]:
    """Every mutant's verdict, in child processes (a crash is an outcome, and the rest go on)."""
    todo, outcomes = list(mutants), []
    by_key = {m.key: m for m in mutants}
    while todo:
        digest = hashlib.sha256(todo[0].key.encode()).hexdigest()[:12]
        path = env.var_dir("exercises") / f"mutants_{todo[0].exercise}_{digest}.json"
        path.write_text(json.dumps([asdict(m) for m in todo]))
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", __name__, "--worker", str(path)],
                                  capture_output=True, text=True, timeout=timeout,
                                  cwd=env.ROOT, env=env.child_environment())
            out, err = done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else \
                expired.stdout or ""
            err = f"no answer after {timeout:.0f} s"
        said = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        finished = {s["key"] for s in said if "status" in s}
        for s in said:
            if "status" in s:
                outcomes.append(Outcome(by_key[s["key"]], s["status"], s["said"],
                                        s["seconds"]))
        started = [s["start"] for s in said if "start" in s and s["start"] not in finished]
        if started:  # it died on this one: a crash, then the rest in a fresh child
            tail = [ln for ln in (err or "").splitlines() if ln.strip()][-2:]
            outcomes.append(Outcome(by_key[started[0]], "crashed",
                                    "the check's process died: " + " / ".join(tail),
                                    round(time.perf_counter() - start, 2)))
            finished.add(started[0])
        elif len(finished) < len(todo) and not said:
            raise RuntimeError(f"the mutant worker failed before its first mutant:\n{err}")
        todo = [m for m in todo if m.key not in finished]
    return outcomes


def solution(exercise: str) -> Mutant:
    """The reference solution, run beside its mutants: it must pass (on a CPU, pass or say
    what it cannot check), or every "not yet" of its mutants means nothing."""
    from exercises import solutions

    return Mutant(exercise, "solution", "the reference solution",
                  solutions.answers()[exercise][0])


def run_many(exercises_: list[str], jobs: int, chunk: int = 12,
             report: Callable[[str, list[Outcome]], None] = lambda e, o: None,
             only: str | None = None) -> dict[str, list[Outcome]]:
    """Every exercise's solution and mutants, in chunks of at most ``chunk``, ``jobs`` chunks
    at a time; ``report`` as each exercise finishes (its solution's outcome first); ``only``
    (one of :data:`ORIGINS`): only the wrong answers of that origin.

    The chunks are cut small enough to give every job work: a few exercises whose checks are
    slow (lesson 09's compile the attention kernel in a child of their own, 10-20 s each on a
    GPU) would otherwise queue a dozen each behind one another while most jobs sit idle."""
    every = {e: [solution(e), *(m for m in all_mutants(e)[0] if only in (None, origin(m)))]
             for e in exercises_}
    chunk = max(1, min(chunk, -(-sum(map(len, every.values())) // max(jobs, 1))))
    chunks = [(e, ms[i:i + chunk]) for e, ms in every.items() for i in range(0, len(ms), chunk)]
    left = collections.Counter(e for e, _ in chunks)
    results: dict[str, list[Outcome]] = {e: [] for e in exercises_}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run, ms): e for e, ms in chunks}
        for future in concurrent.futures.as_completed(futures):
            e = futures[future]
            results[e].extend(future.result())
            left[e] -= 1
            if not left[e]:
                results[e].sort(key=lambda o: o.mutant.operator != "solution")
                report(e, results[e])
    return results


def solution_ok(outcome: Outcome) -> bool:
    return outcome.status == "passed" or (outcome.status == "cannot check here"
                                          and not env.HAS_CUDA)


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


def _summary(exercise: str, outcomes: list[Outcome]) -> str:
    """One exercise's line: wrong answers rejected, "not yet" and "cannot check here" counted
    apart (a CPU that cannot decide a wrong answer has not rejected it the way a GPU does), by
    where they came from; then every one not rejected."""
    first, wrong = outcomes[0], outcomes[1:]
    killed = sum(o.killed for o in wrong)
    not_yet = sum(o.status == "not yet" for o in wrong)
    origins = collections.Counter(origin(o.mutant) for o in wrong)
    lines = [f"{exercise:16s} {killed:3d}/{len(wrong):3d} rejected ({not_yet} not yet, "
             f"{killed - not_yet} cannot check here; "
             + ", ".join(f"{origins[k]} {k}" for k in ORIGINS if origins[k])
             + f", {len(all_mutants(exercise)[1])} equivalent listed); solution: {first.status}"]
    if not solution_ok(first):
        lines.extend(f"    SOLUTION {ln}" for ln in first.said.splitlines()[:6])
    for o in wrong:
        if not o.killed:
            lines.append(f"    {o.status.upper()}: {o.mutant.key}")
            lines.extend(f"        {ln}" for ln in o.said.splitlines()[:3])
    return "\n".join(lines)


def _record(results: dict[str, list[Outcome]]) -> None:
    """The solutions' GPU verdicts, for machines without a GPU to show beside what they could
    check (:func:`exercises.kernel_checks.record`)."""
    import exercises
    from exercises import kernel_checks

    passed = {}
    for e, outcomes in results.items():
        if e in kernel_checks.CHILDREN and outcomes[0].status == "passed":
            lines = outcomes[0].said.splitlines()[1:]
            passed[e] = exercises.Result(exercises.get(e), "passed",
                                         [ln.removeprefix("   ") for ln in lines])
    kernel_checks.record(passed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course exercises mutants",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*",
                        help=f"exercise ids (default: {' '.join(KERNEL_EXERCISES)})")
    parser.add_argument("-j", "--jobs", type=int, default=2,
                        help="child processes at once (each runs up to 12 mutants)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run none")
    parser.add_argument("--origin", choices=ORIGINS,
                        help="run only the wrong answers of this origin (blind: written from "
                             "the statement alone, exercises/solutions/blind.py)")
    parser.add_argument("--json", help="write every outcome to this file")
    parser.add_argument("--record", action="store_true",
                        help="(GPU) keep what the solutions' checks printed, for machines "
                             "without a GPU (docs/results/exercises-gpu.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    ids = args.ids or list(KERNEL_EXERCISES)
    if unknown := sorted(set(ids) - set(KERNEL_EXERCISES)):
        parser.error(f"not a kernel exercise: {', '.join(unknown)} "
                     f"(known: {', '.join(KERNEL_EXERCISES)})")
    if args.list:
        for e in ids:
            to_run, same = all_mutants(e)
            print(f"{e}: {len(to_run)} to run, {len(same)} equivalent")
            for m in to_run:
                print(f"    {m.key}")
            for m, why in same:
                print(f"    (equivalent) {m.key}: {why}")
        return 0
    print(f"# {env.environment_line()}", flush=True)
    results = run_many(ids, args.jobs, report=lambda e, o: print(_summary(e, o), flush=True),
                       only=args.origin)
    wrong = [o for e in ids for o in results[e][1:]]
    alive = [o for o in wrong if not o.killed]
    failed = [e for e in ids if not solution_ok(results[e][0])]
    undecided = sum(o.killed and o.status != "not yet" for o in wrong)
    print(f"\n{len(wrong) - len(alive)}/{len(wrong)} wrong answers rejected"
          + (f" ({undecided} of them only as cannot check here)" if undecided else "")
          + ("" if not alive else f"; {len(alive)} NOT rejected (listed above)")
          + (f"; the solution of {', '.join(failed)} did not pass" if failed else
             f"; all {len(ids)} solutions pass"))
    if args.json:
        data = {"environment": env.environment(), "exercises": {
            e: [{"key": o.mutant.key, "status": o.status, "said": o.said,
                 "seconds": o.seconds} for o in results[e]] for e in ids}}
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1, ensure_ascii=False)
    if args.record and env.HAS_CUDA:
        _record(results)
    return 1 if alive or failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
