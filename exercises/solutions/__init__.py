"""Solutions and known-wrong answers of the exercises, as cell source text.

``lessonNN.SOLUTIONS[id]`` is a correct answer and ``lessonNN.WRONG[id]`` a typical mistake, or
several: ``{"what it gets wrong": source, ...}`` (an off-by-one edge, an out-of-bounds write, a
missing ``__syncthreads``, plain PyTorch where a kernel is asked for, a constant...); all define
the names the stub defines. ``tests/test_exercises.py`` checks that every solution passes and
that every wrong answer fails with a teaching message, each in its own test. Try the exercise
before reading these.
"""

import importlib
import pkgutil


def answers() -> dict[str, tuple[str, dict[str, str]]]:
    """``{exercise id: (solution source, {what it gets wrong: wrong source})}`` over every
    lesson module here (a lone wrong answer is labelled "wrong")."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for id, source in module.SOLUTIONS.items():
            wrong = module.WRONG[id]
            found[id] = (source, wrong if isinstance(wrong, dict) else {"wrong": wrong})
    return found
