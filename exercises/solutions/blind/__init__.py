"""Blind wrong answers: plausible student mistakes, written without seeing the checks.

Every answer here was written from an exercise's statement and stub cell alone (plus the
lessons and the course's kernels a student can read), by someone who never saw the exercise
checks, their mutation operators or the reference solutions. Each is a complete answer cell, as
a student would paste it, that defines every name the check reads, runs, and gives mostly right
output on friendly inputs, but is wrong per the statement: a bound off by one, a mask missing on
one side, a running max started at 0, padding that enters a max, a missing barrier, a buffer
cached between calls, a wrong layout that only square shapes hide, and so on.

The mutation harness runs them like its own mutants and counts them apart: a blind answer that
passes is a gap in a check that nobody tuned the check against.

One module per exercise (``blind/<slug>_<name>.py``: its ``ID`` and ``BLIND[label] = cell
source``, the label saying what the mistake is); :data:`BLIND` gathers them by exercise id. An
answer found to behave exactly like the solution on every input (its "mistake" changes no
value the exercise can produce) stays in ``BLIND`` and is listed in the module's
``EQUIVALENT[label] = why``, gathered in :data:`EQUIVALENT`: the harness reports it, runs none.

Most of a wrong whole kernel is right, so a long module keeps its first answer whole and the
others as that answer with its own mistake swapped in (:func:`edited`): a reader sees each
mistake, not eight copies of one kernel.
"""

import importlib
import pkgutil


def edited(base: str, edits: list[tuple[str, str]]) -> str:
    """``base`` with each ``(old, new)`` applied in turn; each ``old`` must occur exactly once."""
    for old, new in edits:
        if base.count(old) != 1:
            raise ValueError(f"edit expected its old text once in the answer, found it "
                             f"{base.count(old)} times: {old[:60]!r}")
        base = base.replace(old, new)
    return base


BLIND: dict[str, dict[str, str]] = {}
EQUIVALENT: dict[str, dict[str, str]] = {}
for _info in pkgutil.iter_modules(__path__):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    BLIND[_module.ID] = _module.BLIND
    EQUIVALENT[_module.ID] = getattr(_module, "EQUIVALENT", {})
