"""Triton's interpreter made to behave like a GPU where the exercises' checks need it (lesson 09
uses them; any check that runs a student's ``@triton.jit`` code on the CPU may).

* :func:`tf32` rounds float32 values to tf32, as tensor cores read them, and
  :func:`tensor_core_precision` makes the interpreter's float32 ``tl.dot`` do so unless it was
  given ``input_precision="ieee"`` (the interpreter itself multiplies in full float32);
* :func:`quiet` runs a kernel under both, with NumPy's overflow warnings silenced (the interpreter
  runs ``exp`` in NumPy; a wrong answer overflows);
* :func:`watched` records each running value a student's function returns that is not float32,
  and :func:`expect_float32` turns what it recorded into a "not yet" (compiled, Triton itself
  refuses a loop variable whose type changes).

Compiled (no ``TRITON_INTERPRET``), each of them leaves the code as it is.
"""

from __future__ import annotations

import contextlib

import numpy as np

from course_utils import env
from exercises import expect


def tf32(data: np.ndarray) -> np.ndarray:
    """float32 values rounded to tf32 (10 mantissa bits, to nearest even), as tensor cores read
    them."""
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x0FFF) + ((bits >> np.uint32(13)) & np.uint32(1)))
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


@contextlib.contextmanager
def tensor_core_precision():
    """In the interpreter: ``tl.dot`` on float32 operands rounds them to tf32 unless it was
    given ``input_precision="ieee"``, as a GPU's tensor cores do (the interpreter itself
    multiplies in full float32 whatever it is asked). Compiled, nothing changes."""
    if not env.TRITON_INTERPRET:
        yield
        return
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision != ir.INPUT_PRECISION.IEEE and a.data.dtype == np.float32:
            a = interpreter.TensorHandle(tf32(a.data), a.dtype)
            b = interpreter.TensorHandle(tf32(b.data), b.dtype)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    try:
        yield
    finally:
        builder.create_dot = original


def quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` under :func:`tensor_core_precision`, NumPy's warnings silenced."""
    # the interpreter runs exp in NumPy, which warns on the overflows a wrong answer makes;
    # its tl.dot rounds float32 to tf32 where a GPU would
    with np.errstate(all="ignore"), tensor_core_precision():
        return fn(*args, **kwargs)


def watched(fn, outputs: tuple[str, ...], seen: list[str]):
    """In the interpreter: ``fn``, recording each value it returns (named by ``outputs``) that
    is not float32 in ``seen``. Compiled, Triton itself refuses a loop variable whose type
    changes, so ``fn`` is used as it is."""
    if not env.TRITON_INTERPRET:
        return fn
    import triton.language as tl

    def watched(*args, **kwargs):
        out = fn(*args, **kwargs)
        for name, value in zip(outputs, out, strict=False):
            if getattr(value, "dtype", None) != tl.float32:
                seen.append(f"{name} as {getattr(value, 'dtype', type(value).__name__)}")
        return out

    return watched


def expect_float32(seen: list[str], fn: str, what: str) -> None:
    """Not yet if :func:`watched` saw ``fn`` (the student's function) return a value that is
    not float32; ``what`` names the problem it ran."""
    expect(not seen, f"{what}: your {fn} returned {seen[0] if seen else ''}, not float32",
           "keep the running sums in float32 from one step to the next (the kernel made them "
           "float32); round to the input's dtype only what goes into a tl.dot. Compiled, Triton "
           "refuses a loop variable whose type changes")
