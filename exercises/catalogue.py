"""What an exercise is and where the course keeps them: the :class:`Exercise` record, the
:func:`exercise` decorator that registers a check, lookup by id (:func:`get`,
:func:`all_exercises`, loading each lesson's modules on first use) and the :class:`Result` a
check comes back as. Everything that runs a check builds on this module, and it imports none
of them (the package re-exports it: ``from exercises import exercise`` in a lesson's module).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import syllabus


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
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if any(info.name == s or info.name.startswith(f"{s}_") for s in slugs):
            importlib.import_module(f"exercises.{info.name}")


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
