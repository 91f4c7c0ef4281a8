"""``compute-sanitizer`` on a course workload: every memory access checked (``memcheck``),
shared-memory races (``racecheck``), reads of uninitialised device memory (``initcheck``), and
barrier misuse (``synccheck``).

A workload is a Python module that launches kernels and exits non-zero on a wrong answer
(``kernels/sanitize.py`` runs every registered CUDA kernel; ``kernels/gelu/sanitize_check.py``
and ``kernels/matmul/sanitize_mma.py`` are lessons' own). :func:`run_module` runs it under the
sanitizer in a child process, so a kernel that faults cannot take the caller down with it,
and :func:`summary` reads the counts from the sanitizer's last lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from course_utils import env

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# Set in the workload's environment: a kernel under the sanitizer runs one to three orders of
# magnitude slower (racecheck checks every shared-memory access), so a kernel that guards its
# waits with a time limit (lesson 16's mbarrier waits trap after ~2 s) widens the limit.
VARIABLE = "COURSE_UNDER_SANITIZER"
# "ERROR SUMMARY: 2 errors" (memcheck, initcheck, synccheck) and
# "RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)" (racecheck)
_SUMMARY = re.compile(r"^=+ (?:ERROR|RACECHECK) SUMMARY: .*$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (error|warning)s?\b")


def path() -> str | None:
    """The compute-sanitizer executable (PATH, else beside nvcc), or None."""
    found = shutil.which("compute-sanitizer")
    if found is None and env.nvcc_path():
        candidate = env.nvcc_path().rsplit("/", 1)[0] + "/compute-sanitizer"
        found = candidate if shutil.which(candidate) else None
    return found


@dataclass
class Run:
    command: str  # as shown to a reader (executables without their folders)
    output: str  # stdout and stderr of the sanitizer and the workload
    returncode: int

    @property
    def summary_line(self) -> str:
        found = _SUMMARY.findall(self.output)
        if found:
            return found[-1].strip()
        lines = self.output.strip().splitlines()
        return lines[-1] if lines else "(no output)"

    def counts(self) -> tuple[int, int] | None:
        """(errors, warnings) from the summary line; None when the sanitizer printed none (it
        did not get that far: a crash, a timeout)."""
        found = _SUMMARY.findall(self.output)
        if not found:
            return None
        counts = {kind: int(n) for n, kind in _COUNT.findall(found[-1])}
        return counts.get("error", 0), counts.get("warning", 0)

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and self.counts() == (0, 0)


def run_module(tool: str, module: str, *args: str, timeout: float = 1800) -> Run:
    """``compute-sanitizer --tool <tool> python -m <module> <args>`` in a child process."""
    if tool not in TOOLS:
        raise ValueError(f"tool expected one of {', '.join(TOOLS)}, got {tool!r}")
    sanitizer = path()
    if sanitizer is None:
        raise RuntimeError("compute-sanitizer not found (it ships with the CUDA toolkit)")
    command = [sanitizer, "--tool", tool, "--error-exitcode", "1", sys.executable, "-m", module,
               *args]
    shown = " ".join(c if "/" not in c else c.rsplit("/", 1)[-1] for c in command)
    environment = env.child_environment(**{VARIABLE: tool})
    # make test-gpu turns on the allocator's expandable segments (course_utils/shared_gpu.py);
    # memcheck counts one error against the virtual-memory mapping behind them, in every run,
    # whatever the kernels do, so the workload gets the allocator's default instead
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=env.ROOT,
                              env=environment, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        return Run(shown, out + f"\n(timed out after {timeout:.0f} s)", 124)
    return Run(shown, done.stdout + done.stderr, done.returncode)


def run_all(tools, module: str, *args: str, timeout: float = 1800) -> list[Run]:
    """:func:`run_module` under several tools at once, each in its own child, in ``tools``'
    order. Most of a run is starting Python, torch and the sanitizer, not checking kernels, so
    two tools side by side take about as long as one."""
    from concurrent.futures import ThreadPoolExecutor

    tools = list(tools)
    with ThreadPoolExecutor(max_workers=max(len(tools), 1)) as pool:
        return list(pool.map(lambda tool: run_module(tool, module, *args, timeout=timeout),
                             tools))


def active() -> bool:
    """True in a workload that :func:`run_module` started under the sanitizer."""
    return bool(os.environ.get(VARIABLE))
