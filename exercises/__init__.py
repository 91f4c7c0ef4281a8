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

import io

# what checks and lessons import from the package (`from exercises import exercise, expect`)
from exercises.catalogue import Exercise, Result, all_exercises, exercise, get  # noqa: F401
from exercises.expectations import (  # noqa: F401
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
from exercises.student_code import (  # noqa: F401
    load_cell,
    untouched,
    where_in_student_code,
    write_whole,
)

# --------------------------------------------------------------------------------------------
# Running a check
# --------------------------------------------------------------------------------------------


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
    if untouched(ex, answers):
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


