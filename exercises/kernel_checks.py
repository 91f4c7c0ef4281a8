"""Checking a CUDA kernel a student wrote, on every machine, and saying which checks ran.

An answer is either a whole kernel in a string (03.transpose, 03.warp_sum: described by a
:class:`Spec` and checked by :func:`check_spec`), or code spliced into a given kernel
``exercises/cuda/<name>.cu`` at its ``// ==== your code`` line (05.smem, 05.swizzle_cuda,
07.parity: their lessons compose the steps below). The steps:

1. **compile** with NVRTC (any machine, no GPU): a compile error shows the compiler's first
   errors (:func:`compile_answer`); ``constexpr`` functions of the answer are evaluated by the
   compiler too (:func:`constant_table`);
2. **read the SASS** (:mod:`exercises.sass_checks`): the census holds what the statement asks
   for, no local memory, and a barrier between the stores into shared memory and the loads from
   it, both ways inside a loop;
3. **without a GPU**: "cannot check here", listing what was verified, what needs a GPU, and the
   reference solution's recorded GPU result (:func:`cpu_verdict`; the record is written by
   ``python -m exercises.gpu_check_kernels --record`` on a GPU);
4. **on a GPU**: the kernel runs in a child process (a faulting kernel poisons the CUDA context
   of its process; the notebook must survive it) on awkward shapes, its input inside a poisoned
   buffer (NaN around it: a read outside it that is used shows in the output) and its output
   fenced on both sides (:func:`poisoned`, :func:`fenced`; :func:`run_child`), then its small
   case, every tensor an exact allocation, under compute-sanitizer's memcheck and racecheck
   (:func:`sanitize`: a read outside that is never used shows there), then the property the
   lesson teaches from Nsight Compute's counters (coalescing, bank conflicts, 16-byte accesses:
   :func:`access_counters`, :func:`expect_access`), then it is timed.

``python -m exercises.kernel_checks <exercise id> <source file> [--small]`` is the child: it
runs the exercise's child function (:data:`CHILDREN`) and prints its verdict.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import env
from exercises import CannotCheck, Mismatch, Report, compare, expect, needs, sass_checks

CUDA_DIR = env.ROOT / "exercises" / "cuda"
# the GPU results of the reference solutions, written by exercises/gpu_check_kernels.py
RECORDED = env.RESULTS_DIR / "exercises-gpu.json"
# the child that runs each exercise's kernel on a GPU: "module:function(source, small) ->
# verdict" (a dict: {"ok": True, ...}, {"mismatch", "hint"}; progress lines {"case": ...})
CHILDREN = {
    "03.silu": "exercises.lesson03:silu_child",
    "03.oob": "exercises.lesson03:scale_child",
    "03.transpose": "exercises.lesson03:transpose_child",
    "03.warp_sum": "exercises.lesson03:warp_sum_child",
    "05.smem": "exercises.lesson05_kernels:smem_child",
    "05.swizzle_cuda": "exercises.lesson05_kernels:swizzle_child",
    "07.parity": "exercises.lesson07_kernels:parity_child",
    "07.promote": "exercises.lesson07_kernels:promote_child",
}
GUARD = 1024  # elements of NaN past the end of an output: a write there is a bug
POISON = float("nan")  # around an input: a read outside it whose value is used turns NaN
FENCE = -1.0e30  # around an output: no kernel of these exercises writes it (NaN may be written)
# the profiling call of each exercise whose property Nsight Compute measures: "module:function
# (source) -> a callable launching the answer's kernel on the profiled cases"
PROFILES = {
    "03.silu": "exercises.lesson03:silu_profile",
    "03.transpose": "exercises.lesson03:transpose_profile",
    "03.warp_sum": "exercises.lesson03:warp_sum_profile",
}
SPLICED = ("the line numbers count from the first line of the kernel file the cell above shows, "
           "with your code in place of the '==== your code' line")
WHOLE = "the line numbers count from the first line of your source string"


# --------------------------------------------------------------------------------------------
# Compiling (any machine)
# --------------------------------------------------------------------------------------------


def numbered(name: str) -> str:
    """The given kernel ``exercises/cuda/<name>`` with line numbers, as compiler messages count
    them (your code replaces its "==== your code" line)."""
    lines = (CUDA_DIR / name).read_text().splitlines()
    return "\n".join(f"{i:3d}  {line}" for i, line in enumerate(lines, 1))


def expect_source(source, name: str, kernel: str | None = None) -> None:
    """Mismatch unless the answer is CUDA source text (not a PyTorch function, not a number);
    with ``kernel``, a whole kernel: it must declare a ``__global__`` function."""
    expect(isinstance(source, str),
           f"{name} is a {type(source).__name__}; expected CUDA source code as a string "
           "(the exercise asks for a kernel, not for PyTorch that computes the same values)",
           f'keep the stub\'s {name} = r""" ... """ and write CUDA between the quotes')
    if kernel:
        expect("__global__" in source, f"{name} holds no __global__ function: it is not a "
               "CUDA kernel", f'declare it: extern "C" __global__ void {kernel}(...)')


def splice(path: Path, code: str) -> str:
    """The text of the given kernel ``path`` with its ``// ==== your code`` line replaced by the
    student's ``code`` (so compiler messages count lines from the kernel's first line)."""
    lines = Path(path).read_text().splitlines()
    at = [i for i, line in enumerate(lines) if "// ==== your code" in line]
    if len(at) != 1:
        raise ValueError(f"{path.name} expected one '// ==== your code' line, found {len(at)}")
    lines[at[0]] = code.strip("\n")
    return "\n".join(lines) + "\n"


def compile_answer(source: str, name: str, label: str, *, hint: str = SPLICED, **kwargs):
    """NVRTC compile (no GPU needed); a compile error is a Mismatch showing NVRTC's first
    errors, ``hint`` saying where its line numbers count from. ``kwargs`` go to
    :func:`course_utils.nvrtc.compile` (default: sm_90, a CUBIN)."""
    from course_utils import nvrtc

    needs("nvrtc")
    kwargs.setdefault("arch", "sm_90")
    try:
        return nvrtc.compile(source, name, verbose=False, **kwargs)
    except nvrtc.CompileError as err:
        errors = [ln for ln in str(err).splitlines() if "error" in ln][:3]
        raise Mismatch(f"{label} does not compile:\n" + "\n".join(errors or [str(err)]),
                       hint) from None
    except ValueError as err:  # the kernel's name is not in the source
        raise Mismatch(f"{label}: {err}", f"the kernel must be called {name}") from None


def constant_table(program: str, expressions: list[str], **kwargs) -> list[int]:
    """The values of int constant expressions of ``program`` (constexpr functions of the
    student's code), evaluated by NVRTC at compile time: read from the initialiser of a
    ``__device__`` array in the PTX, so no GPU is needed. ``kwargs`` as for
    :func:`compile_answer` (defines, arch, options)."""
    table = ("extern \"C\" __device__ const int COURSE_PROBE[] = {"
             + ", ".join(f"int({e})" for e in expressions) + "};\n"
             "extern \"C\" __global__ void course_probe(int* out) "
             "{ out[threadIdx.x] = COURSE_PROBE[threadIdx.x]; }\n")
    try:
        ptx = compile_answer(program + "\n" + table, "course_probe", "your code", output="ptx",
                             **kwargs).ptx
    except Mismatch as failed:
        raise _not_constant(program, expressions, kwargs) or failed from None
    return _probe_ints(ptx)


def _not_constant(program: str, expressions: list[str], kwargs: dict,
                  declare: str = "constexpr int {name} = int({expr});") -> Mismatch | None:
    """Where the probe of :func:`constant_table` fails because an expression is not a constant
    (a constexpr function that reads past the end of an array, calls a non-constexpr intrinsic,
    divides by zero, ...): a Mismatch naming the first such expression and NVRTC's notes on why.
    None when the failure is something else (the program itself does not compile)."""
    from course_utils import nvrtc

    checks = "".join(declare.format(name=f"course_constant_{i}", expr=e) + "\n"
                     for i, e in enumerate(expressions))
    options = {k: v for k, v in kwargs.items() if k in ("defines", "arch", "options")}
    options.setdefault("arch", "sm_90")
    try:
        nvrtc.compile(program + "\n" + checks, None, output="ptx", verbose=False, **options)
    except nvrtc.CompileError as err:
        lines = str(err).splitlines()
        for i, line in enumerate(lines):
            if "expression must have a constant value" in line:
                notes = []
                for j, note in enumerate(lines[i + 1:], i + 1):
                    if "error" in note:
                        break
                    if "note #" in note and "called from" not in note:
                        said = re.sub(r"^.*?note #\d+-D:\s*", "", note).strip()
                        code = lines[j + 1].strip() if j + 1 < len(lines) else ""
                        notes.append(f"{said} (at `{code}`)" if code else said)
                return Mismatch(
                    "your code cannot be evaluated at compile time (the check evaluates your "
                    "constexpr functions with NVRTC): " + ("; ".join(notes) or line.strip()),
                    "an index past the end of an array is not a constant expression, nor is a "
                    "call to a function that is not constexpr (an intrinsic, a 16-bit "
                    "conversion): index inside the arrays and keep to plain arithmetic")
    return None


# --------------------------------------------------------------------------------------------
# Without a GPU: what was verified, and the reference solution's recorded GPU result
# --------------------------------------------------------------------------------------------


def recorded_lines(id: str) -> list[str]:
    """What the reference solution's check printed on a GPU, as recorded by
    ``python -m exercises.gpu_check_kernels --record`` (one line saying so where none is)."""
    data = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    found = data.get("exercises", {}).get(id)
    if not found:
        where = RECORDED.relative_to(env.ROOT) if RECORDED.is_relative_to(env.ROOT) else RECORDED
        return ["no GPU run of the reference solution is recorded yet "
                f"(python -m exercises.gpu_check_kernels --record on a GPU writes {where})"]
    stamp = found.get("environment") or data.get("environment", {})
    head = (f"the reference solution on {stamp.get('device', 'a GPU')} (recorded "
            f"{stamp.get('date', '?')}, git {stamp.get('git', '?')}): {found['status']}")
    return [head, *(f"  {line}" for line in found["lines"])]


def cpu_verdict(id: str, report: Report, verified: list[str], needs_gpu: str,
                recorded_last: bool = False) -> CannotCheck:
    """The end of a check on a machine without a (suitable) GPU: what it verified and the
    reference solution's recorded GPU result (as ``report`` lines), and what it could not
    verify (the CannotCheck to raise). ``recorded_last``: the recorded result after what was
    not verified (in the CannotCheck's message), so the verdict's first lines say both what
    was verified and what was not."""
    for line in verified:
        report.line(f"verified here: {line}")
    if recorded_last:
        return CannotCheck(f"not verified here: {needs_gpu}"
                           + "".join(f"\n   {line}" for line in recorded_lines(id)))
    for line in recorded_lines(id):
        report.line(line)
    return CannotCheck(f"not verified here: {needs_gpu}")


# --------------------------------------------------------------------------------------------
# On a GPU: the student's kernel in a child process, then under compute-sanitizer
# --------------------------------------------------------------------------------------------


def guarded(n: int, device: str, guard: int = GUARD) -> tuple[torch.Tensor, torch.Tensor]:
    """(an output of n float32, the NaN guard right after it): the kernel may write the output
    and nothing else; any guard element no longer NaN is a write past the end."""
    buffer = torch.full((n + guard,), float("nan"), device=device)
    return buffer[:n], buffer[n:]


def poisoned(x: torch.Tensor, pad: int = GUARD, offset: int = 0) -> torch.Tensor:
    """A copy of ``x`` (contiguous, same shape) inside a buffer of NaN, ``pad + offset``
    elements before it and ``pad`` after: a kernel that reads outside ``x`` and uses the value
    gets NaN. With ``pad`` a multiple of 4 and ``offset`` 0 it keeps a fresh tensor's 16-byte
    alignment; ``offset`` 1-3 puts it 4-12 bytes off."""
    buffer = torch.full((x.numel() + 2 * pad + offset,), POISON, device=x.device, dtype=x.dtype)
    inner = buffer[pad + offset:pad + offset + x.numel()].view(x.shape)
    inner.copy_(x)
    return inner


def fenced(n: int, device: str, pad: int = GUARD, offset: int = 0):
    """(an output of n float32 filled with :data:`FENCE`, a function that says where the kernel
    wrote outside it, or None): ``pad`` fence elements on each side (``offset`` more before
    it, for a misaligned output). A write before the start is caught as well as one past the
    end, whatever value it writes (NaN included)."""
    buffer = torch.full((n + 2 * pad + offset,), FENCE, device=device)
    start = pad + offset
    out = buffer[start:start + n]

    def outside() -> str | None:
        after = torch.nonzero(buffer[start + n:] != FENCE)
        if len(after):
            return f"past the end of y (element {n + int(after[0])}, y has {n})"
        before = torch.nonzero(buffer[:start] != FENCE)
        if len(before):
            return f"before the start of y (element {int(before[-1]) - start})"
        return None

    return out, outside


def child_source_file(id: str, source: str) -> Path:
    """The file the GPU child reads the answer from, named by its text: two checks running
    at once (two notebooks, the mutation harness) never read each other's answer."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = env.var_dir("exercises") / f"{id.replace('.', '_')}_student_{digest}.cu"
    path.write_text(source)
    return path


def _said(out: str) -> list[dict]:
    return [json.loads(ln) for ln in (out or "").splitlines() if ln.startswith("{")]


def run_child(id: str, source: str, timeout: int = 300) -> dict:
    """Run the student's kernel ``source`` (the whole program) on the GPU in a child process;
    its verdict as a dict ({"ok"}, {"mismatch", "hint"} or {"crash", "case"})."""
    path = child_source_file(id, source)
    try:
        done = subprocess.run([sys.executable, "-m", __name__, id, str(path)],
                              capture_output=True, text=True, timeout=timeout, cwd=env.ROOT,
                              env=env.child_environment())
    except subprocess.TimeoutExpired as err:  # a wait that never completes hangs the kernel
        said = _said(err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout)
        return {"crash": f"no answer after {timeout} s (a hang: a wait that never completes?)",
                "case": said[-1].get("case", "loading the kernel") if said else
                "loading the kernel"}
    said = _said(done.stdout)
    if said and "case" not in said[-1]:
        return said[-1]
    # it died: name the case it was running (its last progress line) and the error
    tail = [ln for ln in (done.stderr or "").splitlines() if ln.strip()][-1:]
    return {"crash": tail[0] if tail else f"exit status {done.returncode}",
            "case": said[-1]["case"] if said else "loading the kernel"}


def expect_child_ok(result: dict, hint: str, crash_hint: str = "") -> None:
    """Mismatch unless the child's verdict is ok: the case it crashed on, or its mismatch."""
    if "crash" in result:
        raise Mismatch(f"your kernel crashed the GPU on the case {result['case']!r}: "
                       f"{result['crash']}", crash_hint or hint)
    if "mismatch" in result:
        raise Mismatch(result["mismatch"], result.get("hint") or hint)


def sanitize(id: str, source: str, tools=("memcheck", "racecheck")) -> list[str]:
    """The child (its small cases) under compute-sanitizer's ``tools``, side by side: a Mismatch
    naming the first errors, else one line per tool. Without compute-sanitizer, a line saying
    so."""
    from course_utils import sanitizer

    if sanitizer.path() is None:
        return [f"compute-sanitizer not found (it ships with the CUDA toolkit): "
                f"{' and '.join(tools)} skipped"]
    path = child_source_file(id, source)
    lines = []
    for tool, run in zip(tools, sanitizer.run_all(tools, __name__, id, str(path), "--small",
                                                  timeout=600), strict=True):
        if not run.clean:
            first = [ln for ln in run.output.splitlines()
                     if ln.startswith("=========") and ln.strip("= ")][:4]
            raise Mismatch(f"compute-sanitizer --tool {tool}: {run.summary_line}\n"
                           + "\n".join(first),
                           {"memcheck": "an access outside a tensor: check every index "
                                        "against the sizes before it is used",
                            "racecheck": "two threads touch one shared-memory word with no "
                                         "__syncthreads between"}.get(tool, ""))
        lines.append(f"compute-sanitizer --tool {tool}: {run.summary_line.strip('= ')}")
    return lines


# --------------------------------------------------------------------------------------------
# A whole kernel in a string, described by a Spec (lesson 03)
# --------------------------------------------------------------------------------------------


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
        measured = (f", {spec.measures} (Nsight Compute's counters)" if spec.access else "")
        raise cpu_verdict(spec.id, report, [verified], "running it on awkward shapes "
                          f"({_shapes(spec.shapes[:4])}, ...) against the reference, with its "
                          "input poisoned and its output fenced, compute-sanitizer "
                          f"({', '.join(spec.sanitize)}){measured} and the speed: they need a "
                          "GPU", recorded_last=True)
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
    from course_utils import nvrtc

    kernel = nvrtc.kernel(source, spec.kernel, verbose=False)
    return run_cases(spec, kernel, shapes=spec.shapes[-1:] if small else None, exact=small)


# --------------------------------------------------------------------------------------------
# On a GPU: the property the lesson teaches, from Nsight Compute's counters
# --------------------------------------------------------------------------------------------

# per launch: global sectors and requests (coalescing), shared-memory wavefronts per
# instruction (bank conflicts: 1 wavefront for a conflict-free 4-byte access, 32 for 32-way)
ACCESS_METRICS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
)
# thread-level global loads and stores actually made (the kernel instrumented by ncu): asked
# for with the others, and left out on a second try where this ncu does not know them
THREAD_METRICS = (
    "smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_global_st_pred_on.sum",
)


def profile_setup(id: str, path: str):
    """Runs under ncu (:func:`course_utils.ncu.profile`'s child): the call that launches the
    answer in file ``path`` on exercise ``id``'s profiled cases (:data:`PROFILES`)."""
    module, function = PROFILES[id].split(":")
    return getattr(importlib.import_module(module), function)(Path(path).read_text())


def spec_profile(spec: Spec, source: str):
    """The profiling call of a whole-kernel answer: one launch per ``spec.profile_shapes``."""
    from course_utils import nvrtc

    kernel = nvrtc.kernel(source, spec.kernel, verbose=False)
    tensors = []
    for shape in spec.profile_shapes:
        x = spec.make(shape, "cuda")
        tensors.append((x, torch.empty(spec.out_shape(x), device="cuda")))

    def call():
        for x, y in tensors:
            spec.launch(kernel, x, y)

    return call


def access_counters(id: str, source: str, kernel: str, timeout: float = 600) -> list[dict] | str:
    """Nsight Compute's counters (:data:`ACCESS_METRICS`, :data:`THREAD_METRICS` where this ncu
    has them) of each launch of ``kernel`` in exercise ``id``'s profiling call, in launch order;
    or a string saying why they could not be read (no ncu, no permission for the counters)."""
    from course_utils import ncu

    if reason := ncu.unavailable_reason():
        return reason
    path = child_source_file(id, source)
    error = ""
    for metrics in (ACCESS_METRICS + THREAD_METRICS, ACCESS_METRICS):
        try:
            found = ncu.profile(f"{__name__}:profile_setup", id, str(path), sections=(),
                                metrics=metrics, label=id, timeout=timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            error = next((ln for ln in lines if "ERR_NVGPUCTRPERM" in ln or "==ERROR==" in ln),
                         lines[-1] if lines else "ncu failed")
            continue
        return [k.metrics for k in found.kernels if kernel in k.name]
    return f"Nsight Compute could not profile it: {error[:300]}"


def per_use(launch: dict, op: str, nbytes: int) -> float | None:
    """Global ``op`` ("ld" or "st") sectors the launch moved per 32-byte sector of data it had
    to move (``nbytes``): 1 when every byte fetched is used (coalesced), up to 8 when each
    4-byte access of a warp costs a sector of its own (strided). None where not measured."""
    sectors = launch.get(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum")
    if not isinstance(sectors, float) or not sectors or nbytes <= 0:
        return None  # none counted for a launch that must move bytes: not measured, not ideal
    return sectors / (nbytes / 32)


def wavefronts(launch: dict, op: str) -> float | None:
    """Shared-memory wavefronts per ``op`` ("ld" or "st") instruction of the launch: 1 without
    bank conflicts (4-byte accesses), k for a k-way conflict. None where not measured."""
    waves = launch.get(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum")
    count = launch.get(f"smsp__sass_inst_executed_op_shared_{op}.sum")
    if not isinstance(waves, float) or not isinstance(count, float) or not count:
        return None
    return waves / count


UNMEASURED = "not verified on this GPU: "  # how a line about a measurement not made starts


def unmeasured(report: Report, what: str, why: str) -> None:
    """``what`` could not be measured on this GPU: a report line saying so (the check may still
    pass on the values), and under COURSE_STRICT=1 CannotCheck (a GPU run must not pass by
    skipping a measurement)."""
    line = f"{UNMEASURED}{what} ({why})"
    if env.STRICT:
        raise CannotCheck(line + "; COURSE_STRICT=1 needs it measured")
    report.line(line)


def expect_access(id: str, source: str, kernel: str, report: Report, what: str,
                  verdict: Callable[[list[dict]], list[str]]) -> None:
    """Profile exercise ``id``'s answer under Nsight Compute and let ``verdict`` (launches ->
    report lines, a Mismatch where the property fails, a line starting with
    :data:`UNMEASURED` for a counter this ncu did not give) judge it; where ncu cannot measure
    here, :func:`unmeasured`."""
    found = access_counters(id, source, kernel)
    if isinstance(found, str):
        unmeasured(report, what, found)
        return
    if not found:
        unmeasured(report, what, f"Nsight Compute profiled no launch of {kernel}")
        return
    for line in verdict(found):
        if line.startswith(UNMEASURED):
            unmeasured(report, line[len(UNMEASURED):], "a counter missing")
        else:
            report.line(line)


def main(argv: list[str]) -> int:
    """The child: run exercise ``argv[0]``'s kernel from file ``argv[1]``; print progress lines
    ``{"case": ...}`` and a verdict. Exit status 1 on a wrong answer (for the sanitizer)."""
    from course_utils import sanitizer

    if sanitizer.active():
        # every tensor its own allocation of its exact size, so memcheck sees a write past the
        # end (read by the CUDA allocator at its first allocation, still to come)
        import os

        os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    id, path, small = argv[0], argv[1], "--small" in argv
    module, function = CHILDREN[id].split(":")
    verdict = getattr(importlib.import_module(module), function)(Path(path).read_text(), small)
    print(json.dumps(verdict), flush=True)
    return 0 if verdict.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def constant_ints(program: str, expression: str, **kwargs) -> list[int]:
    """The ints of ``expression``, a constant expression of a struct type holding only int
    arrays (the whole result of a constexpr function of the student's code, evaluated once by
    NVRTC at compile time), read from the initialiser of a ``__device__`` variable in the PTX:
    no GPU needed. ``kwargs`` as for :func:`compile_answer`."""
    probe = ("extern \"C\" __device__ const auto COURSE_PROBE = " + expression + ";\n"
             "extern \"C\" __global__ void course_probe(int* out) "
             "{ out[threadIdx.x] = reinterpret_cast<const int*>(&COURSE_PROBE)[threadIdx.x]; }\n")
    try:
        ptx = compile_answer(program + "\n" + probe, "course_probe", "your code", output="ptx",
                             **kwargs).ptx
    except Mismatch as failed:
        raise _not_constant(program, [expression], kwargs,
                            "constexpr auto {name} = {expr};") or failed from None
    return _probe_ints(ptx)


def _probe_ints(ptx: str) -> list[int]:
    """The int32 values of the initialiser of ``COURSE_PROBE`` in ``ptx``."""
    found = re.search(r"COURSE_PROBE\[(\d+)\](?: = \{([^}]*)\})?", ptx)
    if found is None:
        raise RuntimeError("the probe variable is not in the PTX")
    data = bytes(int(x) for x in (found.group(2) or "").split(",") if x.strip())
    data = data.ljust(int(found.group(1)), b"\0")  # PTX leaves out trailing zero bytes
    return [int.from_bytes(data[i:i + 4], "little", signed=True)
            for i in range(0, len(data), 4)]
