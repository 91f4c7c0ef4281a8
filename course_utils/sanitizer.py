"""``compute-sanitizer`` on a course workload: every memory access checked (``memcheck``), or
every shared-memory access checked for races (``racecheck``).

Each op that has CUDA kernels keeps a small workload module (``kernels/gelu/sanitize_check.py``,
``kernels/matmul/sanitize_mma.py``) that runs its kernels on awkward inputs and exits non-zero
on a wrong answer; :func:`run` runs it under the sanitizer in a child process, so a kernel that
faults cannot take the caller down with it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from course_utils import env


def path() -> str | None:
    """The compute-sanitizer executable (PATH, else beside nvcc), or None."""
    found = shutil.which("compute-sanitizer")
    if found is None and env.nvcc_path():
        candidate = env.nvcc_path().rsplit("/", 1)[0] + "/compute-sanitizer"
        found = candidate if shutil.which(candidate) else None
    return found


def run(tool: str, module: str) -> tuple[str, str, int]:
    """``compute-sanitizer --tool <tool> python -m <module>``: (the command as shown, its
    ERROR SUMMARY line, the exit status)."""
    if tool not in ("memcheck", "racecheck", "synccheck", "initcheck"):
        raise ValueError(f"tool expected memcheck, racecheck, synccheck or initcheck, "
                         f"got {tool!r}")
    sanitizer = path()
    if sanitizer is None:
        raise RuntimeError("compute-sanitizer not found (it ships with the CUDA toolkit)")
    command = [sanitizer, "--tool", tool, "--error-exitcode", "1", sys.executable, "-m", module]
    done = subprocess.run(command, capture_output=True, text=True, cwd=env.ROOT)
    output = done.stdout + done.stderr
    summary = next((line.strip() for line in output.splitlines() if "ERROR SUMMARY" in line),
                   output.strip().splitlines()[-1] if output.strip() else "(no output)")
    shown = " ".join(c if "/" not in c else c.rsplit("/", 1)[-1] for c in command)
    return shown, summary, done.returncode
