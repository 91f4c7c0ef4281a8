"""What this machine is and what it can run.

Importing this module prepares the process for the course, before any kernel module imports:

* ``CUDA_HOME`` points at ``/usr/local/cuda`` when that exists and is not set (torch otherwise
  guesses from the first ``nvcc`` on PATH, which is often a wrapper in ``/usr/local/bin``);
* without a CUDA GPU, ``TRITON_INTERPRET=1`` so that ``@triton.jit`` kernels run on the CPU
  (Triton reads the variable when a kernel is *decorated*, so it must be set first).

It also says what the machine is: the device and its datasheet peaks, the toolchain, the git
revision and the environment stamp on every results file. Requirement questions ("is there
nvcc?", "is this GPU sm_89+?") are :mod:`course_utils.requirements`, built on these facts.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
RESULTS_DIR = ROOT / "docs" / "results"


def _prepare_process() -> None:
    if "CUDA_HOME" not in os.environ and Path("/usr/local/cuda/bin/nvcc").exists():
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
    if "TRITON_INTERPRET" not in os.environ and not _cuda_available():
        os.environ["TRITON_INTERPRET"] = "1"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


_prepare_process()

import torch  # noqa: E402  (after CUDA_HOME / TRITON_INTERPRET are settled)

HAS_CUDA: bool = torch.cuda.is_available()
DEFAULT_DEVICE: str = "cuda" if HAS_CUDA else "cpu"
STRICT: bool = os.environ.get("COURSE_STRICT", "") not in ("", "0")
TRITON_INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def child_environment(**extra: str) -> dict[str, str]:
    """The environment for a Python started from here (a subprocess, a notebook kernel): this
    one with the project root first on ``PYTHONPATH``, so it imports the course from this
    checkout whether or not it is installed, plus ``extra``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def var_dir(*parts: str) -> Path:
    """A folder under ``var/`` (created on demand) for generated files."""
    path = VAR.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------------------------
# The device
# --------------------------------------------------------------------------------------------

# Datasheet peaks (dense, no sparsity) for GPUs students commonly have. TFLOP/s for the matmul
# dtypes, GB/s for memory bandwidth. Matched against the device name, first hit wins.
# Sources: NVIDIA product datasheets / architecture whitepapers.
_PEAKS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"float32": 67, "tf32": 495, "bfloat16": 989, "float16": 989, "float8": 1979,
              "int8": 1979, "bandwidth_gbs": 4800}),
    ("H100 PCIe", {"float32": 51, "tf32": 378, "bfloat16": 756, "float16": 756, "float8": 1513,
                   "int8": 1513, "bandwidth_gbs": 2000}),
    ("H100", {"float32": 67, "tf32": 495, "bfloat16": 989, "float16": 989, "float8": 1979,
              "int8": 1979, "bandwidth_gbs": 3350}),
    ("A100", {"float32": 19.5, "tf32": 156, "bfloat16": 312, "float16": 312, "int8": 624,
              "bandwidth_gbs": 2039}),
    ("L4", {"float32": 30.3, "tf32": 60, "bfloat16": 121, "float16": 121, "float8": 242,
            "int8": 242, "bandwidth_gbs": 300}),
    ("T4", {"float32": 8.1, "float16": 65, "int8": 130, "bandwidth_gbs": 320}),
    ("RTX 4090", {"float32": 82.6, "tf32": 82.6, "bfloat16": 165, "float16": 165,
                  "float8": 330, "int8": 661, "bandwidth_gbs": 1008}),
    ("RTX 5090", {"float32": 104.8, "tf32": 104.8, "bfloat16": 209.5, "float16": 209.5,
                  "float8": 419, "int8": 838, "bandwidth_gbs": 1792}),
]


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU (or the CPU, when there is none) that the course runs on."""

    name: str
    kind: str  # "cuda" or "cpu"
    capability: tuple[int, int] | None = None
    sms: int | None = None
    memory_gb: float | None = None
    driver: str | None = None
    cuda: str | None = None
    peaks: dict[str, float] = field(default_factory=dict)

    @property
    def arch(self) -> str | None:
        """``"sm_90"`` for an H100; None on the CPU."""
        return f"sm_{self.capability[0]}{self.capability[1]}" if self.capability else None

    def peak_tflops(self, dtype: torch.dtype | str) -> float | None:
        """The datasheet dense peak for matmuls of ``dtype``, or None when unknown."""
        key = str(dtype).removeprefix("torch.")
        if key.startswith("float8"):
            key = "float8"
        return self.peaks.get(key)

    def __str__(self) -> str:
        if self.kind == "cpu":
            return f"CPU: {self.name}"
        mem = f", {self.memory_gb:.0f} GiB" if self.memory_gb else ""
        return f"{self.name} ({self.arch}, {self.sms} SMs{mem}, driver {self.driver})"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} x{os.cpu_count()}"


def _driver_version() -> str | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def peaks_for(name: str) -> dict[str, float]:
    """Datasheet peaks of the GPU called ``name`` (empty when the course does not know it)."""
    return dict(next((p for key, p in _PEAKS if key in name), {}))


@functools.cache
def device_info() -> DeviceInfo:
    """Describe the default device (GPU 0, else the CPU)."""
    if not HAS_CUDA:
        return DeviceInfo(name=_cpu_name(), kind="cpu")
    props = torch.cuda.get_device_properties(0)
    peaks = peaks_for(props.name)
    return DeviceInfo(
        name=props.name,
        kind="cuda",
        capability=(props.major, props.minor),
        sms=props.multi_processor_count,
        memory_gb=props.total_memory / 2**30,
        driver=_driver_version(),
        cuda=torch.version.cuda,
        peaks=dict(peaks),
    )


def device_slug(name: str | None = None) -> str:
    """File-name form of the device name: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    name = name or device_info().name
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def git_revision() -> str:
    """Short hash of HEAD (with ``+dirty`` for uncommitted changes), or ``unknown``.

    ``COURSE_GIT_REVISION`` overrides it, for copies of the tree without ``.git`` (a GPU box
    that received only the working tree).
    """
    if rev := os.environ.get("COURSE_GIT_REVISION"):
        return rev
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def environment() -> dict[str, str | None]:
    """The environment stamp put on every table, figure and results file."""
    info = device_info()
    return {
        "device": info.name,
        "capability": info.arch,
        "driver": info.driver,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton_version() + (" (interpreter)" if TRITON_INTERPRET else "")
        if triton_version() else None,
        "python": platform.python_version(),
        "git": git_revision(),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def environment_line() -> str:
    """One line for figure and table footers."""
    env = environment()
    parts = [env["device"]]
    if env["driver"]:
        parts.append(f"driver {env['driver']}")
    if env["cuda"]:
        parts.append(f"CUDA {env['cuda']}")
    parts.append(f"torch {env['torch']}")
    if env["triton"]:
        parts.append(f"Triton {env['triton']}")
    parts.append(f"git {env['git']}")
    return " · ".join(parts)


# --------------------------------------------------------------------------------------------
# The toolchain (course_utils.requirements turns these facts into requirements with reasons)
# --------------------------------------------------------------------------------------------


def nvcc_path() -> str | None:
    """The nvcc that torch's extension builder will use."""
    home = os.environ.get("CUDA_HOME")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


@functools.cache
def nvcc_version() -> str | None:
    nvcc = nvcc_path()
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out.stdout)
    return match.group(1) if match else None
