"""PyTorch's own NVRTC path, whose private API changes between releases, in one place: the flags
``torch.cuda._compile_kernel`` appends, and ``_compile_kernel`` itself, whose signature moved:

  ====== ============================================================================
  torch  ``torch.cuda._compile_kernel``
  ====== ============================================================================
  < 2.8  missing
  2.8-9  ``header_code=`` argument; the kernel must be ``extern "C"`` (no template names);
         returns PTX
  2.10   ``header_code`` removed (prepend it to the source); template kernel names work;
         ``kernel.set_shared_memory_config`` for > 48 KB of dynamic shared memory
  2.11+  the same, and NVRTC emits CUBIN (machine code for this GPU) instead of PTX
  ====== ============================================================================

The course compiles through NVRTC's C API directly, so none of this matters for its own kernels;
:func:`torch_compile_kernel` exists to show the seed's one-liner on whatever torch is installed.
"""

from __future__ import annotations

import inspect
import re

import torch


def torch_nvrtc_flags() -> list[str]:
    """The defines ``torch.cuda._compile_kernel`` (and ``load_inline``) append to every compile:
    ``-D__CUDA_NO_HALF_OPERATORS__`` and friends, which switch off ``__half`` arithmetic."""
    try:
        from torch.utils.cpp_extension import COMMON_NVCC_FLAGS
    except ImportError:
        return []
    return [f for f in COMMON_NVCC_FLAGS if f.startswith("-D")]


def torch_version() -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def torch_compile_kernel_reason() -> str | None:
    """Why ``torch.cuda._compile_kernel`` cannot be used here (None: it can)."""
    if not hasattr(torch.cuda, "_compile_kernel"):
        return (f"torch {torch.__version__} has no torch.cuda._compile_kernel (added in 2.8); "
                "course_utils.nvrtc.compile/load work without it")
    if not torch.cuda.is_available():
        return "torch.cuda._compile_kernel loads the kernel, which needs a CUDA GPU"
    return None


def torch_allows_template_names() -> bool:
    """torch 2.10 made ``_compile_kernel`` register the name as an NVRTC name expression."""
    return hasattr(torch.cuda, "_compile_kernel") and not _takes_header_code()


def _takes_header_code() -> bool:
    return "header_code" in inspect.signature(torch.cuda._compile_kernel).parameters


def torch_compile_kernel(source: str, name: str, header: str = "", *,
                         arch: str | None = None, include_dirs: list[str] | None = None,
                         options: list[str] | None = None):
    """``torch.cuda._compile_kernel`` with the same arguments on every torch that has it.

    Returns torch's kernel object: ``kernel(grid=..., block=..., args=[...], shared_mem=...)``
    (careful: it passes Python floats as C ``double``).
    """
    if reason := torch_compile_kernel_reason():
        raise RuntimeError(reason)
    if "<" in name and not torch_allows_template_names():
        raise ValueError(f"torch {torch.__version__}: _compile_kernel takes extern \"C\" kernel "
                         f"names only (template names such as {name!r} need torch 2.10+)")
    kwargs = dict(compute_capability=arch.removeprefix("sm_") if arch else None,
                  cuda_include_dirs=include_dirs, nvcc_options=options)
    if _takes_header_code():  # torch 2.8-2.9
        return torch.cuda._compile_kernel(source, name, header_code=header, **kwargs)
    return torch.cuda._compile_kernel(header + "\n" + source, name, **kwargs)
