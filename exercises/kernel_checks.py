"""What the CUDA exercises of lessons 05 and 07 share: the student's code spliced into a given
kernel (``exercises/cuda/``), compiled by NVRTC (any machine, no GPU), its SASS read for what
the statement asks, run on a GPU in a child process (a crash cannot take the notebook down) and
under compute-sanitizer, and, for a machine without a GPU, the recorded GPU result of the
reference solution.

On a CPU a check verifies what compiles everywhere and then answers "cannot check here" with
exactly what it verified and what needs a GPU: the values a kernel computes are only known by
running it. ``python -m exercises.kernel_checks <exercise id> <source file>`` is the child that
runs a student's kernel on the GPU; ``python -m exercises.gpu_check_kernels`` (on a GPU) runs
every solution and known-wrong answer and records the solutions' results.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

from course_utils import env
from exercises import CannotCheck, Mismatch, expect, needs

CUDA_DIR = env.ROOT / "exercises" / "cuda"
# the GPU results of the reference solutions, written by exercises/gpu_check_kernels.py
RECORDED = env.RESULTS_DIR / "exercises-gpu.json"
# the child that runs each exercise's kernel on a GPU: "module:function(source) -> verdict"
CHILDREN = {
    "05.smem": "exercises.lesson05:smem_child",
    "05.swizzle_cuda": "exercises.lesson05:swizzle_child",
    "07.parity": "exercises.lesson07:parity_child",
}


# --------------------------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------------------------


def numbered(name: str) -> str:
    """The given kernel ``exercises/cuda/<name>`` with line numbers, as compiler messages count
    them (your code replaces its "==== your code" line)."""
    lines = (CUDA_DIR / name).read_text().splitlines()
    return "\n".join(f"{i:3d}  {line}" for i, line in enumerate(lines, 1))


def expect_source(source, name: str) -> None:
    """Mismatch unless the answer is CUDA source text (not a PyTorch function, not a number)."""
    expect(isinstance(source, str),
           f"{name} is a {type(source).__name__}; expected CUDA source code as a string "
           "(the exercise asks for a kernel, not for PyTorch that computes the same values)",
           f'keep the stub\'s {name} = r""" ... """ and write CUDA between the quotes')


def splice(path: Path, code: str) -> str:
    """The text of the given kernel ``path`` with its ``// ==== your code`` line replaced by the
    student's ``code`` (so compiler messages count lines from the kernel's first line)."""
    lines = Path(path).read_text().splitlines()
    at = [i for i, line in enumerate(lines) if "// ==== your code" in line]
    if len(at) != 1:
        raise ValueError(f"{path.name} expected one '// ==== your code' line, found {len(at)}")
    lines[at[0]] = code.strip("\n")
    return "\n".join(lines) + "\n"


def compile_answer(source: str, name: str, label: str, **kwargs):
    """NVRTC compile (no GPU needed); a compile error is a Mismatch showing NVRTC's first
    errors. ``kwargs`` go to :func:`course_utils.nvrtc.compile` (default: sm_90, a CUBIN)."""
    from course_utils import nvrtc

    needs("nvrtc")
    kwargs.setdefault("arch", "sm_90")
    try:
        return nvrtc.compile(source, name, verbose=False, **kwargs)
    except nvrtc.CompileError as err:
        errors = [ln for ln in str(err).splitlines() if "error" in ln][:3]
        raise Mismatch(f"{label} does not compile:\n" + "\n".join(errors or [str(err)]),
                       "line numbers count from the first line of the kernel file the cell "
                       "above shows, with your code in place of the '==== your code' line"
                       ) from None


def sass_report(compiled):
    """The SASS census of a compiled CUBIN; CannotCheck where nothing can disassemble."""
    from course_utils import sass

    if reason := sass.unavailable_reason():
        raise CannotCheck(f"it compiles; reading its SASS needs a disassembler: {reason}")
    return sass.report(compiled)


def expect_no_spills(report, label: str) -> None:
    res = report.resources
    spilled = res.spill_store_bytes + res.spill_load_bytes
    expect(res.stack_bytes == 0 and spilled == 0,
           f"{label}: {res.registers} registers a thread and a {res.stack_bytes}-byte stack "
           f"frame, {spilled} bytes of local-memory traffic (LDL/STL): the kernel spills or "
           "keeps an array in local memory", "index per-thread arrays with constants (unrolled "
           "loops) so they stay in registers")


def constant_table(program: str, expressions: list[str], **kwargs) -> list[int]:
    """The values of int constant expressions of ``program`` (constexpr functions of the
    student's code), evaluated by NVRTC at compile time: read from the initialiser of a
    ``__device__`` array in the PTX, so no GPU is needed. ``kwargs`` as for
    :func:`compile_answer` (defines, arch, options)."""
    table = ("extern \"C\" __device__ const int COURSE_PROBE[] = {"
             + ", ".join(f"int({e})" for e in expressions) + "};\n"
             "extern \"C\" __global__ void course_probe(int* out) "
             "{ out[threadIdx.x] = COURSE_PROBE[threadIdx.x]; }\n")
    ptx = compile_answer(program + "\n" + table, "course_probe", "your code", output="ptx",
                         **kwargs).ptx
    found = re.search(r"COURSE_PROBE\[(\d+)\](?: = \{([^}]*)\})?", ptx)
    if found is None:
        raise RuntimeError("the probe array is not in the PTX")
    data = bytes(int(x) for x in (found.group(2) or "").split(",") if x.strip())
    data = data.ljust(int(found.group(1)), b"\0")  # PTX leaves out trailing zero bytes
    return [int.from_bytes(data[i:i + 4], "little", signed=True)
            for i in range(0, len(data), 4)]


# --------------------------------------------------------------------------------------------
# Reading the SASS: shared-memory stores, barriers and loads in program order
# --------------------------------------------------------------------------------------------

_LINE = re.compile(r"/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?(?P<op>[A-Z][A-Z0-9_]*)"
                   r"(?P<mods>[.\w]*)(?P<rest>[^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):", re.M)
SHARED_STORES = ("STS", "LDGSTS", "STSM")  # LDGSTS: cp.async writes shared memory
SHARED_LOADS = ("LDS", "LDSM")


def _events(sass: str) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """(address, "S" store / "L" load / "B" barrier) in program order, and the loops as
    (first address, address of the branch back)."""
    labels: dict[str, int] = {}
    pending: list[str] = []
    events, branches = [], []
    for line in sass.splitlines():
        if label := _LABEL.match(line):
            pending.append(label.group(1))
            continue
        m = _LINE.search(line)
        if not m:
            continue
        addr, op, mods = int(m.group("addr"), 16), m.group("op"), m.group("mods")
        for name in pending:
            labels[name] = addr
        pending = []
        if op in SHARED_STORES:
            events.append((addr, "S"))
        elif op in SHARED_LOADS:
            events.append((addr, "L"))
        elif op == "BAR" and ".SYNC" in mods:
            events.append((addr, "B"))
        elif op == "BRA":
            target = re.search(r"\(?(\.L_x_\d+)\)?|0x([0-9a-f]+)", m.group("rest"))
            if target:
                branches.append((addr, target.group(1) or int(target.group(2), 16)))
    loops = [(labels.get(t, t) if isinstance(t, str) else t, addr) for addr, t in branches]
    return events, [(start, end) for start, end in loops if isinstance(start, int)
                    and start <= end]


def _unbarriered(sequence: list[str]) -> str | None:
    """"SL" when a load follows a store with no barrier between, "LS" the other way round."""
    stored = loaded = False
    for kind in sequence:
        if kind == "B":
            stored = loaded = False
        elif kind == "L":
            if stored:
                return "SL"
            loaded = True
        else:
            if loaded:
                return "LS"
            stored = True
    return None


def shared_memory_races(sass: str) -> str | None:
    """What is wrong with the barriers around shared memory in ``sass`` (None: nothing seen).

    Between the stores of a tile and the loads of it there must be a block barrier (BAR.SYNC,
    ``__syncthreads``); inside a loop, also between this iteration's loads and the next
    iteration's stores (reading the loop body twice in a row finds those)."""
    events, loops = _events(sass)
    if _unbarriered([kind for _, kind in events]) == "SL":
        return ("a load from shared memory (LDS/LDSM) follows the stores into it (STS) with no "
                "barrier (BAR.SYNC) between: a thread may read an element another thread has "
                "not stored yet")
    for start, end in loops:
        body = [kind for addr, kind in events if start <= addr <= end]
        if _unbarriered(body + body) == "LS":
            return ("inside the K loop, the next iteration's stores into shared memory (STS) "
                    "follow this iteration's loads (LDS) with no barrier (BAR.SYNC) between: a "
                    "fast thread overwrites the tile while slower ones still read it")
    return None


# --------------------------------------------------------------------------------------------
# The recorded GPU result of the reference solution
# --------------------------------------------------------------------------------------------


def recorded_lines(id: str) -> list[str]:
    """What the reference solution's check printed on a GPU, as recorded by
    ``python -m exercises.gpu_check_kernels --record`` (one line saying so where none is)."""
    data = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    found = data.get("exercises", {}).get(id)
    if not found:
        return ["no GPU run of the reference solution is recorded yet "
                f"(python -m exercises.gpu_check_kernels --record on a GPU writes "
                f"{RECORDED.relative_to(env.ROOT)})"]
    stamp = data.get("environment", {})
    head = (f"the reference solution on {stamp.get('device', 'a GPU')} (recorded "
            f"{stamp.get('date', '?')}, git {stamp.get('git', '?')}): {found['status']}")
    return [head, *(f"  {line}" for line in found["lines"])]


def cpu_verdict(id: str, report, verified: list[str], needs_gpu: str) -> CannotCheck:
    """The end of a check on a machine without a (suitable) GPU: what it verified and the
    reference solution's recorded GPU result (as ``report`` lines), and what it could not
    verify (the CannotCheck to raise)."""
    for line in verified:
        report.line(f"verified here: {line}")
    for line in recorded_lines(id):
        report.line(line)
    return CannotCheck(f"not verified here: {needs_gpu}")


# --------------------------------------------------------------------------------------------
# Running the student's kernel on a GPU, in a child process
# --------------------------------------------------------------------------------------------


def _source_file(id: str, source: str) -> Path:
    path = env.var_dir("exercises") / f"{id.replace('.', '_')}_student.cu"
    path.write_text(source)
    return path


def run_child(id: str, source: str, timeout: int = 300) -> dict:
    """Run the student's kernel ``source`` (the spliced kernel file) on the GPU in a child
    process; its verdict as a dict ({"ok"}, {"mismatch", "hint"} or {"crash", "case"})."""
    path = _source_file(id, source)
    try:
        done = subprocess.run([sys.executable, "-m", __name__, id, str(path)],
                              capture_output=True, text=True, timeout=timeout, cwd=env.ROOT,
                              env=env.child_environment())
    except subprocess.TimeoutExpired as err:  # a wait that never completes hangs the kernel
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        said = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        return {"crash": f"no answer after {timeout} s (a hang: a wait that never completes?)",
                "case": said[-1].get("case", "loading the kernel") if said else
                "loading the kernel"}
    said = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    if said and "case" not in said[-1]:
        return said[-1]
    tail = [ln for ln in (done.stderr or "").splitlines() if ln.strip()][-1:]
    return {"crash": tail[0] if tail else f"exit status {done.returncode}",
            "case": said[-1]["case"] if said else "loading the kernel"}


def expect_child_ok(result: dict, hint: str) -> None:
    if "crash" in result:
        raise Mismatch(f"your kernel crashed the GPU on the case {result['case']!r}: "
                       f"{result['crash']}", hint)
    if "mismatch" in result:
        raise Mismatch(result["mismatch"], result.get("hint", hint))


def sanitize(id: str, source: str, tools=("memcheck", "racecheck")) -> list[str]:
    """The child under compute-sanitizer's ``tools`` (side by side): a Mismatch naming the
    first error, else one line per tool. Without compute-sanitizer, a line saying so."""
    from course_utils import sanitizer

    if sanitizer.path() is None:
        return ["compute-sanitizer not found (it ships with the CUDA toolkit): memcheck and "
                "racecheck skipped"]
    path = _source_file(id, source)
    lines = []
    for tool, run in zip(tools, sanitizer.run_all(tools, __name__, id, str(path), "--small"),
                         strict=True):
        if not run.clean:
            first = [ln for ln in run.output.splitlines()
                     if ln.startswith("=========") and ln.strip("= ")][:4]
            raise Mismatch(f"compute-sanitizer --tool {tool}: {run.summary_line}\n"
                           + "\n".join(first),
                           {"memcheck": "an access outside a tensor: check every index "
                                        "against M, N and K before it is used",
                            "racecheck": "two threads touch one shared-memory word with no "
                                         "__syncthreads between"}.get(tool, ""))
        lines.append(f"compute-sanitizer --tool {tool}: {run.summary_line.strip('= ')}")
    return lines


def main(argv: list[str]) -> int:
    """The child: run exercise ``argv[0]``'s kernel from file ``argv[1]``; print progress lines
    ``{"case": ...}`` and a verdict. Exit status 1 on a wrong answer (for the sanitizer)."""
    from course_utils import sanitizer

    if sanitizer.active():
        # every tensor its own allocation of its exact size, so memcheck sees a write past C
        import os

        os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    id, path, small = argv[0], argv[1], "--small" in argv
    module, function = CHILDREN[id].split(":")
    verdict = getattr(importlib.import_module(module), function)(Path(path).read_text(), small)
    print(json.dumps(verdict), flush=True)
    return 0 if verdict.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
