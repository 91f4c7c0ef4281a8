"""Memory safety of a Triton kernel a student wrote, on any machine: every load and store
checked against the tensors the launch was given, in Triton's interpreter.

Values alone miss two classic bugs: a load that reads outside its tensor whose values are
masked away later (or land in padding nobody compares), and a store one element past the end
that happens to hit memory nobody looks at. Guard zones catch the second only where they
sit. This checker sees both, exactly: while :func:`bounds_checked` is active, the
interpreter's loads and stores compare every address a lane would touch (its mask on) with
the memory of the tensor arguments of the launch, and the lanes that fall outside are recorded
and *not performed* (so a wild address never crashes the process). triton-viz's sanitizer does
the same job for Triton-Puzzles, but triton-viz 3.0 (the newest on PyPI) fails to import with
Triton 3.8 (``'InterpreterBuilder' object has no attribute 'create_make_block_ptr'``,
2026-11-26), so the course carries these 100 lines instead.

On a GPU the student's kernels are compiled ones: :func:`interpreted` makes interpreted copies
of them (and of the Python function that launches them), so the same check runs there too, on
small problems, before the compiled kernel is run and timed.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import numpy as np
import torch


@dataclass(frozen=True)
class Region:
    """The bytes of one tensor argument of a launch."""

    name: str
    start: int
    end: int  # one past its last byte
    numel: int
    element_size: int


@dataclass(frozen=True)
class Violation:
    kind: str  # "load" or "store"
    program: tuple[int, ...]
    address: int
    element_size: int
    regions: tuple[Region, ...]  # the launch's tensors

    def __str__(self) -> str:
        where = f"program {self.program}" if any(self.program[1:]) else \
            f"program {self.program[0]}"
        if not self.regions:
            return f"{where}: a {self.kind} with no tensor argument to touch"
        near = min(self.regions, key=lambda r: min(abs(self.address - r.start),
                                                   abs(self.address - r.end)))
        index = (self.address - near.start) // near.element_size
        return (f"{where} {'loaded' if self.kind == 'load' else 'stored'} element {index} of "
                f"{near.name} (nearest tensor), which has {near.numel} element(s): "
                f"{'a read' if self.kind == 'load' else 'a write'} outside the tensor")


def _regions(names, args, kwargs) -> tuple[Region, ...]:
    found = []
    for name, arg in [*zip(names, args, strict=False), *kwargs.items()]:
        tensor = getattr(arg, "base", arg)  # (a TensorWrapper carries its tensor in .base)
        if isinstance(tensor, torch.Tensor) and tensor.numel():
            steps = zip(tensor.shape, tensor.stride(), strict=True)
            span = sum((n - 1) * abs(s) for n, s in steps) + 1
            start = tensor.data_ptr()
            found.append(Region(name, start, start + span * tensor.element_size(),
                                tensor.numel(), tensor.element_size()))
    return tuple(found)


@contextlib.contextmanager
def bounds_checked() -> Iterator[list[Violation]]:
    """Check every load and store of the interpreted launches inside the block; yields the
    list of violations (the first one per load or store instruction of each program)."""
    from triton.runtime import interpreter

    violations: list[Violation] = []
    launch: dict[str, tuple[Region, ...]] = {"regions": ()}
    builder = interpreter.interpreter_builder
    init_args = interpreter.GridExecutor._init_args_hst
    load = interpreter.InterpreterBuilder.create_masked_load
    store = interpreter.InterpreterBuilder.create_masked_store

    def recording_init(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        launch["regions"] = _regions(self.arg_names, args_hst, kwargs_hst)
        return args_hst, kwargs_hst

    def inside(kind: str, ptrs, mask):
        """The mask with the lanes outside every tensor turned off (and recorded)."""
        size = max(ptrs.get_element_ty().primitive_bitwidth // 8, 1)
        addresses = ptrs.data.astype(np.uint64)
        active = np.broadcast_to(mask.data.astype(bool), addresses.shape)
        ok = np.zeros(addresses.shape, dtype=bool)
        for r in launch["regions"]:
            ok |= (addresses >= r.start) & (addresses + size <= r.end)
        bad = active & ~ok
        if bad.any():
            program = tuple(int(i) for i in builder.grid_idx)
            violations.append(Violation(kind, program, int(addresses[bad].flat[0]), size,
                                        launch["regions"]))
        return type(mask)(active & ok, mask.dtype.scalar if hasattr(mask.dtype, "scalar")
                          else mask.dtype)

    def checked_load(self, ptrs, mask, other, *rest):
        return load(self, ptrs, inside("load", ptrs, mask), other, *rest)

    def checked_store(self, ptrs, value, mask, *rest):
        return store(self, ptrs, value, inside("store", ptrs, mask), *rest)

    with mock.patch.object(interpreter.GridExecutor, "_init_args_hst", recording_init), \
            mock.patch.object(interpreter.InterpreterBuilder, "create_masked_load",
                              checked_load), \
            mock.patch.object(interpreter.InterpreterBuilder, "create_masked_store",
                              checked_store):
        yield violations


def interpreted(fn: Callable) -> Callable:
    """A copy of ``fn`` (a ``@triton.jit`` kernel, or a Python function that launches some)
    in which every ``@triton.jit`` function it reaches through its module's names runs in
    Triton's interpreter, whether or not ``TRITON_INTERPRET`` was set when it was defined."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    copies: dict[int, dict] = {}

    def swapped(scope: dict) -> dict:
        if id(scope) not in copies:
            new = copies[id(scope)] = dict(scope)
            for name, value in scope.items():
                if isinstance(value, JITFunction | InterpretedFunction):
                    new[name] = InterpretedFunction(rebound(value.fn))
        return copies[id(scope)]

    def rebound(f: types.FunctionType) -> types.FunctionType:
        copy = types.FunctionType(f.__code__, swapped(f.__globals__), f.__name__,
                                  f.__defaults__, f.__closure__)
        copy.__kwdefaults__, copy.__annotations__ = f.__kwdefaults__, f.__annotations__
        return copy

    if isinstance(fn, JITFunction | InterpretedFunction):
        return InterpretedFunction(rebound(fn.fn))
    if isinstance(fn, types.FunctionType):
        return rebound(fn)
    raise TypeError(f"expected a @triton.jit kernel or a Python function, got "
                    f"{type(fn).__name__}")


# seen on an H200 (Triton 3.6, compiled kernels) for 05.triton_dot's interpreted copy, not with
# Triton 3.8's interpreter on a CPU: the copy then cannot run, through no fault of the answer
_COPY_FAILED = "Cannot call @triton.jit'd outside of the scope of a kernel"


def expect_in_bounds(run: Callable[[], object], what: str) -> str | None:
    """Mismatch naming the first access outside the launch's tensors while ``run()`` runs
    (interpreted launches only: wrap the answer with :func:`interpreted` first). Returns None,
    or, where this Triton cannot run an interpreted copy of a compiled answer, the line that
    says memory safety was not checked (the check goes on with the values)."""
    from course_utils import env
    from exercises import Mismatch

    with bounds_checked() as violations, np.errstate(all="ignore"):
        try:
            run()
        except Exception as err:
            if env.TRITON_INTERPRET or _COPY_FAILED not in repr(err) + repr(err.__cause__):
                raise
            import triton

            return (f"not verified on this machine: every address inside the tensors (Triton "
                    f"{triton.__version__} could not run an interpreted copy of your kernel)")
    if violations:
        more = f" ({len(violations) - 1} more like it)" if len(violations) > 1 else ""
        raise Mismatch(f"{what}: {violations[0]}{more}",
                       "mask every load and store whose offsets may pass the end (and the "
                       "start): a masked-off lane touches no memory, an unmasked one does, "
                       "even when its value is thrown away later")
    return None
