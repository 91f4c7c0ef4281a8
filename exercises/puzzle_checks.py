"""The engine of the Triton puzzle ladder (notebook 03, :mod:`exercises.puzzles`).

A puzzle is a kernel only: the student writes the ``@triton.jit`` function and the check
launches it itself, with the grid and the block sizes the statement gives, on a few problems of
awkward sizes. One :class:`Puzzle` describes it (its arguments, grid, reference and cases) and
:func:`check_puzzle` checks any of them the same way:

1. in Triton's interpreter, on small CPU tensors with NaN on both sides of each
   (:func:`exercises.triton_checks.fenced`): every lane's address inside the tensors of the
   launch, every element of the output written, no masked-off lane without ``other=`` reaching
   it (:mod:`exercises.triton_checks`);
2. its values against the PyTorch reference, the output filled with NaN first (an element
   never written shows): interpreted on a CPU, compiled on a GPU. A softmax puzzle's cases
   include rows whose values (or scores) all sit about -200 (:attr:`Puzzle.shift`), where a
   maximum that starts at 0 or takes a padding lane's 0 makes every exp underflow; a mismatch
   names the row and its largest value.

On a GPU whose Triton cannot interpret a copy of a compiled kernel (Triton 3.6 with NumPy 2.4
or newer), step 1 runs the compiled kernel under compute-sanitizer instead
(:mod:`exercises.puzzle_child`). :func:`draw` pictures what the programs of a puzzle load and store.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from course_utils import env
from exercises import Mismatch, compare, expect, triton_checks, triton_launchers
from exercises.triton_checks import (
    call_answer,
    fence_broken,
    fenced,
    fenced_copy,
    interpreted_memory,
)


@dataclass(frozen=True)
class Puzzle:
    id: str
    kernel: str  # the kernel's name
    params: str  # its parameters, as the stub's ``def`` line shows them
    does: str  # its docstring: what it computes, and how it is launched
    inputs: tuple[tuple[str, Callable[[dict], tuple[int, ...]]], ...]  # (name, shape of sizes)
    output: Callable[[dict], tuple[int, ...]]  # the output's shape
    reference: Callable[..., torch.Tensor]  # (inputs by name, in float64) -> the output
    # the launch: (kernel, inputs by name, output, sizes) -> None
    launch: Callable[[Callable, dict, torch.Tensor, dict], None]
    cases: tuple[dict, ...]  # the sizes of each problem (the first is drawn)
    hint: str
    tolerance: float = 1e-5
    # its loads feed a sum, a max or a product: a masked-off lane must hold the value that
    # changes nothing (other=), which the values alone cannot show on a GPU
    reduces: bool = False
    # it calls tl.dot on float32, which a GPU runs in TF32 (10 bits of mantissa): the check's
    # inputs are multiples of 1/8 below 2^7, which TF32 holds exactly, so the compiled result
    # still matches a float64 reference to float32 rounding
    tf32: bool = False
    # (inputs in float64) -> per element, what TF32 rounding of a value the kernel computes
    # (attention's probabilities, before p @ v) can move the output, in units of 2^-10
    tf32_error: Callable[..., torch.Tensor] | None = None
    # a case's "shift" s -> {input: the constant added to it}, so that what the row softmax
    # runs over (``shifted``: "value", "score") sits about s: at s = -200 every row's maximum is
    # negative, and a maximum that starts at 0, is clamped at 0 or takes a padding's 0 is
    # larger than all of them (every exp(x - m) underflows to 0)
    shift: Callable[[float], dict[str, float]] | None = None
    shifted: str = "value"
    # (inputs in float64) -> each output row's maximum of what its softmax runs over: a
    # mismatch then names the row and its maximum
    row_max: Callable[..., torch.Tensor] | None = None

    def stub(self) -> str:
        head = f"def {self.kernel}("
        params = textwrap.fill(self.params, 99 - len(head), break_long_words=False)
        params = textwrap.indent(params, " " * len(head))[len(head):]
        doc = textwrap.fill(self.does, 92, initial_indent='    """',
                            subsequent_indent="    ") + '"""'
        return (f"import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                f"{head}{params}):\n{doc}\n    ...\n")

    def label(self, sizes: dict) -> str:
        return ", ".join(f"every {self.shifted} about {v:g}" if k == "shift" else f"{k} = {v}"
                         for k, v in sizes.items())


def run_case(p: Puzzle, kernel, sizes: dict, make: Callable,
         out: torch.Tensor) -> dict[str, torch.Tensor]:
    """Launch ``kernel`` as the puzzle does on inputs ``make(shape, name)`` and output ``out``; the
    inputs by name (a kernel's exception becomes a Mismatch naming them)."""
    tensors = {name: make(shape(sizes), name) for name, shape in p.inputs}
    call_answer(lambda *_: p.launch(kernel, tensors, out, sizes), *tensors.values())
    return tensors


def _expect_written(p: Puzzle, sizes: dict, out: torch.Tensor, seen: dict) -> None:
    """Every element of ``out`` stored by some lane, and none of them from an undefined lane
    (a masked load without ``other=``: NaN in the interpreter, whatever it holds compiled)."""
    index = np.indices(out.shape).reshape(out.dim(), -1)
    strides = np.array(out.stride()).reshape(-1, 1)
    addresses = (out.data_ptr() + (index * strides).sum(0) * out.element_size()).astype(np.uint64)
    stored = np.concatenate(seen["stored"]) if seen["stored"] else np.zeros(0, np.uint64)
    missing = ~np.isin(addresses, stored)
    if missing.any():
        first = tuple(int(i) for i in index[:, int(np.argmax(missing))])
        raise Mismatch(f"{p.label(sizes)}: output{list(first)} was never written "
                       f"({int(missing.sum())} of {out.numel()} elements were not)", p.hint)
    if seen["undefined"] and out.isnan().any():
        first = tuple(int(i) for i in torch.nonzero(out.isnan())[0])
        raise Mismatch(f"{p.label(sizes)}: output{list(first)} is NaN: a masked tl.load without "
                       "other= gives its masked-off lanes undefined values (NaN here), and they "
                       "reached the output", "give the load the value that changes nothing: "
                       "other=0.0 for a sum or a product, other=-float('inf') for a max")


def fenced_of(shape: tuple[int, ...], name: str = "") -> torch.Tensor:
    """A CPU input of ``shape`` with NaN on both sides (:func:`exercises.triton_checks.fenced`)."""
    return fenced(*shape)


def _bounds(p: Puzzle, kernel) -> str:
    """Step 1: the interpreter, each lane's address checked; the report line."""
    copy = triton_checks.interpreted(kernel)
    for sizes in p.cases:
        out = fenced(*p.output(sizes))
        with interpreted_memory() as seen:
            unchecked = triton_checks.expect_in_bounds(
                lambda sizes=sizes, out=out: run_case(p, copy, sizes, fenced_of, out),
                f"{p.label(sizes)}")
        if unchecked:
            return unchecked
        _expect_written(p, sizes, out, seen)
    return ("every load and store inside the tensors, every output element written (each "
            "lane's address checked in Triton's interpreter)")


def _sixteen_bit(kernel) -> bool:
    source = triton_checks.kernel_source(kernel)
    return "tl.float16" in source or "tl.bfloat16" in source


def check_puzzle(p: Puzzle, kernel, report) -> None:
    expect(isinstance(kernel, tuple(triton_launchers())),
           f"{p.kernel} is a {type(kernel).__name__}, not a @triton.jit kernel",
           "decorate the function with @triton.jit and use tl.load / tl.store")
    if p.reduces and (lines := triton_checks.masked_loads_without_other(kernel)):
        raise Mismatch(f"line {lines[0]} of {p.kernel} (from @triton.jit): a masked tl.load "
                       "without other=: its masked-off lanes hold undefined values, and this "
                       "kernel adds (or compares) them (compiled Triton often gives 0 there, by "
                       "luck; the interpreter gives NaN)", "give the load the value that "
                       "changes nothing: other=0.0 for a sum or a product, "
                       "other=-float('inf') for a max")
    bounds = _bounds(p, kernel)
    if bounds.startswith("not verified") and env.HAS_CUDA:
        bounds = _sanitized(p, kernel)
    expect(not _sixteen_bit(kernel), f"{p.kernel} uses a 16-bit type: every tensor here is "
           "float32, and a 16-bit accumulator loses the low bits of a long sum (compiled, "
           "Triton also refuses a loop whose variable changes type)",
           "accumulate in float32: tl.zeros(..., dtype=tl.float32)")
    device = env.DEFAULT_DEVICE
    for sizes in p.cases:
        # NaN where nothing was written, and NaN fences around every tensor: compiled, a read
        # past a tensor gives NaN and a store past the output breaks its fence
        out = fenced_copy(torch.full(p.output(sizes), float("nan"), device=device))
        with np.errstate(all="ignore"):  # (the interpreter's NumPy on a wrong answer's inf)
            tensors = run_case(p, kernel, sizes,
                           lambda s, name, sizes=sizes: fenced_copy(_draw(p, s, sizes, name)),
                           out)
        expect(not fence_broken(out), f"{p.label(sizes)}: a store landed just outside the "
               "output (its neighbouring memory changed)", p.hint)
        exact = {k: v.double() for k, v in tensors.items()}
        expected = p.reference(**exact).float()
        atol = p.tolerance
        if p.tf32_error and not env.TRITON_INTERPRET:  # TF32 inside the kernel: its bound
            atol = p.tolerance + 2.0 ** -9 * p.tf32_error(**exact).float()
        what, hint = p.label(sizes), p.hint
        if p.row_max is not None and (row := _first_wrong_row(out, expected, atol,
                                                              p.tolerance)) is not None:
            peak = float(p.row_max(**exact)[row])
            what = f"{what}: row {row}, whose largest {p.shifted} is {peak:.5g}"
            if peak < 0:
                hint = f"{NEGATIVE_MAX}; {hint}"
        compare(out, expected, what=what, atol=atol, rtol=p.tolerance, hint=hint)
    how = "in Triton's interpreter" if env.TRITON_INTERPRET else "compiled, on the GPU"
    report.line(f"matches the reference {how} on " + "; ".join(p.label(s) for s in p.cases))
    if p.tf32:
        report.line("inputs are multiples of 1/8, which TF32 (what tl.dot uses for float32 on "
                    "a GPU) holds exactly; on other data expect TF32's ~1e-3 relative error"
                    + ("; what the kernel computes and rounds to TF32 (attention's p) may move "
                       "each output by 2^-9 of its bound" if p.tf32_error else ""))
    report.line(bounds)


NEGATIVE_MAX = ("every value this row's softmax runs over is negative here, so its maximum "
                "is too: a maximum that starts at 0, is clamped at 0 or takes a padding lane's "
                "0 is larger than all of them, every exp(x - m) underflows to 0 and 0 / 0 is "
                "NaN; start the maximum at -inf and make every padding lane -inf before taking "
                "it")


def _first_wrong_row(out: torch.Tensor, expected: torch.Tensor, atol, rtol: float) -> int | None:
    """The first row of ``out`` that :func:`exercises.compare` would reject (None: none)."""
    g, e = out.detach().float().cpu(), expected.detach().float().cpu()
    if g.shape != e.shape or g.dim() != 2:
        return None
    if isinstance(atol, torch.Tensor):
        close = ((g - e).abs() <= atol.float().cpu() + rtol * e.abs()) | (g == e)
        bad = ~(close | (g.isnan() & e.isnan()))
    else:
        bad = ~torch.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
    rows = bad.any(1).nonzero()
    return int(rows[0]) if len(rows) else None


def _draw(p: Puzzle, shape: tuple[int, ...], sizes: dict, name: str) -> torch.Tensor:
    """Random inputs of ``shape`` (times the case's ``scale``, plus what its ``shift`` adds to
    this input); for a TF32 puzzle rounded to multiples of 1/8 (see :attr:`Puzzle.tf32`)."""
    x = sizes.get("scale", 1.0) * torch.randn(*shape, device=env.DEFAULT_DEVICE)
    if "shift" in sizes:
        x += p.shift(sizes["shift"]).get(name, 0.0)
    return (x * 8).round().clamp(-1023, 1023) / 8 if p.tf32 else x


# --------------------------------------------------------------------------------------------
# On a GPU whose Triton cannot interpret a copy: the compiled kernel under compute-sanitizer
# --------------------------------------------------------------------------------------------


def _sanitized(p: Puzzle, kernel) -> str:
    from exercises import triton_child

    return "; ".join(triton_child.sanitized(p.id, kernel, prefix=f"PUZZLE = {p.id!r}\n",
                                            cases="; ".join(map(p.label, p.cases))))


# --------------------------------------------------------------------------------------------
# The picture: what each program loads and stores
# --------------------------------------------------------------------------------------------


def footprint(p: Puzzle, kernel, sizes: dict) -> dict[str, dict]:
    """``{tensor name: {"shape", "loads": {program: element indices}, "stores": {...},
    "outside": {"loads": lanes, "stores": lanes}}}`` of ``kernel`` interpreted on ``sizes``:
    which elements of each tensor each program touched, and how many lanes touched memory
    outside every tensor (counted against the tensor the other lanes of the same load or store
    touched most; with none, the output for a store, the nearest input for a load). Those
    lanes are switched off, not performed (:func:`exercises.triton_checks.bounds_checked`),
    and every tensor sits between NaN fences, so a student's wrong kernel drawn here cannot
    write over the process's memory."""
    from unittest import mock

    from triton.runtime import interpreter

    tensors = {name: fenced_copy(torch.zeros(shape(sizes))) for name, shape in p.inputs}
    tensors["output"] = fenced_copy(torch.zeros(p.output(sizes)))
    touched = {name: {"shape": tuple(t.shape), "loads": {}, "stores": {},
                      "outside": {"loads": 0, "stores": 0}} for name, t in tensors.items()}
    spans = np.array([(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())
                      for t in tensors.values()], dtype=np.int64)

    def record(kind, ptrs, mask):
        program = tuple(int(i) for i in interpreter.interpreter_builder.grid_idx)
        addresses = triton_checks.as_array(ptrs).astype(np.int64)
        addresses = addresses[np.broadcast_to(triton_checks.as_array(mask).astype(bool),
                                              addresses.shape)]
        hit, hits = np.zeros(addresses.shape, dtype=bool), []
        for name, t in tensors.items():
            offset = (addresses - t.data_ptr()) // t.element_size()
            inside = (offset >= 0) & (offset < t.numel())
            hit |= inside
            hits.append(int(inside.sum()))
            if inside.any():
                touched[name][kind].setdefault(program, set()).update(offset[inside].tolist())
        if not hit.all():  # a pointer's lanes ran off its tensor: whose pointer was it?
            stray = addresses[~hit]
            # (no lane inside any: a puzzle stores only the output; a load, the nearest input)
            distance = np.maximum(spans[:-1, 0] - stray[0], stray[0] - spans[:-1, 1])
            owner = (int(np.argmax(hits)) if max(hits) else len(hits) - 1 if kind == "stores"
                     else int(np.argmin(distance)))
            touched[list(tensors)[owner]]["outside"][kind] += stray.size

    copy = triton_checks.interpreted(kernel)
    with triton_checks.bounds_checked():  # (outermost: the recorders below see every lane)
        load = interpreter.InterpreterBuilder.create_masked_load
        store = interpreter.InterpreterBuilder.create_masked_store

        def loading(self, ptrs, mask, other, *rest, **options):
            record("loads", ptrs, mask)
            return load(self, ptrs, mask, other, *rest, **options)

        def storing(self, ptrs, value, mask, *rest, **options):
            record("stores", ptrs, mask)
            return store(self, ptrs, value, mask, *rest, **options)

        with mock.patch.object(interpreter.InterpreterBuilder, "create_masked_load", loading), \
                mock.patch.object(interpreter.InterpreterBuilder, "create_masked_store",
                                  storing), np.errstate(all="ignore"):
            p.launch(copy, {k: v for k, v in tensors.items() if k != "output"},
                     tensors["output"], sizes)
    return touched
