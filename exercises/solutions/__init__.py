"""Solutions and known-wrong answers of the exercises, as cell source text.

``<slug>.SOLUTIONS[id]`` is a correct answer and ``<slug>.WRONG[id]`` a typical mistake, or
several: ``{"what it gets wrong": source, ...}`` (an off-by-one edge, an out-of-bounds write, a
missing ``__syncthreads``, plain PyTorch where a kernel is asked for, a constant...); all define
the names the stub defines. ``tests/test_exercises.py`` checks that every solution passes and
that every wrong answer fails with a teaching message, each in its own test. Try the exercise
before reading these.

``<slug>.SAYS[id]`` (where a lesson has one) gives, per wrong answer, the words its "not yet"
must contain: the mistake named.

``<slug>.EQUIVALENT[id]`` (where a lesson has one) lists the mechanical mutants of a solution
(:mod:`exercises.mutants`) that behave exactly like it, ``{mutant key: why}``, and the blind
answers' modules list theirs the same way: the mutation harness skips them, and the reason is
there for a reader to dispute.

:mod:`~exercises.solutions.blind` is not a lesson's: it holds wrong answers written from the
statements and stubs alone, by someone who never saw a check or a solution (:func:`blind_answers`);
the mutation harness runs them and counts them apart.
"""

import importlib
import pkgutil

BLIND = "blind"  # the module of wrong answers written without seeing the checks


def answers() -> dict[str, tuple[str, dict[str, str]]]:
    """``{exercise id: (solution source, {what it gets wrong: wrong source})}`` over every
    lesson module here (a lone wrong answer is labelled "wrong")."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == BLIND:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for id, source in module.SOLUTIONS.items():
            wrong = module.WRONG[id]
            found[id] = (source, wrong if isinstance(wrong, dict) else {"wrong": wrong})
    return found


def says() -> dict[str, dict[str, str]]:
    """``{exercise id: {what it gets wrong: words its "not yet" must contain}}`` where a lesson
    module lists them (``SAYS``): a verdict that names the mistake, held by the tests."""
    found: dict[str, dict[str, str]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name != BLIND:
            module = importlib.import_module(f"{__name__}.{info.name}")
            for exercise, words in getattr(module, "SAYS", {}).items():
                found.setdefault(exercise, {}).update(words)
    return found


def equivalent() -> dict[str, dict[str, str]]:
    """``{exercise id: {mutant key: why it behaves exactly like the solution}}`` over every
    lesson module here."""
    found: dict[str, dict[str, str]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if info.name == BLIND:  # keyed by label there; its mutants' keys are "blind: <label>"
            for exercise, known in module.EQUIVALENT.items():
                found.setdefault(exercise, {}).update(
                    {f"blind: {label}": why for label, why in known.items()})
            continue
        for exercise, known in getattr(module, "EQUIVALENT", {}).items():
            found.setdefault(exercise, {}).update(known)
    return found


def blind_answers() -> dict[str, dict[str, str]]:
    """``{exercise id: {what it gets wrong: source}}``: the wrong answers written from the
    statement and the stub alone (:mod:`exercises.solutions.blind`; empty where none)."""
    try:
        module = importlib.import_module(f"{__name__}.{BLIND}")
    except ModuleNotFoundError:
        return {}
    return getattr(module, "BLIND", {})
