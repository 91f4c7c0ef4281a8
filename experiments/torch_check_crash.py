"""Why does a failing ``TORCH_CHECK`` in a course extension crash Python on the GPU box?

Run on the GPU machine, in the repository (it needs a GPU, nvcc and a C++ compiler)::

    CUDA_HOME=/usr/local/cuda PYTHONPATH=$PWD python3 experiments/torch_check_crash.py --out DIR

It builds the add op (``add_op.cpp`` + ``add_op.cu``) and the GeLU module once per host compiler
variant (the compiler ``CXX``/``CC`` name, the system ``g++``, ``/opt/gcc/bin/g++``, the latter
with ``-static-libgcc -static-libstdc++``), all at once through :mod:`course_utils.cuda_ext`,
each into its own build directory; then calls each library with bad input, one call per fresh
process (so a crash stops nothing else), with and without ``TORCH_SHOW_CPP_STACKTRACES=1``. For
every call it records whether the ``TORCH_CHECK`` raised a Python ``RuntimeError`` or killed the
process (and with which signal). Beside that: which compiler built torch and each library
(``.comment`` sections), the C++ runtime each links (``ldd``), which ``libstdc++``/``libgcc_s``
the process loads (``LD_DEBUG=libs``) and, where gdb exists, the native backtrace of the first
crash. Everything is printed and written to ``DIR/report.json`` and ``DIR/*.log``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from course_utils import env

OPT_GXX = "/opt/gcc/bin/g++"
STATIC = ["-static-libgcc", "-static-libstdc++"]

# one bad call per process: (label, code after the library is loaded); each must raise
ADD_CALLS = {
    "add shape (cuda)": "a = torch.randn(100, device='cuda'); torch.ops.course_add.add(a, a[:10])",
    "add int (cuda)": "a = torch.ones(4, device='cuda', dtype=torch.int32); "
                      "torch.ops.course_add.add(a, a)",
}
GELU_CALLS = {
    "gelu int (cpu)": "m.gelu_vectorized(torch.zeros(8, dtype=torch.int32))",
    "gelu float64 (cuda)": "m.gelu_vectorized(torch.zeros(8, dtype=torch.float64, device='cuda'))",
    "gelu threads=100 (cuda)": "m.gelu_vectorized(torch.zeros(8, device='cuda'), 100, 2, 0)",
}
BUILD = """
import json, sys
from course_utils import cuda_ext
from kernels.add import load_inline as add
from kernels.gelu import extension as gelu
kind, name, ldflags = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if kind == "add":
    b = cuda_ext.build(name, cpp_sources=add.HOST_SOURCE.read_text(),
                       cuda_sources=add.SOURCE.read_text(), is_python_module=False,
                       extra_ldflags=ldflags)
else:
    b = cuda_ext.build(name, cpp_sources=[gelu.CPP_FILE.read_text()],
                       cuda_sources=[gelu.CU_FILE.read_text()], extra_ldflags=ldflags)
print(json.dumps({"library": str(sorted(b.directory.glob("*.so"))[-1]), "seconds": b.seconds}))
"""
CALL = """
import importlib.util, sys, torch
library, kind, code = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "add":
    torch.ops.load_library(library)
else:
    spec = importlib.util.spec_from_file_location(sys.argv[4], library)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
try:
    exec(code)
    print("NO ERROR RAISED")
except RuntimeError as err:
    print("RAISED:", str(err).splitlines()[0])
"""


def run(command: list[str], extra_env: dict | None = None, timeout: int = 900) -> dict:
    environ = env.child_environment(**(extra_env or {}))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=environ, cwd=env.ROOT)
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"rc": None, "stdout": "", "stderr": f"{type(err).__name__}: {err}"}
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def tool(*command: str) -> str:
    if not shutil.which(command[0]):
        return f"({command[0]} not found)"
    out = run(list(command), timeout=120)
    return (out["stdout"] + out["stderr"]).strip()


def compilers() -> dict[str, dict]:
    """The host compiler variants to build with: name -> environment and extra link flags.

    The first is what the course's build path picks by itself (cuda_ext.host_compilers); the
    others force a compiler through COURSE_CXX/COURSE_CC, which that choice obeys."""
    def use(compiler: str) -> dict[str, str]:
        return {"COURSE_CXX": compiler, "COURSE_CC": compiler}

    found = {"course default (cuda_ext.host_compilers)": ({}, [])}
    system = shutil.which("g++", path="/usr/bin")
    if system:
        found["system g++"] = (use(system), [])
    if Path(OPT_GXX).exists():
        found["/opt/gcc g++"] = (use(OPT_GXX), [])
        found["/opt/gcc g++ static libstdc++"] = (use(OPT_GXX), STATIC)
    if system:
        found["system g++ static libstdc++"] = (use(system), STATIC)
    return found


def verdict(out: dict) -> str:
    if out["rc"] is None:
        return "did not finish: " + out["stderr"][-200:]
    if out["rc"] < 0:
        return f"CRASHED (signal {-out['rc']})"
    raised = [ln for ln in out["stdout"].splitlines() if ln.startswith(("RAISED", "NO ERROR"))]
    return raised[0] if raised else f"exit {out['rc']}: {out['stderr'][-300:]}"


def build_all(report: dict) -> list[tuple[str, str, str, str]]:
    """Every (kind, compiler) build at once, through the course's build path (one directory
    each); returns (key, kind, module name, library) of those that built."""
    pending = {}
    for i, (label, (extra_env, ldflags)) in enumerate(compilers().items()):
        for kind in ("add", "gelu"):
            name = f"torch_check_probe_{kind}_{i}"
            command = [sys.executable, "-c", BUILD, kind, name, json.dumps(ldflags)]
            environ = env.child_environment(**extra_env)
            pending[(f"{kind} / {label}", kind, name)] = subprocess.Popen(
                command, env=environ, cwd=env.ROOT, text=True, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
    built = []
    for (key, kind, name), process in pending.items():
        stdout, stderr = process.communicate(timeout=1800)
        if process.returncode != 0:
            report["builds"][key] = {"error": stderr[-3000:]}
            print(f"build {key}: FAILED\n{stderr[-1500:]}", flush=True)
            continue
        library = json.loads(stdout.strip().splitlines()[-1])["library"]
        report["builds"][key] = {"library": library,
                                 "comment": tool("readelf", "-p", ".comment", library),
                                 "needed": tool("readelf", "-d", library),
                                 "ldd": tool("ldd", library)}
        print(f"build {key}: {library}", flush=True)
        built.append((key, kind, name, library))
    return built


def call_all(built: list[tuple[str, str, str, str]]) -> list[tuple[dict, list[str]]]:
    """Each bad call of each library in a fresh process (eight at a time): (row, command)."""
    jobs = []
    for key, kind, name, library in built:
        for call, code in (ADD_CALLS if kind == "add" else GELU_CALLS).items():
            for stack in ("0", "1"):
                command = [sys.executable, "-X", "faulthandler", "-c", CALL, library, kind,
                           code, name]
                jobs.append(({"build": key, "call": call, "TORCH_SHOW_CPP_STACKTRACES": stack},
                             command))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = pool.map(lambda job: run(job[1], {"TORCH_SHOW_CPP_STACKTRACES":
                                                    job[0]["TORCH_SHOW_CPP_STACKTRACES"]}),
                           jobs)
        for (row, _), result in zip(jobs, results, strict=True):
            row.update(verdict=verdict(result), stderr_tail=result["stderr"][-2000:])
    return jobs


def diagnose(row: dict, command: list[str], out_dir: Path) -> dict:
    """For a crashing call: the C++ runtime libraries the process loads, and gdb's backtrace."""
    stack = {"TORCH_SHOW_CPP_STACKTRACES": row["TORCH_SHOW_CPP_STACKTRACES"]}
    libs = run(command, {"LD_DEBUG": "libs", **stack})
    (out_dir / "ld_debug_libs.log").write_text(libs["stderr"])
    found = {**row, "ld_debug": [ln.strip() for ln in libs["stderr"].splitlines()
                                 if "libstdc++" in ln or "libgcc_s" in ln][-60:]}
    if shutil.which("gdb"):
        gdb = run(["gdb", "-batch", "-ex", "run", "-ex", "bt 40", "--args", *command], stack)
        (out_dir / "gdb_backtrace.log").write_text(gdb["stdout"] + gdb["stderr"])
        found["gdb"] = gdb["stdout"][-6000:]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(env.VAR / "torch_check_crash"),
                        help="folder for report.json and the logs")
    out_dir = Path(parser.parse_args(argv).out)
    out_dir.mkdir(parents=True, exist_ok=True)
    import torch

    report: dict = {"environment": env.environment(), "torch_config": torch.__config__.show(),
                    "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                    "CXX": os.environ.get("CXX"), "CC": os.environ.get("CC"),
                    "compilers": {c: tool(c, "--version").splitlines()[0]
                                  for c in ("c++", "g++", "/usr/bin/g++", OPT_GXX)},
                    "torch_libs": {}, "builds": {}, "calls": []}
    torch_lib = Path(torch.__file__).parent / "lib"
    for lib in ("libc10.so", "libtorch_cpu.so", "libtorch_python.so"):
        report["torch_libs"][lib] = {"comment": tool("readelf", "-p", ".comment",
                                                     str(torch_lib / lib)),
                                     "ldd": tool("ldd", str(torch_lib / lib))}
    print(json.dumps({k: report[k] for k in ("cxx11_abi", "CXX", "CC", "compilers")}, indent=1))
    for row, command in call_all(build_all(report)):
        report["calls"].append(row)
        if row["verdict"].startswith("CRASHED") and "first_crash" not in report:
            report["first_crash"] = diagnose(row, command, out_dir)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print("\nsummary (RAISED is right; CRASHED is the bug):")
    for row in report["calls"]:
        print(f"  {row['build']:48s} {row['call']:26s} st={row['TORCH_SHOW_CPP_STACKTRACES']}: "
              f"{row['verdict'][:60]}")
    if crash := report.get("first_crash"):
        print("\nfirst crash:", crash["build"], crash["call"], "\n", crash["stderr_tail"][-1500:])
        print("\n".join(crash.get("gdb", "(no gdb)").splitlines()[-45:]))
    print(f"\nreport: {out_dir / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
