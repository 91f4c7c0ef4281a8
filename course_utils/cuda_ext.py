"""Building CUDA extensions with ``torch.utils.cpp_extension.load_inline``: the course's one path.

``load_inline`` writes the sources into a build directory, generates a ninja file, runs nvcc and
the host compiler, links a shared library and imports it. The first build takes tens of seconds
(most of it compiling PyTorch's headers); a second call with unchanged sources finds the library
in the build directory and only imports it. :func:`build` keeps every build directory under
``var/build/<name>`` and reports how long the call took and whether it compiled.

Without a GPU, nvcc still compiles and links (for ``TORCH_CUDA_ARCH_LIST``, default sm_90 here);
the module imports but its kernels cannot launch.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from course_utils import env

# The architecture to compile for when there is no GPU to ask (one arch keeps builds short).
DEFAULT_ARCH = "9.0"


@dataclass
class Build:
    """A built extension: the module (None for op libraries), wall-clock seconds, and whether
    this call compiled (False: the library was already in the build directory)."""

    name: str
    module: ModuleType | None
    seconds: float
    compiled: bool
    directory: Path

    def __repr__(self) -> str:
        how = "compiled" if self.compiled else "cached, import only"
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
    if reason := "; ".join(env.unmet("nvcc", "cxx")):
        raise RuntimeError(f"cannot build {name!r}: {reason}")


def build_dir(name: str) -> Path:
    return env.VAR / "build" / name


def build(name: str, cpp_sources: str | list[str], cuda_sources: str | list[str] | None = None,
          *, functions: list[str] | None = None, fresh: bool = False, verbose: bool = False,
          extra_cuda_cflags: list[str] | None = None, is_python_module: bool = True,
          **kwargs) -> Build:
    """``load_inline`` with its build directory in ``var/build/<name>``, timed.

    ``fresh=True`` deletes the build directory first, so the time is a cold build.
    """
    check_toolchain(name) if cuda_sources else None
    from torch.utils import cpp_extension

    directory = build_dir(name)
    if fresh and directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    before = {p: p.stat().st_mtime for p in directory.glob("*.so")}
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list()
    start = time.perf_counter()
    module = cpp_extension.load_inline(
        name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources, functions=functions,
        build_directory=str(directory), verbose=verbose, is_python_module=is_python_module,
        extra_cuda_cflags=["-O3", "-lineinfo", *(extra_cuda_cflags or [])], **kwargs)
    seconds = time.perf_counter() - start
    after = {p: p.stat().st_mtime for p in directory.glob("*.so")}
    return Build(name=name, module=module if is_python_module else None, seconds=seconds,
                 compiled=after != before, directory=directory)
