"""Building CUDA extensions: the course's one build path, safe when processes race.

Two ways to build, one set of rules:

* :func:`build`: ``torch.utils.cpp_extension.load_inline``, which writes the sources into a build
  directory, generates a ninja file, runs nvcc and the host compiler, links a shared library and
  loads it;
* :func:`build_setup`: ``python setup.py build_ext`` with ``CUDAExtension``, then an import.

Every shared build directory is ``var/build/<name>`` and is used under an exclusive file lock
(``var/build/<name>.lock``, beside the directory so that deleting the directory never deletes a
lock someone holds) around building *and* loading: pytest workers, a notebook and a benchmark may
build the same extension at once, and ninja in one process must never see another's half-written
objects. A timed cold build (``fresh=True``) compiles in a private directory of its own under
``var/build/cold/`` and removes it afterwards: it never touches the shared one.

The first build takes tens of seconds (most of it compiling PyTorch's headers); a later call with
unchanged sources finds the library in the build directory and only loads it. Without a GPU,
nvcc still compiles and links (for ``TORCH_CUDA_ARCH_LIST``, default sm_90 here); the library
loads but its kernels cannot launch.

When ``COURSE_BUILD_LOG`` names a file, each build appends one JSON line to it (name, seconds,
compiled): ``python -m course run`` reads it to say how much of a notebook's time went to
builds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from course_utils import env, requirements

# The architecture to compile for when there is no GPU to ask (one arch keeps builds short).
DEFAULT_ARCH = "9.0"
BUILD_LOG_VARIABLE = "COURSE_BUILD_LOG"
_COLD = "cold_build.json"  # written beside a library this path compiled


@dataclass
class Build:
    """A built extension: the module (None for op libraries), wall-clock seconds (waiting for the
    lock excluded), whether this call compiled (False: the library was already in the build
    directory) and where. A cold build's private ``directory`` is gone once it has loaded.
    ``cold``: it compiled in a directory that held nothing yet (a private one, or a shared one
    never built before), so nothing was reused: the time is a cold build's."""

    name: str
    module: ModuleType | None
    seconds: float
    compiled: bool
    directory: Path
    cold: bool = False

    def __repr__(self) -> str:
        how = "compiled" if self.compiled else "cached, load only"
        return f"<Build {self.name}: {self.seconds:.2f} s, {how}, in {self.directory}>"


def arch_list() -> str:
    """``TORCH_CUDA_ARCH_LIST`` for builds: the user's setting, else this GPU, else sm_90."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if env.HAS_CUDA:
        major, minor = env.device_info().capability
        return f"{major}.{minor}"
    return DEFAULT_ARCH


def check_toolchain(name: str) -> None:
    """Raise ``RuntimeError`` saying what is missing when ``name`` cannot be built here."""
    if reason := "; ".join(requirements.unmet("nvcc", "cxx")):
        raise RuntimeError(f"cannot build {name!r}: {reason}")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name expected a Python identifier (it names the module and the "
                         f"build directory), got {name!r}")


def build_dir(name: str) -> Path:
    """The shared build directory of extension ``name``: ``var/build/<name>``."""
    _check_name(name)
    return env.VAR / "build" / name


@contextlib.contextmanager
def locked(name: str):
    """Hold the exclusive lock of ``var/build/<name>`` (across processes) inside the block.

    ``flock`` locks are released by the kernel when the holder exits, even on a crash, so a
    killed build never leaves the directory locked for good.
    """
    directory = build_dir(name)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield directory
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _directory(name: str, fresh: bool):
    """The shared directory under its lock, or (``fresh``) a private one removed afterwards."""
    if not fresh:
        with locked(name) as directory:
            directory.mkdir(parents=True, exist_ok=True)
            # torch's own baton file: under our lock nobody else is building here, so one left
            # behind is from a killed build, and torch would wait on it forever
            (directory / "lock").unlink(missing_ok=True)
            yield directory
        return
    parent = env.VAR / "build" / "cold"
    parent.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))
    try:
        yield private
    finally:
        # the loaded library stays mapped in this process after its file is removed
        shutil.rmtree(private, ignore_errors=True)


def cold_build(directory: Path) -> dict | None:
    """How long the compile that produced the library in ``directory`` took (None: unknown)."""
    path = Path(directory) / _COLD
    return json.loads(path.read_text()) if path.exists() else None


def _record(result: Build) -> Build:
    """Note a compile beside its library and append the build to ``COURSE_BUILD_LOG``."""
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if result.compiled and result.directory.exists():
        info = {"seconds": round(result.seconds, 2), "arch": arch_list(), "when": when,
                "cpus": os.cpu_count()}
        (result.directory / _COLD).write_text(json.dumps(info))
    if log := os.environ.get(BUILD_LOG_VARIABLE):
        line = json.dumps({"name": result.name, "seconds": round(result.seconds, 3),
                           "compiled": result.compiled, "when": when})
        with open(log, "a") as handle:  # one short append per build: whole lines, even racing
            handle.write(line + "\n")
    return result


# The host compiler must be the one whose C++ runtime torch's wheels expect. Measured on the
# course's GPU box (torch 2.11, experiments/torch_check_crash.py): with CXX=/opt/gcc/bin/g++, the
# image's wrapper, a failing TORCH_CHECK in the add op or the GeLU launch check killed Python
# (SIGSEGV); the same sources built with the distribution's /usr/bin/g++ raised RuntimeError
# every time, and a static libstdc++ made it worse (SIGABRT). So a build prefers the system
# compiler when CXX/CC point elsewhere; COURSE_CXX / COURSE_CC choose one explicitly.
SYSTEM_CXX = Path("/usr/bin/g++")
SYSTEM_CC = SYSTEM_CXX  # torch hands CC to nvcc as -ccbin, the host compiler of the .cu files


def host_compilers() -> dict[str, str]:
    """``{"CXX": ..., "CC": ...}`` for builds: COURSE_CXX/COURSE_CC if set, else the system
    g++/gcc where they exist, else whatever the environment says (nothing to change)."""
    chosen = {}
    for var, system in (("CXX", SYSTEM_CXX), ("CC", SYSTEM_CC)):
        if explicit := os.environ.get(f"COURSE_{var}"):
            chosen[var] = explicit
        elif os.environ.get(var) and system.exists():
            chosen[var] = str(system)
    return chosen


class _Compilers:
    """Set CXX/CC while builds run (torch reads them from the environment).

    Builds may overlap in threads (``make prepare`` runs them side by side), and the environment
    is one per process: the first build in saves CXX/CC and sets them, the last one out puts
    them back, so no build ever runs with another's restored values."""

    def __init__(self):
        self._lock = threading.Lock()
        self._inside = 0
        self._saved: dict[str, str | None] = {}

    def __enter__(self):
        with self._lock:
            if self._inside == 0:
                self._saved = {var: os.environ.get(var) for var in ("CXX", "CC")}
                os.environ.update(host_compilers())
            self._inside += 1

    def __exit__(self, *exc):
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                for var, value in self._saved.items():
                    if value is None:
                        os.environ.pop(var, None)
                    else:
                        os.environ[var] = value


_compilers = _Compilers()


def build(name: str, cpp_sources: str | list[str], cuda_sources: str | list[str] | None = None,
          *, functions: list[str] | None = None, fresh: bool = False, verbose: bool = False,
          extra_cuda_cflags: list[str] | None = None, is_python_module: bool = True,
          **kwargs) -> Build:
    """``load_inline`` into ``var/build/<name>`` under its lock, timed.

    ``fresh=True`` compiles in a private directory, so the time is a cold build and no other
    process's build is disturbed. ``is_python_module=False`` loads the library for its
    ``TORCH_LIBRARY`` registrations only (one copy per process: time cold builds of such
    libraries in a subprocess). Other keyword arguments go to ``load_inline``.
    """
    _check_name(name)
    if cuda_sources:
        check_toolchain(name)
    from torch.utils import cpp_extension

    with _directory(name, fresh) as directory:
        before = {p: p.stat().st_mtime for p in directory.glob("*.so")}
        empty = not any(directory.iterdir())
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list()
        start = time.perf_counter()
        with _compilers:
            module = cpp_extension.load_inline(
                name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources,
                functions=functions, build_directory=str(directory), verbose=verbose,
                is_python_module=is_python_module,
                extra_cuda_cflags=["-O3", "-lineinfo", *(extra_cuda_cflags or [])], **kwargs)
        seconds = time.perf_counter() - start
        after = {p: p.stat().st_mtime for p in directory.glob("*.so")}
        compiled = after != before
        result = Build(name=name, module=module if is_python_module else None, seconds=seconds,
                       compiled=compiled, directory=directory, cold=compiled and empty)
        return _record(result)


def build_setup(name: str, setup_file: Path, sources: list[Path], *, fresh: bool = False,
                directory_name: str | None = None) -> Build:
    """``python <setup_file> build_ext`` into ``var/build/<directory_name or name>`` under its
    lock, timed, then import module ``name`` from the library it made.

    Compiles only when the library is older than ``setup_file`` or one of ``sources``;
    ``fresh=True`` compiles in a private directory (a cold build that disturbs no one).
    """
    _check_name(name)
    check_toolchain(name)
    setup_file = Path(setup_file)
    if not setup_file.is_file():
        raise ValueError(f"setup_file expected an existing setup.py, got {setup_file}")
    shared = directory_name or name
    with _directory(shared, fresh) as directory:
        start = time.perf_counter()
        empty = not any(directory.iterdir())
        libraries = sorted(directory.glob(f"{name}*.so"))
        newest_source = max(Path(p).stat().st_mtime for p in (setup_file, *sources))
        compiled = not libraries or libraries[0].stat().st_mtime < newest_source
        if compiled:
            for old in libraries:
                old.unlink()
            command = [sys.executable, str(setup_file), "build_ext", "--force",
                       "--build-lib", str(directory), "--build-temp", str(directory / "tmp")]
            run_env = {**os.environ, **host_compilers(), "TORCH_CUDA_ARCH_LIST": arch_list()}
            # setuptools compiles C++ with the flags Python was built with, -g among them: debug
            # information for all of PyTorch's headers (measured for gelu_binding.cpp on 2 CPUs:
            # a 16.7 MB object instead of 0.3 MB, 40 s of CPU instead of 29). load_inline's
            # builds have none; neither do these, unless CFLAGS says otherwise.
            run_env.setdefault("CFLAGS", "-g0")
            done = subprocess.run(command, cwd=setup_file.parent, env=run_env,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr)[-3000:]
                raise RuntimeError(f"setup.py build_ext failed (exit {done.returncode}):\n{tail}")
        library = sorted(directory.glob(f"{name}*.so"))[0]
        module = sys.modules.get(name)
        if module is None or getattr(module, "__file__", None) != str(library):
            spec = importlib.util.spec_from_file_location(name, library)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
        result = Build(name=name, module=module, seconds=time.perf_counter() - start,
                       compiled=compiled, directory=directory, cold=compiled and empty)
        return _record(result)
