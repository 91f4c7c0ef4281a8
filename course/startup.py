"""What a fresh Python pays before a notebook's first line of its own runs.

Every notebook starts a new kernel, and its first cell imports torch and the course. On the
H100 box that cell took 14-18 s in every notebook (4.5 s on the 2-core CPU machine), a quarter
of lecture mode's time, and nothing said where it went. :func:`measure` times each stage of that
first cell in a child process, as a new kernel pays it; ``make run`` prints the table before it
runs the notebooks (``python -m course startup`` prints it alone). It lives in ``course/``, above
both layers, because the first cell imports ``kernels``.

    python -m course startup   # python itself, import torch, CUDA context, import triton,
                               # import kernels, device info, environment line: seconds each
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from course_utils import env

# (what the stage is, the code the child runs for it), in the order a first cell runs them
STAGES = (
    ("import torch", "import torch"),
    ("CUDA context (first allocation)",
     "if torch.cuda.is_available():\n    torch.zeros(1, device='cuda')\n"
     "    torch.cuda.synchronize()"),
    ("import triton", "import triton"),
    ("import kernels (every registration)", "import kernels"),
    ("import the helpers (plots, profiling, ...)",
     "from course_utils import cuda_ext, nvrtc, plots, profiling, sass, timing"),
    ("device info (properties, nvidia-smi)",
     "from course_utils import env\nenv.device_info()"),
    ("environment line (git, versions)", "env.environment_line()"),
)

_CHILD = """
import json, sys, time
stages, times = json.loads(sys.argv[1]), []
for name, code in stages:
    start = time.perf_counter()
    try:
        exec(code, globals())
        times.append([name, time.perf_counter() - start, ""])
    except Exception as err:  # a stage that fails here says so; the others still run
        times.append([name, time.perf_counter() - start, f"{type(err).__name__}: {err}"])
print(json.dumps(times))
"""


def measure(stages=STAGES, timeout: float = 300) -> list[dict]:
    """One row per stage: its seconds in a fresh child Python, and its error if it failed.
    The first row, "python itself", is the child's wall time not spent in any stage
    (interpreter start-up and exit)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(stages)],
                          capture_output=True, text=True, timeout=timeout, cwd=env.ROOT,
                          env=env.child_environment())
    wall = time.perf_counter() - start
    if done.returncode != 0 or not done.stdout.strip():
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"the start-up child failed (exit {done.returncode}): {tail}")
    times = json.loads(done.stdout.strip().splitlines()[-1])
    rows = [{"stage": name, "seconds": round(seconds, 2), "error": error}
            for name, seconds, error in times]
    itself = max(wall - sum(seconds for _, seconds, _ in times), 0.0)
    return [{"stage": "python itself", "seconds": round(itself, 2), "error": ""}, *rows]


def table(rows: list[dict]) -> str:
    from course_utils.plots import stamped_table

    total = sum(r["seconds"] for r in rows)
    if not any(r["error"] for r in rows):  # the error column only when a stage failed
        rows = [{"stage": r["stage"], "seconds": r["seconds"]} for r in rows]
    return stamped_table(rows, title=f"a fresh Python before a notebook's first line: "
                                      f"{total:.1f} s")


def main(argv: list[str] | None = None) -> int:
    try:
        print(table(measure()))
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        print(f"startup: could not time a fresh Python: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
