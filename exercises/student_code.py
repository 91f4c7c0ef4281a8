"""The student's code as the checks see it: a cell's source run as a module
(:func:`load_cell`, so Triton and ``inspect`` find its functions' source), written whole for
the processes that read it (:func:`write_whole`), told apart from the untouched stub
(:func:`untouched`, by what the code is, not how it is laid out), and the line of the cell an
error came from (:func:`where_in_student_code`)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import textwrap
import traceback
import types

from course_utils import env
from exercises.catalogue import Exercise


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


def fingerprint(obj) -> object:
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
        return ("class", tuple((name, fingerprint(fn)) for name, fn in sorted(methods.items())
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


def untouched(ex: Exercise, answers: tuple) -> bool:
    """True while ``answers`` are the stub's own code (or still hold a ``...``): not attempted."""
    if any(_has_ellipsis(a) for a in answers):
        return True
    if ex.id not in _stub_prints:
        names = load_cell(ex.stub, f"stub_{ex.id}")
        _stub_prints[ex.id] = tuple(fingerprint(names[n]) for n in ex.answers)
    return tuple(fingerprint(a) for a in answers) == _stub_prints[ex.id]


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
