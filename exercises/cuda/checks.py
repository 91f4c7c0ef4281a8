"""Checking a CUDA kernel a student wrote, on every machine, and saying which checks ran.

Any machine with NVRTC (torch's CUDA wheels) compiles the answer for sm_90 and reads its SASS:
the census shows whether it holds what the statement asks for (``SHFL`` for warp shuffles,
``LDS``/``STS`` for a shared-memory tile, ``BAR`` for ``__syncthreads``, ``LDG`` for reading its
input at all) and whether registers spilled to local memory (``LDL``/``STL``). That is all a CPU
can verify: it then says what needs a GPU and shows the reference solution's recorded GPU result
(``docs/results/``, written by ``make bench``). On a GPU the kernel runs in a child process (a
faulting kernel poisons the CUDA context of its process; the notebook must survive it) on
awkward shapes, with a guard zone past the output that catches writes beyond the end, then under
compute-sanitizer, then against the copy bandwidth.

An exercise describes itself with a :class:`Spec` (its lesson module holds ``SPECS[id]``);
``python -m exercises.cuda.checks <run|sanitize> <module> <id> <file.cu>`` is the child.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import env
from exercises import CannotCheck, Mismatch, Report, compare, expect, needs

GUARD = 1024  # elements past the end of the output, filled with NaN: a write there is a bug


@dataclass(frozen=True)
class Need:
    """What the SASS must hold: one of ``opcodes`` at least, else ``message`` and ``hint``."""

    opcodes: tuple[str, ...]
    message: str
    hint: str


@dataclass(frozen=True)
class Spec:
    id: str
    kernel: str  # the kernel's name in the student's source
    answer: str  # the name the stub defines (the source string)
    sass: tuple[Need, ...]  # what the census must show, checked in order
    make: Callable[[tuple[int, ...], str], torch.Tensor]  # (shape, device) -> input
    out_shape: Callable[[torch.Tensor], tuple[int, ...]]  # x -> the shape of y (float32)
    launch: Callable  # launch(kernel, x, y): the launch the statement describes
    reference: Callable[[torch.Tensor], torch.Tensor]
    shapes: tuple[tuple[int, ...], ...]  # the awkward shapes a GPU tries
    bench_shape: tuple[int, ...]
    nbytes: Callable[[torch.Tensor], int]  # bytes a call must move (for GB/s)
    peer: str  # what the reference is, for the record
    sanitize: tuple[str, ...] = ("memcheck",)  # compute-sanitizer tools run on a GPU
    tolerance: tuple[float, float] = (0.0, 0.0)
    hint: str = ""  # for a wrong value


def guarded(n: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(y of n float32, the NaN guard right after it): the kernel may write y and nothing else."""
    buffer = torch.full((n + GUARD,), float("nan"), device=device)
    return buffer[:n], buffer[n:]


def compile_answer(spec: Spec, source) -> object:
    """The answer compiled to an sm_90 CUBIN, or a Mismatch saying why not."""
    from course_utils import nvrtc

    expect(isinstance(source, str), f"{spec.answer} is a {type(source).__name__}; the exercise "
           "asks for a CUDA kernel, given as its source in a string",
           f'write the kernel in C++: {spec.answer} = r"""extern "C" __global__ void '
           f'{spec.kernel}(...) {{ ... }}"""')
    expect("__global__" in source, f"{spec.answer} holds no __global__ function: it is not a "
           "CUDA kernel", f'declare it: extern "C" __global__ void {spec.kernel}(...)')
    needs("nvrtc")
    try:
        return nvrtc.compile(source, spec.kernel, arch="sm_90", verbose=False)
    except nvrtc.CompileError as err:
        errors = [ln for ln in str(err).splitlines() if "error" in ln][:3]
        raise Mismatch(f"{spec.answer} does not compile:\n" + "\n".join(errors or [str(err)]),
                       "the line numbers count from the first line of your source string"
                       ) from None
    except ValueError as err:  # the kernel name is not in the source
        raise Mismatch(f"{spec.answer}: {err}", f"the kernel must be called {spec.kernel}"
                       ) from err


def census_check(spec: Spec, compiled, report: Report) -> None:
    """The SASS holds what the statement asks for and spills nothing; report what it holds."""
    from course_utils import sass

    needs("disasm")
    found = sass.report(compiled)
    for need in spec.sass:
        expect(found.count(*need.opcodes) > 0, need.message, need.hint)
    spilled = found.resources.spill_store_bytes + found.resources.spill_load_bytes
    expect(spilled == 0, f"registers spill to local memory: {spilled} bytes of LDL/STL per "
           "thread", "keep per-thread arrays small and indexed by constants")
    shown = sorted({op for need in spec.sass for op in need.opcodes if found.census[op]})
    report.line("compiles for sm_90 (NVRTC); its SASS holds "
                + ", ".join(f"{found.census[op]} {op}" for op in shown)
                + f", {found.resources.registers} registers a thread, no spills")


def recorded(id: str) -> str:
    """The reference solution's recorded GPU result (``make bench``) as one line."""
    paths = [env.RESULTS_DIR / f"{env.device_slug()}.json",
             *sorted(env.RESULTS_DIR.glob("*.json"))]
    for path in paths:
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        for rec in data.get("records", []):
            if rec["what"].startswith(f"exercise {id} reference solution"):
                stamp = data.get("environments", {}).get(rec["lesson"], data["environment"])
                return (f"recorded on {stamp.get('device')} (torch {stamp.get('torch')}, "
                        f"{stamp.get('date')}, git {stamp.get('git')}): the reference solution "
                        f"passed there and ran at {rec['value']:,.0f} {rec['unit']} = "
                        f"{rec['value'] / rec['ceiling']:.0%} of copy bandwidth, "
                        f"{rec['value'] / rec['peer']:.2f}x {rec['peer_what'].split(',')[0]}")
    return ("no recorded GPU run of the reference solution yet (`make bench` on a GPU writes "
            "one to docs/results/)")


def check(spec: Spec, source, report: Report) -> None:
    """Everything this machine can check; CannotCheck naming what needs a GPU otherwise."""
    compiled = compile_answer(spec, source)
    census_check(spec, compiled, report)
    if not env.HAS_CUDA:
        report.line(recorded(spec.id))
        raise CannotCheck("what needs a GPU: running it on awkward shapes "
                          f"({', '.join('x'.join(map(str, s)) for s in spec.shapes[:4])}, ...) "
                          "against the reference, a guard zone past the output, "
                          f"compute-sanitizer ({', '.join(spec.sanitize)}) and the speed")
    path = env.var_dir("exercises") / f"{spec.id.replace('.', '_')}_student.cu"
    path.write_text(source)
    result = _child("run", spec, path)
    if "crash" in result:
        raise Mismatch(f"your kernel crashed the GPU on the case {result['case']!r}: "
                       f"{result['crash']}", "an index past the end of x or y: check every "
                       "thread's bounds before it loads or stores")
    if "mismatch" in result:
        raise Mismatch(result["mismatch"], result.get("hint") or spec.hint)
    report.line(f"matches the reference on {', '.join('x'.join(map(str, s)) for s in spec.shapes)}"
                " (in a child process; nothing written past the output)")
    _sanitize(spec, path, report)
    from course_utils import nvrtc
    from exercises import bandwidth_verdict

    kernel = nvrtc.kernel(source, spec.kernel, verbose=False)
    x = spec.make(spec.bench_shape, "cuda")
    y = torch.empty(spec.out_shape(x), device="cuda")
    bandwidth_verdict(report, lambda: spec.launch(kernel, x, y), (), spec.nbytes(x))


def _sanitize(spec: Spec, path: Path, report: Report) -> None:
    from course_utils import sanitizer

    if sanitizer.path() is None:
        report.line("compute-sanitizer not found (it ships with the CUDA toolkit): not run")
        return
    for run in sanitizer.run_all(spec.sanitize, __name__, "sanitize", _module(spec), spec.id,
                                 str(path), timeout=600):
        expect(run.clean, f"compute-sanitizer found errors: {run.summary_line()}",
               "racecheck: a thread reads shared memory another wrote without a __syncthreads "
               "between; memcheck: an access outside x or y (check the bounds of every load)")
        report.line(f"compute-sanitizer: {run.summary_line()}")


def _module(spec: Spec) -> str:
    return f"exercises.lesson{spec.id.split('.')[0]}"


def _child(mode: str, spec: Spec, path: Path, timeout: int = 300) -> dict:
    done = subprocess.run([sys.executable, "-m", __name__, mode, _module(spec), spec.id,
                           str(path)], capture_output=True, text=True, timeout=timeout,
                          cwd=env.ROOT, env=env.child_environment())
    said = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    if said and "case" not in said[-1]:
        return said[-1]
    tail = [ln for ln in (done.stderr or "").splitlines() if ln.strip()][-1:]
    return {"crash": tail[0] if tail else f"exit status {done.returncode}",
            "case": said[-1]["case"] if said else "loading the kernel"}


def run_cases(spec: Spec, kernel, shapes=None, device: str = "cuda") -> dict:
    """In the child: every shape against the reference, the guard untouched (``kernel``: the
    loaded answer, or any callable taking the same arguments)."""
    for shape in shapes or spec.shapes:
        label = "x".join(map(str, shape))
        print(json.dumps({"case": label}), flush=True)  # the parent names it if we crash
        x = spec.make(shape, device)
        out = spec.out_shape(x)
        y, guard = guarded(math.prod(out), device)
        y = y.view(out)
        spec.launch(kernel, x, y)
        if device == "cuda":
            torch.cuda.synchronize()
        if not guard.isnan().all():
            first = int(torch.nonzero(~guard.isnan())[0])
            return {"mismatch": f"{label}: your kernel wrote past the end of y (element "
                                f"{y.numel() + first}, y has {y.numel()})",
                    "hint": "a thread whose row or column is out of range must not store"}
        try:
            atol, rtol = spec.tolerance
            compare(y.cpu(), spec.reference(x).cpu(), what=label, atol=atol, rtol=rtol)
        except Mismatch as wrong:
            return {"mismatch": wrong.message}
    return {"ok": True}


def solution_records(spec: Spec, source: str, lesson: str) -> list:
    """On a GPU: the reference solution timed on ``spec.bench_shape`` with its ceiling and peer
    of the same run, as ``make bench`` records (what a CPU student's check then shows)."""
    from course_utils import nvrtc, results, timing

    if not env.HAS_CUDA:
        return []
    kernel = nvrtc.kernel(source, spec.kernel, verbose=False)
    x = spec.make(spec.bench_shape, "cuda")
    y = torch.empty(spec.out_shape(x), device="cuda")
    nbytes = spec.nbytes(x)
    ms = timing.benchmark(lambda: spec.launch(kernel, x, y), name=spec.id, device="cuda").median
    peer = timing.benchmark(spec.reference, x, name=spec.peer).median
    copy = timing.copy_bandwidth(nbytes // 2, device="cuda")
    shape = "x".join(map(str, spec.bench_shape))
    return [results.Record(lesson=lesson, what=f"exercise {spec.id} reference solution float32 "
                           f"{shape}", value=round(timing.gbps(nbytes, ms), 1), unit="GB/s",
                           ceiling=round(copy, 1), ceiling_what="device copy bandwidth, same run",
                           peer=round(timing.gbps(nbytes, peer), 1),
                           peer_what=f"{spec.peer}, same run")]


def _main(mode: str, module: str, id: str, path: str) -> dict:
    from course_utils import nvrtc

    spec = importlib.import_module(module).SPECS[id]
    print(json.dumps({"case": "loading the kernel"}), flush=True)
    kernel = nvrtc.kernel(Path(path).read_text(), spec.kernel, verbose=False)
    if mode == "sanitize":  # one small case; exits non-zero on a wrong answer
        result = run_cases(spec, kernel, shapes=spec.shapes[-1:])
        if "ok" not in result:
            sys.exit(1)
        return result
    return run_cases(spec, kernel)


if __name__ == "__main__":
    if sys.argv[1] == "sanitize":
        # every tensor its own cudaMalloc of its exact size: memcheck sees x[n] as past x
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    print(json.dumps(_main(*sys.argv[1:5])))
