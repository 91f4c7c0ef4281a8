"""The add kernel through NVRTC: ``add.cu`` compiled at run time, launched from Python.

The dtype is not a template parameter of the kernel: the generated header aliases ``scalar_t``
to the tensors' dtype (``torch.bfloat16`` -> ``__nv_bfloat16``), so each dtype is its own small
program, compiled on first use and cached (memory and ``var/nvrtc_cache/``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.add.op import DTYPES
from kernels.registry import register

SOURCE = Path(__file__).with_name("add.cu")
KERNEL = "add_kernel"
BLOCK = 256  # threads per block: generated into the header AND used for the launch


def defines(dtype: torch.dtype) -> dict[str, object]:
    """The Python values the header is generated from."""
    return {"scalar_t": dtype, "BLOCK": BLOCK}


def compile_add(dtype: torch.dtype = torch.float32, arch=None, **kwargs) -> nvrtc.Compiled:
    """Compile ``add.cu`` for ``dtype`` (no GPU needed; ``arch`` defaults to this GPU/sm_90)."""
    return nvrtc.compile(SOURCE, KERNEL, defines=defines(dtype), arch=arch, **kwargs)


@functools.cache  # compiled and loaded on first use; then a call is a dictionary lookup
def loaded(dtype: torch.dtype, device: int) -> nvrtc.Kernel:
    """add.cu for ``dtype``, loaded on GPU ``device`` (compiled or read from the cache once)."""
    return nvrtc.load(compile_add(dtype), device)


def add_nvrtc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b with the NVRTC-compiled add.cu; the launch is written here, in Python."""
    kernel = loaded(a.dtype, a.device.index or 0)
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    n = a.numel()
    if n:
        # one thread per element up to 2M blocks, the grid-stride loop does the rest: the same
        # launch as add_op.cu's, so the two providers differ only in how they were compiled
        kernel(a, b, out, n, grid=min(cdiv(n, BLOCK), 65535 * 32), block=BLOCK)
    return out


def cdiv(n: int, d: int) -> int:
    return -(-n // d)


register("add", "nvrtc", build=lambda: add_nvrtc, dtypes=DTYPES, devices=("cuda",),
         needs=("cuda", "nvrtc"), contiguous=False,
         meta={"source": "kernels/add/add.cu", "block": BLOCK},
         description="add.cu compiled with NVRTC at run time, launched from Python")
