"""What a cell, a kernel or a check needs, and why this machine does not have it.

Each requirement ("nvcc", "triton-gpu", "sm_90", "gpus2", ...) is a check that returns None when
met and otherwise the reason in plain words. The ``%%requires`` cell magic, the kernel registry's
``supports()``, the exercise checks and the test suite all ask here, so a skipped cell, a refused
kernel and a skipped test give the same reason. The facts behind them (is there a GPU, which
nvcc, which Triton) are :mod:`course_utils.env`'s; they are read at each call, so a test that
patches ``env.STRICT`` or ``env.nvcc_version`` changes what these answer.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

import torch

from course_utils import cuda_libs, env


def _need_cuda() -> str | None:
    if env.HAS_CUDA:
        return None
    if torch.version.cuda is None:
        return "no CUDA GPU (this torch is a CPU-only build)"
    return "no CUDA GPU (torch.cuda.is_available() is False)"


def _need_nvcc() -> str | None:
    """nvcc, and a torch that can build CUDA extensions with it (a CUDA build of torch)."""
    if not env.nvcc_version():
        return "no CUDA compiler: nvcc not found (set CUDA_HOME or put nvcc on PATH)"
    if torch.version.cuda is None:
        return ("this torch is a CPU-only build: CUDA extensions need a CUDA build of torch "
                "(pip install torch from the CUDA index; it runs on a CPU too)")
    return None


def _need_cxx() -> str | None:
    for cxx in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if cxx and shutil.which(cxx):
            return None
    return "no C++ compiler (c++/g++/clang++ not on PATH)"


def _need_nvrtc() -> str | None:
    return cuda_libs.nvrtc_unavailable_reason()


def _need_libcudacxx() -> str | None:
    """libcu++ (``<cuda/std/...>``) for NVRTC: NVRTC has no host C++ standard library."""
    if reason := _need_nvrtc():
        return reason
    if any((folder / "cuda" / "std").is_dir() for folder in cuda_libs.include_dirs()):
        return None
    return ("libcu++ headers (cuda/std/...) not found: install a CUDA toolkit (they are in "
            "include/cccl) or `pip install nvidia-cuda-cccl`")


def _need_disasm() -> str | None:
    """A SASS disassembler (nvdisasm or cuobjdump): a toolkit, the NVIDIA wheels or Triton's."""
    from course_utils import sass

    return sass.unavailable_reason()


def _need_ncu() -> str | None:
    """Nsight Compute's command line (ncu), for course_utils.ncu; profiling also needs a GPU."""
    from course_utils import ncu

    return _need_cuda() or ncu.unavailable_reason()


def _need_triton() -> str | None:
    if env.triton_version() is None:
        return "Triton is not installed"
    return None


def _need_triton_gpu() -> str | None:
    if (reason := _need_triton()) or (reason := _need_cuda()):
        return reason
    if env.TRITON_INTERPRET:
        return "Triton is in interpreter mode (env.TRITON_INTERPRET=1)"
    return None


def _need_cute_dsl() -> str | None:
    """NVIDIA's CuTe DSL: an optional extra (about 100 MB of wheels), never a default."""
    import importlib.metadata  # the distribution's metadata: finding it imports nothing

    try:
        importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return ("NVIDIA's CuTe DSL is not installed (optional): "
                "pip install nvidia-cutlass-dsl, about 100 MB, for a CUDA 12.9+ driver")
    return None


def _need_compile() -> str | None:
    # torch.compile's inductor backend generates C++ on the CPU and Triton on the GPU
    if env.HAS_CUDA:
        return _need_triton()
    return _need_cxx()


def _need_arch(major: int, minor: int):
    def check() -> str | None:
        if reason := _need_cuda():
            return reason
        have = env.device_info().capability
        if have < (major, minor):
            return f"needs sm_{major}{minor}+; this GPU is {env.device_info().arch}"
        return None

    return check


def _need_hopper() -> str | None:
    # wgmma, setmaxnreg and sm_90a code run on sm_90 only: not on Ada before, not on Blackwell after
    if reason := _need_cuda():
        return reason
    if env.device_info().capability != (9, 0):
        return f"needs a Hopper GPU (sm_90: H100, H200); this GPU is {env.device_info().arch}"
    return None


def _need_gpus(count: int):
    # one process per GPU (lesson 20): NCCL between ranks needs a GPU each
    def check() -> str | None:
        if reason := _need_cuda():
            return reason
        have = torch.cuda.device_count()
        if have < count:
            return f"needs {count} GPUs (one per rank); this machine has {have}"
        return None

    return check


def too_few_gpus(requirement: str) -> bool:
    """Whether ``requirement`` is a GPU count (``gpus2``) that this machine misses only by
    count: it has a GPU, not enough of them. ``COURSE_STRICT=1`` skips such a cell (with its
    line, logged for the test summary) instead of failing: a one-GPU run is the normal case."""
    match = _GPUS.match(requirement.strip().lower())
    return bool(match) and env.HAS_CUDA and torch.cuda.device_count() < int(match.group(1))


REQUIREMENTS: dict[str, object] = {
    "cuda": _need_cuda,
    "gpu": _need_cuda,
    "nvcc": _need_nvcc,
    "cxx": _need_cxx,
    "nvrtc": _need_nvrtc,
    "libcu++": _need_libcudacxx,
    "disasm": _need_disasm,
    "ncu": _need_ncu,
    "triton": _need_triton,
    "triton-gpu": _need_triton_gpu,
    "compile": _need_compile,
    "cute-dsl": _need_cute_dsl,
    "hopper": _need_hopper,
}
_ARCH = re.compile(r"^sm_?(\d)(\d+)$")
_GPUS = re.compile(r"^gpus(\d+)$")  # gpus2: at least 2 CUDA GPUs


def known_requirements() -> str:
    return ", ".join([*REQUIREMENTS, "sm_XY (e.g. sm_80, sm_89, sm_90)",
                      "gpusN (N GPUs, e.g. gpus2)"])


def is_requirement(name: str) -> bool:
    """Whether ``name`` is a requirement the course knows (checks nothing about the machine)."""
    key = str(name).strip().lower()
    return key in REQUIREMENTS or bool(_ARCH.match(key)) or bool(_GPUS.match(key))


def unmet(*requirements: str) -> list[str]:
    """Reasons for each requirement that this machine does not meet (empty: all met).

    Raises ValueError for a requirement name the course does not know.
    """
    reasons = []
    for req in requirements:
        key = req.strip().lower()
        if match := _ARCH.match(key):
            check = _need_arch(int(match.group(1)), int(match.group(2)))
        elif match := _GPUS.match(key):
            check = _need_gpus(int(match.group(1)))
        elif key in REQUIREMENTS:
            check = REQUIREMENTS[key]
        else:
            raise ValueError(f"unknown requirement {req!r}; known: {known_requirements()}")
        if reason := check():
            reasons.append(reason)
    return reasons


# Optional extras: what a student may install for one cell, never what the course requires.
# Under COURSE_STRICT=1 a cell that needs only these still skips (a GPU box without them is the
# normal case), and the skip is logged for the test summary. Requirement name -> the package
# that meets it, listed in requirements-optional.txt (and never in requirements.txt).
OPTIONAL: dict[str, str] = {"cute-dsl": "nvidia-cutlass-dsl"}

# Where skips of optional extras are appended, one line each (set by the test suite's conftest,
# inherited by the notebook kernels it starts), so ``make test-gpu`` can list them at the end.
OPTIONAL_SKIP_LOG = "COURSE_OPTIONAL_SKIP_LOG"


class RequirementError(RuntimeError):
    """An unmet requirement under COURSE_STRICT=1 (a GPU run must not pass by skipping)."""


def _log_optional_skip(message: str) -> None:
    if log := os.environ.get(OPTIONAL_SKIP_LOG):
        # one short write in append mode: lines from parallel kernels do not interleave
        with open(log, "a") as f:
            f.write(message.replace("\n", " ") + "\n")


def requires(*requirements: str, what: str = "this cell") -> bool:
    """True when every requirement is met; otherwise print one line saying what is missing.

    Under ``COURSE_STRICT=1`` an unmet requirement raises :class:`RequirementError` instead,
    unless every unmet one is an optional extra (:data:`OPTIONAL`): then the cell skips as
    usual, says the extra is optional, and the skip goes to the log the test summary lists.
    """
    missing = {r: why for r in requirements if (why := unmet(r))}
    if not missing:
        return True
    reasons = [reason for why in missing.values() for reason in why]
    message = f"skipped {what}: needs {' '.join(requirements)}: {'; '.join(reasons)}"
    only_optional = all(r.strip().lower() in OPTIONAL for r in missing)
    only_count = all(too_few_gpus(r) for r in missing)
    if env.STRICT and not (only_optional or only_count):
        raise RequirementError(message + " (COURSE_STRICT=1)")
    if only_optional:  # allowed even under COURSE_STRICT=1, and listed by the test summary
        message += " (an optional extra)"
        _log_optional_skip(message)
    elif only_count:  # a GPU run on fewer GPUs: skipped, listed by the test summary
        message += " (fewer GPUs than ranks)"
        _log_optional_skip(message)
    print(message, file=sys.stdout)
    return False
