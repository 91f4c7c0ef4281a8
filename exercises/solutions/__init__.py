"""Solutions and known-wrong answers of the exercises, as cell source text.

``lessonNN.SOLUTIONS[id]`` is a correct answer and ``lessonNN.WRONG[id]`` a typical mistake; both
define the names the stub defines. ``tests/test_exercises.py`` checks that every solution passes
and every wrong answer fails with a teaching message. Try the exercise before reading these.
"""

import importlib
import pkgutil


def answers() -> dict[str, tuple[str, str]]:
    """``{exercise id: (solution source, wrong source)}`` over every lesson module here."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for id, source in module.SOLUTIONS.items():
            found[id] = (source, module.WRONG[id])
    return found
