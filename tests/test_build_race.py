"""Several processes build and load one extension at once, one of them timing a cold build:
each must build or load it and compute (on a GPU) the right answer.

Seen before the lock (make test-gpu -n 8 on an H100): a cold build deleted var/build/<name> while
other workers built there (``main.o.d: No such file``, then ``cannot open shared object file``).
Building needs no GPU, so this runs wherever nvcc is.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from course_utils import cuda_ext, env
from kernels.add import load_inline

needs_toolchain = pytest.mark.skipif(bool(env.unmet("nvcc", "cxx")),
                                     reason="; ".join(env.unmet("nvcc", "cxx")) or "ok")

# Each racer imports torch first, then waits for the start file, so the builds begin together.
RACER = """
import json, sys, time
from pathlib import Path
import torch
from kernels.add import load_inline
start, fresh = Path(sys.argv[1]), sys.argv[2] == "fresh"
while not start.exists():
    time.sleep(0.01)
built = load_inline.build(fresh=fresh)
report = {"fresh": fresh, "compiled": built.compiled, "directory": str(built.directory),
          "registered": torch._C._dispatch_has_kernel_for_dispatch_key("course_add::add", "CUDA")}
if torch.cuda.is_available():
    a = torch.randn(1001, device="cuda")
    report["exact"] = torch.equal(torch.ops.course_add.add(a, a), a + a)
print(json.dumps(report))
"""


def _python_env(**extra: str) -> dict:
    path = os.pathsep.join(p for p in (str(env.ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.mark.slow
@needs_toolchain
def test_racing_builds_of_one_extension_all_load(tmp_path):
    start, log = tmp_path / "start", tmp_path / "builds.jsonl"
    modes = ["fresh", "shared", "shared", "shared"]
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(start), mode], cwd=env.ROOT,
                               env=_python_env(**{cuda_ext.BUILD_LOG_VARIABLE: str(log)}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for mode in modes]
    time.sleep(3)  # let every racer import torch: the builds then start within milliseconds
    start.touch()
    reports = []
    for racer in racers:
        out, err = racer.communicate(timeout=1800)
        assert racer.returncode == 0, f"a racer failed (exit {racer.returncode}):\n{err[-3000:]}"
        reports.append(json.loads(out.strip().splitlines()[-1]))
    shared_dir = str(cuda_ext.build_dir(load_inline.NAME))
    for report in reports:
        assert report["registered"], report
        assert report.get("exact", True), report
        if report["fresh"]:
            assert report["compiled"] and report["directory"] != shared_dir, report
        else:
            assert report["directory"] == shared_dir, report
    assert sum(r["compiled"] for r in reports if not r["fresh"]) <= 1  # one shared compile
    assert list(cuda_ext.build_dir(load_inline.NAME).glob("*.so")), "the shared library is gone"
    assert not any(os.path.exists(r["directory"]) for r in reports if r["fresh"])
    logged = [json.loads(line) for line in log.read_text().splitlines()]  # one line per build
    assert len(logged) == len(modes) and all(b["name"] == load_inline.NAME for b in logged)


HOLDER = """
import sys, time
from course_utils import cuda_ext
with cuda_ext.locked(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(1.5)
    print(time.time(), flush=True)
"""


def test_the_build_lock_excludes_other_processes():
    name = "course_lock_probe"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, name], cwd=env.ROOT,
                              env=_python_env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with cuda_ext.locked(name) as directory:
        acquired = time.time()
    released = float(holder.stdout.readline())
    holder.wait(timeout=60)
    assert acquired >= released, "the lock was taken while another process held it"
    assert directory == cuda_ext.build_dir(name)


@pytest.mark.parametrize("name", ["", "has space", "../escape", 3])
def test_a_build_name_must_be_an_identifier(name):
    with pytest.raises(ValueError, match="name expected a Python identifier"):
        cuda_ext.build_dir(name)
