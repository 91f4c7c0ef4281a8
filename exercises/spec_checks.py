"""A whole CUDA kernel in a string, described by a :class:`Spec` (cuda_gelu.transpose,
cuda_gelu.warp_sum): compiled and its SASS read on any machine, then run on awkward shapes (its
input poisoned, its output fenced) and measured for the property the lesson teaches: on a GPU in
a child process, under compute-sanitizer, by Nsight Compute, and timed; without one on this CPU
(:mod:`course_utils.cuda_on_cpu`, which checks every access as it runs and counts the same
sectors and wavefronts). The steps are those of
:mod:`exercises.kernel_checks` and :mod:`exercises.access_checks`, in that order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_utils import env
from exercises import Mismatch, Report, compare, sass_checks
from exercises.access_checks import expect_access
from exercises.kernel_checks import (
    NOT_TIMED,
    WHOLE,
    compile_answer,
    decide_on_cpu,
    device,
    expect_child_ok,
    expect_source,
    load,
    run_child,
    sanitize,
)
from exercises.sentinels import FENCE, fenced, poisoned


@dataclass(frozen=True)
class Spec:
    id: str
    kernel: str  # the kernel's name in the student's source
    answer: str  # the name the stub defines (the source string)
    sass: tuple[sass_checks.Need, ...]  # what the census must show, checked in order
    make: Callable[[tuple[int, ...], str], torch.Tensor]  # (shape, device) -> input
    out_shape: Callable[[torch.Tensor], tuple[int, ...]]  # x -> the shape of y (float32)
    launch: Callable  # launch(kernel, x, y): the launch the statement describes
    reference: Callable[[torch.Tensor], torch.Tensor]
    shapes: tuple[tuple[int, ...], ...]  # the awkward shapes a GPU tries
    bench_shape: tuple[int, ...]
    nbytes: Callable[[torch.Tensor], int]  # bytes a call must move (for GB/s)
    sanitize: tuple[str, ...] = ("memcheck",)  # compute-sanitizer tools run on a GPU
    tolerance: tuple[float, float] = (0.0, 0.0)  # (atol, rtol)
    hint: str = ""  # for a wrong value
    barriers: bool = False  # a tile in shared memory: a barrier between its stores and loads
    # the property the lesson teaches, measured on a GPU by Nsight Compute: the shapes profiled
    # (by PROFILES[id], usually :func:`spec_profile`), what it measures in words, and
    # access(launches) -> report lines (a Mismatch when the property does not hold)
    profile_shapes: tuple[tuple[int, ...], ...] = ()
    measures: str = ""
    access: Callable | None = None


def _shapes(shapes) -> str:
    return ", ".join("x".join(map(str, s)) for s in shapes)


def check_spec(spec: Spec, source, report: Report) -> None:
    """Everything this machine can check of a whole-kernel answer; on a CPU, CannotCheck naming
    what needs a GPU."""
    expect_source(source, spec.answer, kernel=spec.kernel)
    found = sass_checks.sass_report(compile_answer(source, spec.kernel, spec.answer, hint=WHOLE))
    held = sass_checks.expect_opcodes(found, spec.sass)
    if race := spec.barriers and sass_checks.shared_memory_races(found.sass):
        raise Mismatch(race, "__syncthreads() between filling the tile and reading it")
    sass_checks.expect_no_spills(found, "your kernel")
    verified = (f"compiles for sm_90 (NVRTC); its SASS holds {held}, "
                f"{found.resources.registers} registers a thread, no local memory")
    if not env.HAS_CUDA:
        measured = f", {spec.measures} (Nsight Compute's counters)" if spec.access else ""
        decide_on_cpu(spec.id, source, report, [verified], "running it on awkward shapes "
                      f"({_shapes(spec.shapes[:4])}, ...) against the reference, "
                      f"compute-sanitizer ({', '.join(spec.sanitize)}){measured} and the "
                      "speed need a GPU", spec.hint,
                      f"matches the reference on {_shapes(spec.shapes)} (x inside NaN, nothing "
                      "written outside y)")
        if spec.access:
            expect_access(spec.id, source, spec.kernel, report, spec.measures, spec.access)
        report.line(NOT_TIMED)
        return
    report.line(verified)
    expect_child_ok(run_child(spec.id, source), spec.hint, "an index past the end of x or y: "
                    "check every thread's bounds before it loads or stores")
    report.line(f"matches the reference on {_shapes(spec.shapes)} (in a child process; x "
                "inside NaN, nothing written outside y)")
    for line in sanitize(spec.id, source, spec.sanitize):
        report.line(line)
    if spec.access:
        expect_access(spec.id, source, spec.kernel, report, spec.measures, spec.access)
    from course_utils import nvrtc
    from exercises import bandwidth_verdict

    kernel = nvrtc.kernel(source, spec.kernel, verbose=False)  # it ran clean in the child
    x = spec.make(spec.bench_shape, "cuda")
    y = torch.empty(spec.out_shape(x), device="cuda")
    bandwidth_verdict(report, lambda: spec.launch(kernel, x, y), (), spec.nbytes(x))


def run_cases(spec: Spec, kernel, shapes=None, device: str = "cuda",
              exact: bool = False) -> dict:
    """Every shape against the reference (``kernel``: the loaded answer, or any callable taking
    the same arguments, so this runs on a CPU too): x inside NaN (:func:`poisoned`), y fenced
    on both sides (:func:`fenced`), x unchanged after the call. ``exact``: x and y each an
    allocation of its own exact size instead (for compute-sanitizer, which sees an access
    outside an allocation, not outside a view)."""
    for shape in shapes or spec.shapes:
        label = "x".join(map(str, shape))
        print(json.dumps({"case": label}), flush=True)  # the parent names it if we crash
        made = spec.make(shape, device)
        x = made if exact else poisoned(made)
        out = spec.out_shape(x)
        if exact:
            y, outside = torch.full(out, FENCE, device=device), (lambda: None)
        else:
            flat, outside = fenced(math.prod(out), device)
            y = flat.view(out)
        spec.launch(kernel, x, y)
        if device == "cuda":
            torch.cuda.synchronize()
        if where := outside():
            return {"mismatch": f"{label}: your kernel wrote {where}",
                    "hint": "a thread whose row or column is out of range must not store"}
        if not exact and not torch.equal(x, made):
            return {"mismatch": f"{label}: your kernel changed x (its input)",
                    "hint": "store into y only"}
        try:
            atol, rtol = spec.tolerance
            compare(y.cpu(), spec.reference(x).cpu(), what=label, atol=atol, rtol=rtol)
        except Mismatch as wrong:
            return {"mismatch": wrong.message}
    return {"ok": True}


def spec_child(spec: Spec, source: str, small: bool) -> dict:
    """The child of a whole-kernel answer: every shape (``small``: the last one only, each
    tensor an exact allocation, for the sanitizer)."""
    return run_cases(spec, load(source, spec.kernel), device=device(),
                     shapes=spec.shapes[-1:] if small else None, exact=small)


def spec_profile(spec: Spec, source: str):
    """The profiling call of a whole-kernel answer: one launch per ``spec.profile_shapes``."""
    kernel, where = load(source, spec.kernel), device()
    tensors = []
    for shape in spec.profile_shapes:
        x = spec.make(shape, where)
        tensors.append((x, torch.empty(spec.out_shape(x), device=where)))

    def call():
        for x, y in tensors:
            spec.launch(kernel, x, y)

    return call
