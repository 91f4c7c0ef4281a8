"""Several processes build and load one extension at once, one of them timing a cold build:
each must build or load it and compute (on a GPU) the right answer.

Seen before the lock (make test-gpu -n 8 on an H100): a cold build deleted var/build/<name> while
other workers built there (``main.o.d: No such file``, then ``cannot open shared object file``).
Building needs no GPU, so this runs wherever nvcc is.

What races is the build path, :func:`course_utils.cuda_ext.build` (the lock, the shared
directory, a cold build's private one), the same for any sources: the racers build a probe
without PyTorch's headers (``no_implicit_headers``), through nvcc, the host compiler and the
link like every extension, in seconds rather than the half minute PyTorch's headers take. It
has a name of its own in each run, so its shared directory starts empty and the racers really
compile there, not just load what an earlier test or notebook built.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from course_utils import cuda_ext, env, requirements

needs_toolchain = pytest.mark.skipif(bool(requirements.unmet("nvcc", "cxx")),
                                     reason="; ".join(requirements.unmet("nvcc", "cxx")) or "ok")

PROBE_CPP = 'extern "C" int course_race_answer() { return 42; }\n'
PROBE_CU = r"""
#include <cuda_runtime.h>

__global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

extern "C" int course_race_twice(const float* x, float* y, int n) {
    twice<<<(n + 255) / 256, 256>>>(x, y, n);
    return static_cast<int>(cudaGetLastError());
}
"""

# Each racer imports torch and says so, then waits for the start file: the builds begin together.
RACER = f"""
import ctypes, json, sys, time
from pathlib import Path
import torch
from course_utils import cuda_ext
name, start, fresh = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "fresh"
print("ready", flush=True)
while not start.exists():
    time.sleep(0.01)
built = cuda_ext.build(name, cpp_sources={PROBE_CPP!r}, cuda_sources={PROBE_CU!r},
                       is_python_module=False, no_implicit_headers=True, fresh=fresh)
# the library the build loaded (dlopen finds it by its path, also once a cold build's private
# directory is gone)
lib = ctypes.CDLL(str(built.directory / (name + ".so")))
report = {{"fresh": fresh, "compiled": built.compiled, "cold": built.cold,
          "directory": str(built.directory), "answer": lib.course_race_answer()}}
if torch.cuda.is_available():
    a = torch.randn(1001, device="cuda")
    out = torch.full_like(a, float("nan"))
    err = lib.course_race_twice(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                                a.numel())
    torch.cuda.synchronize()
    report["exact"] = err == 0 and torch.equal(out, a + a)
print(json.dumps(report))
"""


@pytest.mark.slow
@needs_toolchain
def test_racing_builds_of_one_extension_all_load(tmp_path):
    name = f"course_race_probe_{os.getpid()}"  # never built before: the shared build is cold
    shared_dir = cuda_ext.build_dir(name)
    start, log = tmp_path / "start", tmp_path / "builds.jsonl"
    modes = ["fresh", "shared", "shared"]
    environ = env.child_environment(**{cuda_ext.BUILD_LOG_VARIABLE: str(log)})
    racers = [subprocess.Popen([sys.executable, "-c", RACER, name, str(start), mode],
                               cwd=env.ROOT, env=environ, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for mode in modes]
    try:
        for racer in racers:  # every racer has imported torch: the builds start within ms
            assert racer.stdout.readline().strip() == "ready", racer.communicate()[1][-3000:]
        start.touch()
        reports = []
        for racer in racers:
            out, err = racer.communicate(timeout=600)
            assert racer.returncode == 0, \
                f"a racer failed (exit {racer.returncode}):\n{err[-3000:]}"
            reports.append(json.loads(out.strip().splitlines()[-1]))
        for report in reports:
            assert report["answer"] == 42, report
            assert report.get("exact", True), report
            if report["fresh"]:
                assert report["compiled"] and report["cold"], report
                assert report["directory"] != str(shared_dir), report
            else:
                assert report["directory"] == str(shared_dir), report
        shared = [r for r in reports if not r["fresh"]]
        # one shared compile, from the empty directory; every other racer only loads it
        assert [r["compiled"] for r in shared].count(True) == 1, shared
        assert all(r["cold"] == r["compiled"] for r in shared), shared
        assert list(shared_dir.glob("*.so")), "the shared library is gone"
        assert not any(os.path.exists(r["directory"]) for r in reports if r["fresh"])
        logged = [json.loads(line) for line in log.read_text().splitlines()]  # one per build
        assert len(logged) == len(modes) and all(b["name"] == name for b in logged)
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
        shutil.rmtree(shared_dir, ignore_errors=True)
        shared_dir.with_name(f"{name}.lock").unlink(missing_ok=True)


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
                              env=env.child_environment(), stdout=subprocess.PIPE, text=True)
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
