"""Checks of a Triton kernel a student wrote, on any machine: its memory safety (every load and
store checked against the tensors the launch was given, in Triton's interpreter) and, for a
fusion exercise, that one call is one fused kernel.

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

On a GPU the student's kernels are compiled ones: :func:`interpreted` (from
:mod:`exercises.interpreted`) makes interpreted copies of them (and of the Python function that
launches them), so the same check runs there too, on
small problems, before the compiled kernel is run and timed. :func:`expect_bounds` does it all
for a launcher on a list of cases, each input :func:`fenced` (NaN on both sides, so that an
access just outside lands in no tensor); :func:`interpreted_memory` shows two things the
interpreter hides (masked-off lanes of a load without ``other=``, outputs never written).
Where a Triton cannot run an interpreted copy of a compiled answer, :func:`expect_in_bounds`
and :func:`expect_bounds` return a "not verified ..." line instead, for the report.

:func:`expect_one_fused_kernel` counts what one call runs, the same way on a CPU and a GPU: one
Triton launch and no PyTorch op that computes or copies.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from exercises import Mismatch, expect, triton_launchers

# the copies the checks run (their own module): the checks' and the lessons' names for them
from exercises.interpreted import copy_failed, interpreted  # noqa: E402, F401


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


def kernel_source(kernel) -> str:
    """The text of a ``@triton.jit`` kernel (compiled or interpreted) or a function, for checks
    that read it; "" where Python cannot find it."""
    import inspect

    try:
        return inspect.getsource(getattr(kernel, "fn", kernel))
    except (OSError, TypeError):
        return ""


def calls(kernel, attr: str) -> list | None:
    """The calls ``<something>.<attr>(...)`` in the kernel's source (ast.Call nodes), or None
    where its source cannot be read (the values and the launch decide then)."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(kernel_source(kernel)))
    except SyntaxError:
        return None
    if not tree.body:
        return None
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == attr]


def masked_loads_without_other(kernel) -> list[int]:
    """The lines (counted from the kernel's ``def``) of its masked ``tl.load`` calls that
    give no ``other=``: their masked-off lanes are undefined. The interpreter shows them as NaN
    (:func:`interpreted_memory`); compiled Triton happens to give 0 on the GPUs we tried, so on
    a GPU the values alone would pass a sum over them."""
    loads = calls(kernel, "load") or []
    return [node.lineno for node in loads if {"mask"} <= {k.arg for k in node.keywords}
            and "other" not in {k.arg for k in node.keywords} and len(node.args) < 3]


def as_array(handle) -> np.ndarray:
    """The NumPy array of an interpreter value: a TensorHandle's data, or the array itself (a
    tensor descriptor's load passes its mask as a plain array)."""
    return handle if isinstance(handle, np.ndarray) else np.asarray(handle.data)


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
        addresses = as_array(ptrs).astype(np.uint64)
        active = np.broadcast_to(as_array(mask).astype(bool), addresses.shape)
        ok = np.zeros(addresses.shape, dtype=bool)
        for r in launch["regions"]:
            ok |= (addresses >= r.start) & (addresses + size <= r.end)
        bad = active & ~ok
        if bad.any():
            program = tuple(int(i) for i in builder.grid_idx)
            violations.append(Violation(kind, program, int(addresses[bad].flat[0]), size,
                                        launch["regions"]))
        if isinstance(mask, np.ndarray):  # (a tensor descriptor's mask is a plain array)
            return active & ok
        return type(mask)(active & ok, mask.dtype.scalar if hasattr(mask.dtype, "scalar")
                          else mask.dtype)

    def checked_load(self, ptrs, mask, other, *rest, **options):
        return load(self, ptrs, inside("load", ptrs, mask), other, *rest, **options)

    def checked_store(self, ptrs, value, mask, *rest, **options):
        return store(self, ptrs, value, inside("store", ptrs, mask), *rest, **options)

    with mock.patch.object(interpreter.GridExecutor, "_init_args_hst", recording_init), \
            mock.patch.object(interpreter.InterpreterBuilder, "create_masked_load",
                              checked_load), \
            mock.patch.object(interpreter.InterpreterBuilder, "create_masked_store",
                              checked_store):
        yield violations


def expect_in_bounds(run: Callable[[], object], what: str) -> str | None:
    """Mismatch naming the first access outside the launch's tensors while ``run()`` runs
    (interpreted launches only: wrap the answer with :func:`interpreted` first). Returns None,
    or, where this Triton cannot run an interpreted copy of a compiled answer, the line that
    says memory safety was not checked (the check goes on with the values)."""
    from course_utils import env

    with bounds_checked() as violations, np.errstate(all="ignore"):
        try:
            run()
        except Exception as err:
            if env.TRITON_INTERPRET or not copy_failed(err):
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


# --------------------------------------------------------------------------------------------
# Inputs, answers and what the interpreter hides
# --------------------------------------------------------------------------------------------


def fenced(*shape: int, dtype: torch.dtype = torch.float32, transposed: bool = False,
           scale: float = 1.0) -> torch.Tensor:
    """Fresh random values in a CPU tensor of ``shape`` (a transposed view of its memory when
    ``transposed``), with NaN-filled memory as large as the tensor on both sides: an access
    just outside it touches memory that belongs to no tensor of the launch, which
    :func:`bounds_checked` then names (a neighbouring tensor of the check, where the allocator
    put one, would hide it)."""
    numel = int(np.prod(shape))
    inside = nan_fenced(numel, dtype, "cpu")
    view = inside.view(*shape[::-1]).t() if transposed else inside.view(*shape)
    view.copy_(scale * torch.randn(*shape))
    return view


def nan_fenced(numel: int, dtype: torch.dtype, device) -> torch.Tensor:
    """``numel`` elements in the middle of a NaN-filled buffer (as many again on each side)."""
    pad = max(numel, 64)
    buffer = torch.full((numel + 2 * pad,), float("nan"), dtype=dtype, device=device)
    return buffer[pad:pad + numel]


def fenced_copy(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of ``t`` on its device, between NaN fences as in :func:`fenced`.

    Compiled, where no interpreter checks each address, a lane that reads past the tensor
    then reads NaN, and the NaN reaches the values the check compares (the next allocation
    would give it plausible numbers: compute-sanitizer does not see a read that lands inside
    another tensor)."""
    inside = nan_fenced(t.numel(), t.dtype, t.device)
    return inside.view(t.shape).copy_(t)


def fence_broken(t: torch.Tensor) -> bool:
    """Whether something was written into the NaN fences around ``t`` (a tensor made by
    :func:`fenced_copy` or :func:`fenced`): a store outside the tensor."""
    buffer = t._base if t._base is not None else t
    pad = (buffer.numel() - t.numel()) // 2
    return bool(not buffer[:pad].isnan().all() or not buffer[pad + t.numel():].isnan().all())


def call_answer(fn, *args):
    """``fn(*args)``, the student's function: an exception it raises is a Mismatch naming the
    inputs it failed on (NotImplementedError, the stub's, passes through)."""
    try:
        # the interpreter runs exp in NumPy, which warns when exp(-2u) overflows to the
        # intended inf (x / inf = 0)
        with np.errstate(over="ignore"):
            return fn(*args)
    except NotImplementedError:
        raise
    except Exception as err:
        shapes = ", ".join(f"{tuple(a.shape)} {str(a.dtype).removeprefix('torch.')}"
                           f"{'' if a.is_contiguous() else ' non-contiguous'}"
                           for a in args if isinstance(a, torch.Tensor))
        raise Mismatch(f"on inputs {shapes}: your code raised {type(err).__name__}: {err}",
                       "try that shape in the stub cell; for views call .contiguous() before "
                       "using flat offsets, and return early for an empty tensor") from err


def expect_bounds(fn, cases, what: str) -> list[str]:
    """Run ``fn`` (the student's launcher) in Triton's interpreter on each ``(label, args)``
    of ``cases`` (small CPU tensors, :func:`fenced`), every lane's address checked; the
    labels, for the report line. The same on a GPU: an interpreted copy of the answer runs."""
    copy = interpreted(fn)
    for label, args in cases:
        if unchecked := expect_in_bounds(lambda args=args: call_answer(copy, *args),
                                         f"{what} on {label}"):
            return [unchecked]  # this Triton cannot interpret a copy (the line says so)
    return [label for label, _ in cases]


@contextlib.contextmanager
def interpreted_memory():
    """Two things the interpreter hides, shown: the masked-off lanes of a ``tl.load`` without
    ``other=`` read as NaN (they are undefined; compiled, they hold whatever the registers
    held, not the interpreter's zeros), and the addresses stored are recorded, so that an
    element of the output never written shows, whatever ``torch.empty`` happened to hold.
    Yields ``{"stored": [address arrays], "undefined": [the loads with such lanes]}``."""
    from triton.runtime import interpreter

    load = interpreter.InterpreterBuilder.create_masked_load
    store = interpreter.InterpreterBuilder.create_masked_store
    seen: dict[str, list] = {"stored": [], "undefined": []}

    def undefined(self, ptrs, mask, other, *rest, **options):
        dtype = interpreter._get_np_dtype(ptrs.get_element_ty())
        if other is None and np.issubdtype(dtype, np.floating) and not as_array(mask).all():
            seen["undefined"].append(ptrs)
            other = interpreter.TensorHandle(np.full(as_array(ptrs).shape, np.nan, dtype=dtype),
                                             ptrs.get_element_ty())
        return load(self, ptrs, mask, other, *rest, **options)

    def recorded(self, ptrs, value, mask, *rest, **options):
        active = np.broadcast_to(as_array(mask).astype(bool), as_array(ptrs).shape)
        seen["stored"].append(as_array(ptrs).astype(np.uint64)[active])
        return store(self, ptrs, value, mask, *rest, **options)

    with mock.patch.object(interpreter.InterpreterBuilder, "create_masked_load", undefined), \
            mock.patch.object(interpreter.InterpreterBuilder, "create_masked_store", recorded):
        yield seen


# --------------------------------------------------------------------------------------------
# One fused kernel: one Triton launch, no PyTorch op that computes or copies
# --------------------------------------------------------------------------------------------


# ATen ops that allocate, or look at or reshape metadata, without a kernel of their own on a GPU
# (``x.contiguous()`` of a contiguous x reaches no op at all; of a view, it is a ``clone``)
_NO_KERNEL_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view",
    "_unsafe_view", "_reshape_alias", "as_strided", "detach", "alias", "lift_fresh", "t",
    "transpose", "permute", "expand", "slice", "select", "narrow", "unsqueeze", "squeeze",
    "split", "split_with_sizes", "unbind", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "is_contiguous"})


class _TorchOps(TorchDispatchMode):
    """The ATen ops run inside the block, except those inside a Triton launch (the
    interpreter moves the arguments with ATen ops of its own)."""

    def __init__(self):
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()
        self.launching = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.launching:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def expect_one_fused_kernel(fn, args, what: str) -> str:
    """Mismatch unless ``fn(*args)`` runs exactly one Triton launch and no PyTorch op that
    computes or copies (allocating the output, views and metadata are fine): "one fused kernel"
    checked the same way on a CPU (the interpreter) and a GPU. ``args`` must be contiguous,
    where ``.contiguous()`` costs nothing; the launched kernel's name is returned."""
    launched: collections.Counter[str] = collections.Counter()
    torch_ops = _TorchOps()

    def counting(original):
        def run(self, *a, **k):
            if k.get("warmup"):
                return original(self, *a, **k)
            launched[getattr(getattr(self, "fn", self), "__name__", "?")] += 1
            torch_ops.launching += 1
            try:
                return original(self, *a, **k)
            finally:
                torch_ops.launching -= 1

        return run

    with contextlib.ExitStack() as stack:
        for cls in triton_launchers():
            stack.enter_context(mock.patch.object(cls, "run", counting(cls.__dict__["run"])))
        stack.enter_context(torch_ops)
        call_answer(fn, *args)
    shapes = ", ".join(f"{tuple(a.shape)}" for a in args)
    computing = sorted(op for op in torch_ops.ops if op not in _NO_KERNEL_OPS)
    expect(not computing, f"{what}: on contiguous input(s) {shapes} the call also ran the PyTorch "
           f"op(s) {', '.join(computing)} besides Triton: on a GPU each is a kernel of its "
           "own, with its own round trip to DRAM", "do all the work in your one kernel: "
           "allocate the output with torch.empty (the kernel writes every element), pass the "
           "input's pointer, and compute and index inside the kernel (no .chunk(...)"
           ".contiguous() copies, no arithmetic on tensors outside it)")
    total = sum(launched.values())
    expect(total == 1, f"{what}: one call launched {total} Triton kernel(s) "
           f"({', '.join(f'{k} x{v}' for k, v in launched.items()) or 'none'}); the exercise "
           "asks for one fused kernel", "one launch of one kernel that reads the input once "
           "and writes the output once")
    return next(iter(launched))
