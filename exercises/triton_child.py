"""A Triton answer in a child process, where compute-sanitizer watches the compiled kernel.

In Triton's interpreter :mod:`exercises.triton_checks` checks every lane's address, on any
machine. Some Tritons cannot interpret a copy of a compiled answer (Triton 3.6 with NumPy 2.4
or newer: ``range(0, K, BLOCK_K)`` over a kernel argument fails in the interpreter itself), so
on such a GPU the answer is checked as the GPU runs it: its text is gathered here
(:func:`answer_source`), a child of :mod:`exercises.kernel_checks` imports it
(:func:`imported`) and runs it on small problems with every tensor in an allocation of its own
exact size, under ``compute-sanitizer --tool memcheck``, which names any access outside them.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import textwrap
import types
from collections.abc import Callable

from course_utils import env
from exercises import kernel_checks
from exercises.student_code import write_whole

# every answer may name these; the decorator line (@triton.jit) is not among a function's names
HEADER = ("import torch", "import triton", "import triton.language as tl")


def answer_source(*entry: Callable) -> str:
    """The Python text of an answer: the functions ``entry`` (a launcher, a ``@triton.jit``
    kernel) and everything of the student's they name, followed through: other functions and
    kernels of the same module, the modules they use and their number constants (a tile size
    such as ``BLOCK_M = 32``)."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    kernels = JITFunction | InterpretedFunction  # compiled, or under TRITON_INTERPRET=1
    lines, functions = list(HEADER), {}

    def visit(obj) -> None:
        fn = obj.fn if isinstance(obj, kernels) else obj
        if fn.__name__ in functions:
            return
        if isinstance(fn, type):  # a class (a torch.autograd.Function): its methods, followed
            functions[fn.__name__] = class_source(fn)
            for member in vars(fn).values():
                if isinstance(getattr(member, "__func__", member), types.FunctionType):
                    follow(getattr(member, "__func__", member))
            return
        functions[fn.__name__] = textwrap.dedent(inspect.getsource(fn))
        follow(fn)

    def follow(fn) -> None:
        """What ``fn`` names: modules imported, number constants kept, functions visited."""
        for name in fn.__code__.co_names:
            value = fn.__globals__.get(name)
            if isinstance(value, types.ModuleType):
                as_name = "" if value.__name__ == name else f" as {name}"
                lines.append(f"import {value.__name__}{as_name}")
            elif isinstance(value, bool | int | float):
                lines.append(f"{name} = {value!r}")
            elif isinstance(value, kernels) or (
                    isinstance(value, types.FunctionType) and value.__module__ == fn.__module__):
                visit(value)

    for fn in entry:
        visit(fn)
    return "\n".join(dict.fromkeys(lines)) + "\n\n\n" + "\n\n\n".join(functions.values())


def class_source(cls: type) -> str:
    """The text of a class, rebuilt from its methods' source (a class defined in a notebook's
    ``__main__`` has no file for ``inspect.getsource`` to read; its functions have)."""
    bases = ", ".join(f"{b.__module__}.{b.__qualname__}" for b in cls.__bases__)
    methods = [textwrap.indent(textwrap.dedent(inspect.getsource(getattr(m, "__func__", m))),
                               "    ")
               for m in vars(cls).values()
               if isinstance(getattr(m, "__func__", m), types.FunctionType)]
    return f"class {cls.__name__}({bases}):\n" + "\n".join(methods)


def imported(source: str) -> types.ModuleType:
    """``source`` (an :func:`answer_source`) as a module, from a file of its own: Triton reads a
    kernel's text from its file to compile it."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = env.var_dir("exercises") / f"triton_answer_{digest}.py"
    write_whole(path, source)  # (two ranks of one check import the same answer at once)
    loader = importlib.machinery.SourceFileLoader(f"triton_answer_{digest}", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def sanitized(id: str, *entry: Callable, cases: str, prefix: str = "") -> list[str]:
    """The compiled answer (``entry``: its launcher and kernels, :func:`answer_source`, after
    ``prefix``) in exercise ``id``'s GPU child (:data:`exercises.kernel_checks.CHILDREN`), under
    compute-sanitizer's memcheck: the report's lines, naming the ``cases`` it ran (a Mismatch
    where memcheck finds an access outside a tensor)."""
    lines = kernel_checks.sanitize(id, prefix + answer_source(*entry), ("memcheck",))
    return [f"{line} (the compiled kernel on {cases}, each tensor its own allocation: no access "
            "outside them)" if line.startswith("compute-sanitizer --tool") else line
            for line in lines]
