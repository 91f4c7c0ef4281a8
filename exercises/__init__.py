"""Auto-checked exercises: a stub cell the student edits, then a check cell that says how it went.

Each exercise sits right after its idea (at the end of that section of the notebook; the rest in
a closing "Exercises" section): a short statement, a stub cell (small, self-contained, the
signature given) and a check cell::

    import exercises
    exercises.check("profiling.sync", time_ms)

:func:`check` prints one verdict and never raises on a wrong answer:

* **not attempted**: the stub is untouched (same code as registered, or a ``...`` left in it);
* **passed**: correct on fresh random inputs, awkward shapes included; on a GPU it then measures
  the answer against the lesson's ceiling and *prints* a verdict (a time is never asserted);
* **not yet**: what is wrong, the first mismatching index and values, and a hint;
* **cannot check here**: the machine lacks what the check needs (it says what).

Adding exercises to a lesson
----------------------------
1. ``exercises/<slug>.py`` (the lesson's topic slug in :mod:`course_utils.syllabus`)
   registers each exercise with :func:`exercise`::

       STUB = '''def tile_count(m, n, tile):
           \"\"\"Thread blocks needed to cover an m x n output with tile x tile blocks.\"\"\"
           ...
       '''

       @exercise("mma_matmul.tiles", title="Count the tiles", stub=STUB, answers=("tile_count",),
                 intro="Markdown shown above the stub: the why, the task, the signature.")
       def check_tiles(tile_count, report):
           for m, n, tile in [(1, 1, 16), (33, 7, 16)]:
               expect(tile_count(m, n, tile) == -(-m // tile) * -(-n // tile),
                      f"tile_count({m}, {n}, {tile}) returned ...", hint="round up both ways")
           report.line("the grid covers every output element")

   The check receives the student's objects (named by ``answers``, defined by the stub) and a
   :class:`Report`; it raises :class:`Mismatch` (or uses :func:`expect` / :func:`compare`) for a
   wrong answer, :class:`CannotCheck` when this machine cannot tell, and calls
   :func:`bandwidth_verdict` (or ``report.line``) for what it measured.
2. ``exercises/solutions/<slug>.py`` holds ``SOLUTIONS[id]`` and ``WRONG[id]``:
   cell source text defining the same names as the stub, one correct and one known-wrong.
   Checks that cannot be gamed: a simulated quantity (a time, a size, a workload) is drawn
   at random on every run, so a number typed in cannot pass (the profiling lesson's simulated GPUs);
   compare tensors with :func:`compare`, which rejects the wrong shape or dtype before it
   looks at values; and where the exercise asks for a Triton kernel, call
   :func:`expect_triton_kernel`, so plain PyTorch computing the same values does not pass.
3. ``python -m course exercises sync <slug>`` writes the exercise cells into the notebook from the
   registry: an exercise given ``section="4 · The swizzle"`` closes the section whose heading
   contains that text (right after its idea), the others go to a final "Exercises" section;
   ``tests/test_exercises.py`` then runs every check against its solution (must pass), its
   stub (must say not attempted) and the wrong answer (must fail, teaching).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import io
import os
import pkgutil
import sys
import textwrap
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from course_utils import env, syllabus
from exercises.expectations import (  # noqa: F401 (what checks import: `from exercises import expect`)
    CannotCheck,
    Mismatch,
    Report,
    awkward_1d,
    bandwidth_verdict,
    compare,
    expect,
    expect_triton_kernel,
    needs,
    triton_launchers,
    triton_launches,
)


@dataclass(frozen=True)
class Exercise:
    id: str  # "<lesson>.<short name>", e.g. "profiling.sync"
    title: str
    stub: str  # the stub cell's source (self-contained: its own imports)
    answers: tuple[str, ...]  # names the stub defines, passed to the check in this order
    check: Callable  # check(*answers, report)
    intro: str = ""  # markdown above the stub
    before: tuple[str, ...] = ()  # code cells between the statement and the stub (tools)
    # where the exercise sits: at the end of the notebook section whose heading contains this
    # text (right after its idea); "" puts it in the closing "Exercises" section
    section: str = ""
    isolated: bool = False  # checked in a child process on a GPU (exercises.isolated)
    # on "not yet": picture(*answers) -> a figure of what the answer did beside what it should
    # have (lesson 03's puzzles: the kernel's footprint), shown under the verdict
    picture: Callable | None = None

    @property
    def lesson(self) -> str:
        return self.id.split(".")[0]

    def check_cell(self) -> str:
        return (f"import exercises\n\n"
                f"exercises.check({self.id!r}, {', '.join(self.answers)})")

    def stub_cell(self) -> str:
        return (f"# ✏️ Exercise {self.id}: edit this cell, run it, then run the check below\n"
                + self.stub.strip() + "\n")


@dataclass
class Result:
    exercise: Exercise
    status: str  # "passed", "not yet", "not attempted", "cannot check here"
    lines: list[str] = field(default_factory=list)
    figures: list = field(default_factory=list)  # shown under the verdict by check()

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        mark = {"passed": "✅", "not yet": "❌", "not attempted": "✏️"}.get(self.status, "⏭️")
        head = f"{mark} Exercise {self.exercise.id} ({self.exercise.title}): {self.status}"
        return "\n".join([head, *(f"   {ln}" for ln in self.lines)])


_REGISTRY: dict[str, Exercise] = {}


def exercise(id: str, *, title: str, stub: str, answers: Sequence[str], intro: str = "",
             before: Sequence[str] = (), section: str = "", isolated: bool = False,
             picture: Callable | None = None):
    """Decorator registering ``check(*answers, report)`` as the check of exercise ``id``;
    ``before``: code cells shown between the statement and the stub (a tool to run first);
    ``section``: text of the heading whose section the exercise closes (next to its idea);
    ``isolated``: on a GPU the check runs in a child process (:mod:`exercises.isolated`: a
    wrong answer may fault, and a fault would end the notebook's kernel); ``picture``:
    ``picture(*answers)`` -> a figure drawn under a "not yet" (:func:`run_check`)."""
    if not isinstance(id, str) or "." not in id:
        raise ValueError(f"id expected '<lesson>.<name>' (e.g. 'profiling.sync'), got {id!r}")
    if not answers:
        raise ValueError(f"answers expected the names the stub defines, got {answers!r}")

    def register(fn: Callable) -> Callable:
        _REGISTRY[id] = Exercise(id=id, title=title, stub=stub, answers=tuple(answers),
                                 check=fn, intro=intro, before=tuple(before),
                                 section=section, isolated=isolated, picture=picture)
        return fn

    return register


def _load_lessons() -> None:
    """Import every lesson's exercise modules: ``exercises/<slug>.py`` and its
    ``<slug>_<part>.py`` helpers, for each lesson of the syllabus."""
    slugs = [lesson.slug for lesson in syllabus.LESSONS]
    for info in pkgutil.iter_modules(__path__):
        if any(info.name == s or info.name.startswith(f"{s}_") for s in slugs):
            importlib.import_module(f"{__name__}.{info.name}")


def get(id: str) -> Exercise:
    """The registered exercise ``id``; ValueError listing the known ones otherwise."""
    _load_lessons()
    id = syllabus.topic_key(id)  # an id of an earlier numbering ("08.online_step") still works
    if id not in _REGISTRY:
        raise ValueError(f"exercise id {id!r} is not registered; known: "
                         f"{', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[id]


def all_exercises(lesson: str | None = None) -> list[Exercise]:
    """Every registered exercise (of one lesson, ``"attention"``), in the syllabus's order and
    then in registration order."""
    _load_lessons()
    if lesson is not None:
        lesson = syllabus.lesson(lesson).slug
    found = [e for e in _REGISTRY.values() if lesson is None or e.lesson == lesson]
    return sorted(found, key=lambda e: syllabus.NUMBERS.get(e.lesson, 0))


# --------------------------------------------------------------------------------------------
# Running a check
# --------------------------------------------------------------------------------------------


def write_whole(path, text: str) -> None:
    """Write ``text`` to ``path`` (named by a digest of ``text``) unless it is there: written
    whole under another name, then renamed, so that a process reading it (another test worker,
    another rank of the same check) never finds it half-written."""
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        os.replace(partial, path)


def load_cell(source: str, label: str = "cell") -> dict:
    """Run cell ``source`` as a module (from a file, so Triton and ``inspect`` find the source
    of its functions) and return its names."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = env.var_dir("exercises") / f"{label.replace('.', '_')}_{digest}.py"
    write_whole(path, source)
    spec = importlib.util.spec_from_file_location(f"_exercise_cell_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def _fingerprint(obj) -> object:
    """What identifies an answer's code, whatever compiled it (a notebook cell, a module):
    the syntax tree of a function's source (comments and layout ignored), text for sources."""
    obj = getattr(obj, "fn", obj)  # a @triton.jit kernel wraps the Python function
    if isinstance(obj, types.FunctionType):
        try:
            return ast.dump(ast.parse(textwrap.dedent(inspect.getsource(obj))))
        except (OSError, TypeError, SyntaxError):  # no source to read: what the code names
            code = obj.__code__
            return tuple(map(repr, code.co_consts)), code.co_names, code.co_varnames
    if isinstance(obj, str):
        return tuple(ln.strip() for ln in obj.splitlines() if ln.strip())
    if isinstance(obj, type):  # a class (a torch.autograd.Function): the code of its methods
        methods = {name: getattr(member, "__func__", member) for name, member in vars(obj).items()}
        return ("class", tuple((name, _fingerprint(fn)) for name, fn in sorted(methods.items())
                               if isinstance(fn, types.FunctionType)))
    return ("value", repr(obj))


def _has_ellipsis(obj) -> bool:
    if obj is Ellipsis:
        return True
    if isinstance(obj, dict):
        return any(_has_ellipsis(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(_has_ellipsis(v) for v in obj)
    return False


_stub_prints: dict[str, tuple] = {}


def _untouched(ex: Exercise, answers: tuple) -> bool:
    if any(_has_ellipsis(a) for a in answers):
        return True
    if ex.id not in _stub_prints:
        names = load_cell(ex.stub, f"stub_{ex.id}")
        _stub_prints[ex.id] = tuple(_fingerprint(names[n]) for n in ex.answers)
    return tuple(_fingerprint(a) for a in answers) == _stub_prints[ex.id]


def where_in_student_code(err: BaseException) -> str:
    """'line N of your cell: <code>' for the deepest frame outside the course and libraries."""
    # the course's own packages: a frame there is the check's, not the student's
    course = tuple(str(env.ROOT / package) + "/"
                   for package in ("course_utils", "kernels", "exercises", "course"))
    found = ""
    for frame in traceback.extract_tb(err.__traceback__):
        name = frame.filename
        if "site-packages" in name or name.startswith(course) or "/lib/python" in name:
            continue
        if name.startswith(str(env.VAR / "exercises")) or "ipykernel" in name or "<" in name:
            found = f"line {frame.lineno} of your cell: {frame.line}"
    return found


def run_check(id: str, *answers) -> Result:
    """Check ``answers`` for exercise ``id`` and return the :class:`Result` (prints nothing);
    a "not yet" carries the exercise's picture of the answer, if it draws one."""
    result = _verdict(id, *answers)
    return _pictured(result, answers) if result.status == "not yet" else result


def _verdict(id: str, *answers) -> Result:
    ex = get(id)
    if len(answers) != len(ex.answers):
        raise ValueError(f"exercise {id} expected {len(ex.answers)} answers "
                         f"({', '.join(ex.answers)}), got {len(answers)}")
    if _untouched(ex, answers):
        return Result(ex, "not attempted",
                      ["the stub above is unchanged: edit it (replace every ...), run it, then "
                       "run this cell again"])
    from exercises import isolated

    if ex.isolated and isolated.wanted():
        return isolated.run(ex, answers)
    report = Report()
    try:
        ex.check(*answers, report=report)
    except Mismatch as wrong:
        lines = [*report.lines, *wrong.message.splitlines()]
        return Result(ex, "not yet", lines + ([f"hint: {wrong.hint}"] if wrong.hint else []))
    except CannotCheck as why:
        return Result(ex, "cannot check here", [*report.lines, str(why)])
    except NotImplementedError:
        return Result(ex, "not attempted", ["your code still raises NotImplementedError"])
    except Exception as err:  # the student's code raised: say what and where, no traceback
        where = where_in_student_code(err)
        said = str(err).strip().splitlines()[:4]  # compiler logs can be long: the start
        return Result(ex, "not yet", [*report.lines,
                                      f"your code raised {type(err).__name__}: "
                                      + (said[0] if said else ""), *said[1:],
                                      *([where] if where else []),
                                      "hint: run the stub cell on a small input and read the "
                                      "error; fix it and run both cells again"])
    return Result(ex, "passed", report.lines)


def _pictured(result: Result, answers: tuple) -> Result:
    """``result`` with its exercise's picture of the answer (``Exercise.picture``) added:
    drawing it can fail on the very answer being judged, so any exception becomes one
    line saying why there is no picture, and the verdict stands."""
    if result.exercise.picture is None:
        return result
    try:
        result.figures.append(result.exercise.picture(*answers))
    except Exception as err:
        why = str(err) if isinstance(err, CannotCheck) else (
            f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:160]}")
        result.lines.append(f"(no picture of what your code did: {why})")
    return result


def _show(figure) -> None:
    """``figure`` under the verdict, in a notebook: as a PNG (it belongs to no pyplot backend,
    so nothing opens a window and nbval sees one image); elsewhere the Result keeps it."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is None:
        return
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=100)
    display(Image(png.getvalue()))


def check(id: str, *answers) -> None:
    """Check ``answers`` for exercise ``id`` and print the verdict (never raises on a wrong
    answer, so the notebook goes on), then the pictures a "not yet" drew."""
    result = run_check(id, *answers)
    print(result)
    for figure in result.figures:
        _show(figure)


def main(argv: list[str] | None = None) -> int:
    from exercises import notebook

    return notebook.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["CannotCheck", "Exercise", "Mismatch", "Report", "Result", "all_exercises",
           "awkward_1d", "bandwidth_verdict", "check", "compare", "exercise", "expect",
           "expect_triton_kernel", "get", "load_cell", "needs", "run_check", "triton_launches",
           "where_in_student_code"]
