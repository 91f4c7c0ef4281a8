"""``strided_copy.cu`` through NVRTC: one thread per element, reads ``stride`` elements apart."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.registry import register
from kernels.strided_copy.op import DTYPES

SOURCE = Path(__file__).with_name("strided_copy.cu")
KERNEL = "strided_copy"
BLOCK = 256
MAX_STRIDE = 65535  # the stride is the grid's y dimension


def compile_strided_copy(dtype: torch.dtype = torch.float32, arch=None,
                         **kwargs) -> nvrtc.Compiled:
    """Compile ``strided_copy.cu`` for ``dtype`` (no GPU needed)."""
    return nvrtc.compile(SOURCE, KERNEL, defines={"scalar_t": dtype, "BLOCK": BLOCK}, arch=arch,
                         **kwargs)


@functools.cache
def loaded(dtype: torch.dtype, device: int) -> nvrtc.Kernel:
    return nvrtc.load(compile_strided_copy(dtype), device)


def _check(x: torch.Tensor, stride: int) -> str | None:
    if stride > MAX_STRIDE:
        return f"the stride is the grid's y dimension: at most {MAX_STRIDE}, got {stride}"
    return None


def strided_copy_nvrtc(x: torch.Tensor, stride: int) -> torch.Tensor:
    """Thread c of grid row r copies x[c * stride + r] to y[r * m + c]."""
    x = x.contiguous()
    y = torch.empty_like(x)
    m = x.numel() // stride
    if m:
        loaded(x.dtype, x.device.index or 0)(x, y, m, stride, grid=(-(-m // BLOCK), stride),
                                             block=BLOCK)
    return y


register("strided_copy", "nvrtc", fn=strided_copy_nvrtc, dtypes=DTYPES, devices=("cuda",),
         needs=("cuda", "nvrtc"), check=_check,
         meta={"source": "kernels/strided_copy/strided_copy.cu", "block": BLOCK},
         description="strided_copy.cu compiled with NVRTC: coalesced writes, strided reads")
