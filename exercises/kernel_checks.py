"""Checking a CUDA kernel a student wrote, on every machine, and saying which checks ran.

An answer is either a whole kernel in a string (cuda_gelu.transpose, cuda_gelu.warp_sum: described
by a :class:`~exercises.spec_checks.Spec` and checked by :mod:`exercises.spec_checks`), or code
spliced into a given kernel ``exercises/cuda/<name>.cu`` at its ``// ==== your code`` line
(mma_matmul.smem, mma_matmul.swizzle_cuda, hopper_matmul.parity: their lessons compose the
steps below). The steps:

1. **compile** with NVRTC (any machine, no GPU): a compile error shows the compiler's first
   errors (:func:`compile_answer`); ``constexpr`` functions of the answer are evaluated by the
   compiler too (:mod:`exercises.compile_probes`);
2. **read the SASS** (:mod:`exercises.sass_checks`): the census holds what the statement asks
   for, no local memory, and a barrier between the stores into shared memory and the loads from
   it, both ways inside a loop;
3. **without a GPU**: the same cases run on this CPU (:mod:`course_utils.cuda_on_cpu`: every
   thread of every block, in three orders, each load and store checked against the tensors'
   bounds and alignment, shared and global memory watched for races, the sectors and bank
   wavefronts of each warp's accesses counted as Nsight Compute counts them;
   :func:`decide_on_cpu`). Only a kernel that uses what a CPU cannot run (inline PTX, tensor
   cores, TMA) gets "cannot check here", listing what was verified, what needs a GPU, and the
   reference solution's recorded GPU result (:func:`cpu_verdict`; the record is written by
   ``python -m course exercises mutants --record`` on a GPU);
4. **on a GPU**: the kernel runs in a child process (a faulting kernel poisons the CUDA context
   of its process; the notebook must survive it) on awkward shapes, its input inside a poisoned
   buffer (NaN around it: a read outside it that is used shows in the output) and its output
   fenced on both sides (:func:`poisoned`, :func:`fenced`; :func:`run_child`), then its small
   case, every tensor an exact allocation, under compute-sanitizer's memcheck and racecheck
   (:func:`sanitize`: a read outside that is never used shows there), then the property the
   lesson teaches from Nsight Compute's counters (coalescing, bank conflicts, 16-byte accesses:
   :mod:`exercises.access_checks`), then it is timed.

``python -m exercises.kernel_checks <exercise id> <source file> [--small]`` is the child: it
runs the exercise's child function (:data:`CHILDREN`) and prints its verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import torch

from course_utils import env, syllabus
from exercises.catalogue import Result
from exercises.expectations import CannotCheck, Mismatch, Report, expect, needs
from exercises.student_code import write_whole

CUDA_DIR = env.ROOT / "exercises" / "cuda"
# the GPU results of the reference solutions, written by `python -m course exercises mutants
# --record` on a GPU (:func:`record`)
RECORDED = env.RESULTS_DIR / "exercises-gpu.json"
# the child that runs each exercise's kernel on a GPU: "module:function(source, small) ->
# verdict" (a dict: {"ok": True, ...}, {"mismatch", "hint"}; progress lines {"case": ...})
CHILDREN = {
    "cuda_gelu.silu": "exercises.cuda_gelu:silu_child",
    "nvrtc.divergence": "exercises.nvrtc:divergence_child",
    "cuda_gelu.oob": "exercises.cuda_gelu:scale_child",
    "cuda_gelu.transpose": "exercises.cuda_gelu_kernels:transpose_child",
    "cuda_gelu.warp_sum": "exercises.cuda_gelu_kernels:warp_sum_child",
    "mma_matmul.smem": "exercises.mma_matmul_kernels:smem_child",
    "mma_matmul.swizzle_cuda": "exercises.mma_matmul_kernels:swizzle_child",
    "mma_matmul.triton_dot": "exercises.mma_matmul_triton:dot_child",
    "hopper_matmul.parity": "exercises.hopper_matmul_kernels:parity_child",
    "hopper_measured.promote": "exercises.hopper_measured_kernels:promote_child",
    "hopper_attention.pingpong": "exercises.hopper_attention_gpu:pingpong_child",
    "hopper_backward.dq_add": "exercises.hopper_backward_dq_add_gpu:dq_add_child",
    "rmsnorm.backward": "exercises.rmsnorm:backward_child",
    "first_kernels.flip_rows": "exercises.first_kernels:flip_child",
    "first_kernels.histogram": "exercises.first_kernels_histogram:histogram_child",
    "patterns.block_scan": "exercises.patterns:block_scan_child",
    "nvrtc.tiled_matmul": "exercises.tiled_matmul:tiled_matmul_child",
    # the Triton puzzles of lesson 03, where the GPU's Triton cannot interpret a copy
    **{f"puzzles.{name}": "exercises.puzzle_child:puzzle_child" for name in (
        "add", "add_blocks", "outer", "outer_blocks", "row_sum", "long_sum", "col_sum",
        "softmax", "long_softmax", "matvec", "dot", "attention")},
    # lesson 13's, the same engine
    "triton_tools.transpose": "exercises.puzzle_child:puzzle_child",
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


# --------------------------------------------------------------------------------------------
# Without a GPU: what was verified, and the reference solution's recorded GPU result
# --------------------------------------------------------------------------------------------


_TIMED = re.compile(r"GB/s|TFLOP/s")


def record(results: dict[str, Result]) -> None:
    """Add the solutions' GPU results to :data:`RECORDED`, each with the environment it ran in
    (the other exercises' records are kept)."""
    data = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    stamp = env.environment()
    entries = {syllabus.topic_key(k): v for k, v in data.get("exercises", {}).items()}
    for id, result in results.items():
        # no timings: the harness runs many checks at once on the GPU, so a speed measured
        # there is not a quiet GPU's (`make bench` records those)
        lines = [ln for ln in result.lines if not _TIMED.search(ln)]
        entries[id] = {"status": result.status, "lines": lines, "environment": stamp}
    data["exercises"] = dict(sorted(entries.items()))
    RECORDED.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote {len(results)} results to {RECORDED.relative_to(env.ROOT)}")


def recorded_lines(id: str) -> list[str]:
    """What the reference solution's check printed on a GPU, as recorded by
    :func:`record` (one line saying so where none is)."""
    data = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    # recorded under the id of its time: an exercise that moved lesson keeps its GPU run
    found = {syllabus.topic_key(k): v for k, v in data.get("exercises", {}).items()}.get(
        syllabus.topic_key(id))
    if not found:
        where = RECORDED.relative_to(env.ROOT) if RECORDED.is_relative_to(env.ROOT) else RECORDED
        return ["no GPU run of the reference solution is recorded yet "
                f"(python -m course exercises mutants --record on a GPU writes {where})"]
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
# Where the kernel runs: the GPU, or this CPU
# --------------------------------------------------------------------------------------------

_ON_CPU: list = []  # the kernels load() made on this CPU, latest last (their launches' counters)
CPU_RAN = ("on this CPU: every thread of every block, run in three orders; each load and store "
           "checked against the tensors' bounds and alignment; shared and global memory watched "
           "for races")
NOT_TIMED = ("not timed here: a CPU running one thread at a time says nothing of a GPU's speed "
             "(a GPU times it against the copy bandwidth)")


def device() -> str:
    """Where the exercises' kernels run: "cuda", or "cpu" (:mod:`course_utils.cuda_on_cpu`)."""
    return "cuda" if env.HAS_CUDA else "cpu"


def load(source: str, name: str, **kwargs):
    """Kernel ``name`` of ``source``, loaded where :func:`device` says (the same call either
    way: ``kernel(*args, grid=..., block=...)``); ``kwargs`` as :func:`course_utils.nvrtc.kernel`'s
    (``defines``)."""
    if env.HAS_CUDA:
        from course_utils import nvrtc

        return nvrtc.kernel(source, name, verbose=False, **kwargs)
    from course_utils import cuda_on_cpu

    kernel = cuda_on_cpu.kernel(source, name, **kwargs)
    _ON_CPU.append(kernel)
    del _ON_CPU[:-16]
    return kernel


def synchronize() -> None:
    if env.HAS_CUDA:
        torch.cuda.synchronize()


def run_here(id: str, source: str) -> dict:
    """Exercise ``id``'s child function (:data:`CHILDREN`) on this CPU, in this process: its
    verdict, with a fault of the kernel as a mismatch naming the case, and {"unsupported": why}
    where the kernel uses what a CPU cannot run. (In this process: the CPU runner stops a kernel
    that faults or never ends, so the notebook is safe; a child would cost seconds.)"""
    from course_utils import cuda_on_cpu

    if reason := cuda_on_cpu.unavailable_reason():
        return {"unsupported": reason}
    module, function = CHILDREN[id].split(":")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return getattr(importlib.import_module(module), function)(source, False)
    except cuda_on_cpu.KernelFault as fault:
        said = _said(out.getvalue())
        case = said[-1].get("case", "") if said else ""
        return {"mismatch": f"{case}: {fault}" if case else str(fault), "fault": fault.kind}
    except (cuda_on_cpu.Unsupported, cuda_on_cpu.CompileError) as err:
        return {"unsupported": f"this CPU cannot run it ({err})"}


def decide_on_cpu(id: str, source: str, report: Report, verified: list[str], needs_gpu: str,
                  hint: str, ran: str) -> None:
    """Without a GPU: exercise ``id``'s cases run on this CPU (:func:`run_here`): a Mismatch
    for a wrong answer (``hint`` unless the fault gives its own), else report lines saying what
    was verified and ``ran`` (what the cases showed). Where this CPU cannot run the kernel,
    :func:`cpu_verdict` ("cannot check here", ``needs_gpu`` naming what was not checked)."""
    result = run_here(id, source)
    if "unsupported" in result:
        raise cpu_verdict(id, report, verified, f"{needs_gpu}; {result['unsupported']}",
                          recorded_last=True)
    for line in verified:
        report.line(line)
    if "mismatch" in result:
        raise Mismatch(result["mismatch"], result.get("hint") or hint)
    report.line(f"{ran} ({CPU_RAN})")


def cpu_launches(kernel: str) -> list[dict]:
    """The counters (Nsight Compute's names) of every launch of ``kernel`` made on this CPU
    since the last call, in order."""
    found = [launch.metrics for k in _ON_CPU if k.name == kernel for launch in k.launches]
    for k in _ON_CPU:
        k.launches.clear()
    return found


# --------------------------------------------------------------------------------------------
# On a GPU: the student's kernel in a child process, then under compute-sanitizer
# --------------------------------------------------------------------------------------------


def child_source_file(id: str, source: str) -> Path:
    """The file the GPU child reads the answer from, named by its text: two checks running
    at once (two notebooks, the mutation harness) never read each other's answer."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = env.var_dir("exercises") / f"{id.replace('.', '_')}_student_{digest}.cu"
    write_whole(path, source)
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


# a Python exception that names no device error (a trap, an illegal access, a dead context)
DEVICE_WORDS = re.compile(r"cuda|launch|illegal|trap|CUresult|context|accelerator", re.I)
PYTHON_EXCEPTION = re.compile(r"^[\w.]*(Error|Exception): ")


def expect_no_course_bug(result: dict, what: str) -> None:
    """CannotCheck when the child died of a Python exception that names no device error: the
    check's own code raised (a reference, a shape), not the student's ``what``. Only for
    exercises whose student code was compiled before the child ran (a compile error is then
    the parent's verdict, never a child's Python exception)."""
    crash = result.get("crash", "")
    if PYTHON_EXCEPTION.match(crash) and not DEVICE_WORDS.search(crash):
        raise CannotCheck(f"the GPU check itself failed on the case {result['case']!r}, "
                          f"outside the kernel ({crash}): the course's bug, not {what}; "
                          "please report it")


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
