"""Interpreted copies of compiled Triton kernels: how a check on a GPU runs a student's kernel in
Triton's interpreter first, where :mod:`exercises.triton_checks` sees every lane's address.

:func:`interpreted` copies a ``@triton.jit`` kernel (or a Python function that launches some)
so that everything it reaches runs in the interpreter, whether or not ``TRITON_INTERPRET`` was
set when it was defined. Two Tritons need mending for that, and both leak without it
(:func:`_interpreter_mended`, :func:`_device_call`): Triton 3.6 (the GPU machines') cannot call
``triton.language``'s own compiled helpers from an interpreted kernel, nor take ``int()`` of a
scalar with NumPy 2.4+; and every Triton's device-function call leaves ``triton.language``
patched for the interpreter, which breaks the next compiled kernel of the process.
:func:`copy_failed` tells a Triton that still cannot from an answer that is wrong.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from unittest import mock

import numpy as np


@contextlib.contextmanager
def _interpreter_mended() -> Iterator[None]:
    """What Triton 3.6's interpreter cannot do for a copy of a compiled kernel, done for it:
    ``triton.language``'s own ``@jit`` helpers (``tl.zeros``, ``tl.cdiv``, ...) were compiled
    functions when Triton was imported without ``TRITON_INTERPRET``, and a call to one from an
    interpreted kernel raised "Cannot call @triton.jit'd outside of the scope of a kernel";
    and with NumPy 2.4 or newer its ``int(tensor)`` (``range(start, n)`` over a program id or a
    kernel argument) failed on the 1-element arrays it keeps scalars in. Triton 3.8 does both
    itself. And a helper called from the kernel (``tl.zeros``, the answer's own ``@jit``
    functions) puts ``triton.language`` back after it (:func:`_device_call`)."""
    from triton.runtime import interpreter
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    helpers: dict[int, InterpretedFunction] = {}

    def call(self, *args, **kwargs):  # a compiled helper called from an interpreted kernel
        if id(self) not in helpers:
            helpers[id(self)] = InterpretedFunction(self.fn)
        return _device_call(helpers[id(self)], args, kwargs)

    tensor_patch = getattr(interpreter, "_patch_lang_tensor", None)

    def index(self) -> int:  # a scalar held as a 1-element array; a block still raises
        data = np.asarray(self.handle.data)
        return int(data.reshape(-1)[0]) if data.size == 1 else int(data)

    def patch_tensor(tensor, scope):
        tensor_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", index)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(JITFunction, "__call__", call))
        stack.enter_context(mock.patch.object(InterpretedFunction, "__call__",
                                              lambda self, *args, **kwargs:
                                              _device_call(self, args, kwargs)))
        if tensor_patch is not None:
            stack.enter_context(mock.patch.object(interpreter, "_patch_lang_tensor",
                                                  patch_tensor))
        yield


def _interpreted_function():
    """``InterpretedFunction`` whose launches run with :func:`_interpreter_mended`."""
    from triton.runtime.interpreter import InterpretedFunction

    class Interpreted(InterpretedFunction):
        def run(self, *args, **kwargs):
            with _interpreter_mended():
                return super().run(*args, **kwargs)

    return Interpreted


def _device_call(function, args: tuple, kwargs: dict):
    """``function`` (an ``InterpretedFunction``) called from an interpreted kernel, with
    ``triton.language`` patched for its module and put back after. Triton's own device call
    (3.6 and 3.8) patches and never puts back: harmless under ``TRITON_INTERPRET=1``, where
    nothing is compiled, but on a GPU the next compiled kernel of the process would see the
    interpreter's ``tl`` (the H100 run at dec5b75: "'ir.value' object has no attribute
    'dtype'" in every later Triton compile)."""
    from triton.runtime import interpreter

    scope = interpreter._patch_lang(function.fn)
    try:
        return function.rewrite()(*args, **kwargs)
    except Exception as err:
        raise interpreter.InterpreterError(repr(err)) from err
    finally:
        scope.restore()


def interpreted(fn: Callable) -> Callable:
    """A copy of ``fn`` (a ``@triton.jit`` kernel, or a Python function that launches some)
    in which every ``@triton.jit`` function it reaches through its module's names runs in
    Triton's interpreter, whether or not ``TRITON_INTERPRET`` was set when it was defined."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    Interpreted = _interpreted_function()
    copies: dict[int, dict] = {}

    def swapped(scope: dict) -> dict:
        if id(scope) not in copies:
            new = copies[id(scope)] = dict(scope)
            for name, value in scope.items():
                if isinstance(value, JITFunction | InterpretedFunction):
                    new[name] = Interpreted(rebound(value.fn))
        return copies[id(scope)]

    def rebound(f: types.FunctionType) -> types.FunctionType:
        copy = types.FunctionType(f.__code__, swapped(f.__globals__), f.__name__,
                                  f.__defaults__, f.__closure__)
        copy.__kwdefaults__, copy.__annotations__ = f.__kwdefaults__, f.__annotations__
        return copy

    if isinstance(fn, JITFunction | InterpretedFunction):
        return Interpreted(rebound(fn.fn))
    if isinstance(fn, types.FunctionType):
        return rebound(fn)
    raise TypeError(f"expected a @triton.jit kernel or a Python function, got "
                    f"{type(fn).__name__}")


# why an interpreted copy of a compiled answer may fail through no fault of the answer: seen on
# an H200 and an H100 (Triton 3.6, NumPy 2.5) for mma_matmul.triton_dot, and on a CPU with
# Triton 3.6 and NumPy 2.4 (its interpreter turns a kernel argument into a 1-element array, which
# `range()` can no longer take); never with Triton 3.8's interpreter
_COPY_FAILED = ("Cannot call @triton.jit'd outside of the scope of a kernel",
                "only 0-dimensional arrays can be converted to Python scalars")


def copy_failed(err: BaseException) -> bool:
    """Whether ``err`` (or its cause) is this Triton failing to interpret a copy of a compiled
    kernel (:data:`_COPY_FAILED`), not the kernel's own fault."""
    said = f"{err} {err!r} {err.__cause__} {err.__cause__!r}"
    return any(why in said for why in _COPY_FAILED)
