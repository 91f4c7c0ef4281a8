"""Where this machine's CUDA libraries and headers are: ``libnvrtc``, the driver, the includes.

* the NVRTC library (``libnvrtc``), found where PyTorch's CUDA wheels, ``CUDA_HOME`` or the
  system put it, and called through ``ctypes`` (its C API has been stable since CUDA 11);
* the CUDA driver (``libcuda.so.1``), for loading compiled code and launching kernels;
* the folders with the CUDA headers and libcu++ (``cuda/std``).

It imports nothing of the course: :mod:`course_utils.env` asks it whether NVRTC and libcu++ are
here (for ``%%requires``), and :mod:`course_utils.nvrtc` compiles and launches with it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path

import torch

# --------------------------------------------------------------------------------------------
# Finding libnvrtc and the headers
# --------------------------------------------------------------------------------------------


def _site_nvidia_dirs() -> list[Path]:
    """``site-packages/nvidia/<pkg>`` folders of the NVIDIA wheels (cu13 puts all in one)."""
    try:
        import nvidia  # namespace package of the nvidia-* wheels
    except ImportError:
        return []
    dirs = []
    for root in getattr(nvidia, "__path__", []):
        root = Path(root)
        for name in ("cu13", "cu12", "cuda_nvrtc", "cuda_runtime", "cuda_cccl", "cccl"):
            if (root / name).is_dir():
                dirs.append(root / name)
    return dirs


def cuda_home() -> Path | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and Path(home, "include", "cuda_runtime.h").exists():
        return Path(home)
    if Path("/usr/local/cuda/include/cuda_runtime.h").exists():
        return Path("/usr/local/cuda")
    return None


def _nvrtc_candidates() -> list[str]:
    major = (torch.version.cuda or "").split(".")[0]
    names = [f"libnvrtc.so.{major}"] if major else []
    paths = []
    for d in _site_nvidia_dirs():
        paths += [str(p) for p in sorted((d / "lib").glob("libnvrtc.so*"))
                  if "builtins" not in p.name and ".alt." not in p.name]
    if home := cuda_home():
        for lib in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            paths += [str(p) for p in sorted((home / lib).glob("libnvrtc.so*"))
                      if "builtins" not in p.name and ".alt." not in p.name]
    # the soname first: the library torch already loaded, when it did
    return [*names, *paths, "libnvrtc.so"]


@functools.cache
def nvrtc_library() -> ctypes.CDLL:
    """``libnvrtc`` with the prototypes the course uses; OSError saying where it looked."""
    if sys.platform == "win32":
        raise OSError("course_utils.nvrtc supports Linux (WSL2 works); this is Windows")
    tried = []
    for candidate in _nvrtc_candidates():
        try:
            lib = ctypes.CDLL(candidate)
        except OSError as err:
            tried.append(f"{candidate} ({str(err).split(':')[-1].strip()})")
            continue
        _declare_nvrtc(lib)
        return lib
    raise OSError("NVRTC library not found; tried " + ", ".join(tried)
                  + ". Install the nvidia-cuda-nvrtc wheel (torch's CUDA wheels bring it) "
                  "or set CUDA_HOME to a CUDA toolkit.")


def _declare_nvrtc(lib: ctypes.CDLL) -> None:
    p, i, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [i]
    lib.nvrtcVersion.argtypes = [ctypes.POINTER(i), ctypes.POINTER(i)]
    lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(p), ctypes.c_char_p, ctypes.c_char_p, i,
                                       p, p]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(p)]
    lib.nvrtcAddNameExpression.argtypes = [p, ctypes.c_char_p]
    lib.nvrtcCompileProgram.argtypes = [p, i, ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcGetLoweredName.argtypes = [p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
    for what in ("ProgramLog", "PTX", "CUBIN"):
        getattr(lib, f"nvrtcGet{what}Size").argtypes = [p, ctypes.POINTER(size)]
        getattr(lib, f"nvrtcGet{what}").argtypes = [p, ctypes.c_char_p]
    lib.nvrtcGetNumSupportedArchs.argtypes = [ctypes.POINTER(i)]
    lib.nvrtcGetSupportedArchs.argtypes = [ctypes.POINTER(i)]


def nvrtc_library_path() -> str:
    """Where the loaded ``libnvrtc`` lives (for the environment stamp and error messages)."""
    lib = nvrtc_library()
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libnvrtc.so" in line and "builtins" not in line:
                return line.split()[-1]
    except OSError:
        pass
    return lib._name


def include_dirs() -> list[Path]:
    """Folders with the CUDA headers (``cuda_bf16.h``, ``cuda_fp8.h``) and libcu++
    (``cuda/std/...``, under ``include/cccl`` since CUDA 13), from ``CUDA_HOME`` and the wheels."""
    found: list[Path] = []
    seen: set[Path] = set()
    roots = [d / "include" for d in _site_nvidia_dirs()]
    if home := cuda_home():
        roots.insert(0, home / "include")
        roots.insert(1, home / "targets" / "x86_64-linux" / "include")
    for root in roots:
        for folder in (root, root / "cccl"):
            if folder.is_dir() and folder.resolve() not in seen and (
                    (folder / "cuda_fp16.h").exists() or (folder / "cuda" / "std").is_dir()):
                seen.add(folder.resolve())
                found.append(folder)
    return found


# --------------------------------------------------------------------------------------------
# The CUDA driver
# --------------------------------------------------------------------------------------------


@functools.cache
@functools.cache  # loaded and declared once: a launch looks functions up on it
def driver_library() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    p, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    lib.cuGetErrorString.argtypes = [i, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(p), ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(p), p, ctypes.c_char_p]
    lib.cuFuncSetAttribute.argtypes = [p, i, i]
    lib.cuLaunchKernel.argtypes = [p, u, u, u, u, u, u, u, p, ctypes.POINTER(p), p]
    lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(LaunchConfig), p, ctypes.POINTER(p), p]
    lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(p)]
    lib.cuCtxGetLimit.argtypes = [ctypes.POINTER(ctypes.c_size_t), i]
    return lib


# cuLaunchKernelEx's arguments (cuda.h): a launch shape with a list of attributes. The course
# uses one attribute, the cluster dimension: blocks that run together on one GPC and share
# their shared memory (lesson 16's step 5). Declaring it at launch, not with __cluster_dims__ in
# the kernel, keeps kernels that are not launched in clusters on the plain, quicker launch path.
LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class LaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", ctypes.c_uint * 16)]  # a 64-byte union; clusterDim is x, y, z


class LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def check_driver(result: int, what: str) -> None:
    if result == 0:
        return
    message = ctypes.c_char_p()
    driver_library().cuGetErrorString(result, ctypes.byref(message))
    text = message.value.decode() if message.value else f"error {result}"
    raise RuntimeError(f"CUDA driver: {what} failed: {text}")


def nvrtc_unavailable_reason() -> str | None:
    """None when NVRTC can compile on this machine (no GPU needed); otherwise why not."""
    try:
        nvrtc_library()
    except OSError as err:
        return str(err)
    return None
