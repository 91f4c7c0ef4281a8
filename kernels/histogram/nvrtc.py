"""``histogram.cu`` through NVRTC: global atomics, and a shared-memory histogram per block.

``histogram_shared`` is compiled once per number of bins (``BINS`` in the generated header: the
size of its shared array), which NVRTC makes cheap. Its grid is a few blocks per SM, each
walking the input with a grid-stride loop, so the per-block flush (one global atomic per bin)
is paid by few blocks.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.histogram.op import DTYPES
from kernels.registry import register

SOURCE = Path(__file__).with_name("histogram.cu")
KERNELS = {"global": "histogram_global", "shared": "histogram_shared"}
THREADS = 256
BLOCKS_PER_SM = 4  # histogram_shared: resident blocks enough to hide latency, few flushes
MAX_SHARED_BINS = 48 * 1024 // 4  # a static __shared__ array holds at most 48 KiB


def compile_histogram(variant: str = "shared", bins: int = 256, arch=None,
                      **kwargs) -> nvrtc.Compiled:
    """Compile one kernel of ``histogram.cu`` (no GPU needed): ``variant`` "global" or
    "shared" (the shared one for ``bins`` bins)."""
    if variant not in KERNELS:
        raise ValueError(f"variant expected one of {', '.join(KERNELS)}, got {variant!r}")
    defines = {"BINS": bins if variant == "shared" else 256}  # (the global kernel ignores it)
    return nvrtc.compile(SOURCE, KERNELS[variant], defines=defines, arch=arch, **kwargs)


@functools.cache
def loaded(variant: str, bins: int, device: int) -> nvrtc.Kernel:
    return nvrtc.load(compile_histogram(variant, bins if variant == "shared" else 256,
                                        verbose=False), device)


@functools.cache
def _sms(device: int) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def histogram_global(x: torch.Tensor, bins: int) -> torch.Tensor:
    """One thread per element, one global atomicAdd per element in range."""
    x = x.contiguous()
    counts = torch.zeros(bins, device=x.device, dtype=torch.int32)
    if x.numel():
        loaded("global", 256, x.device.index or 0)(x, counts, x.numel(), bins,
                                                   grid=-(-x.numel() // THREADS), block=THREADS)
    return counts


def histogram_shared(x: torch.Tensor, bins: int) -> torch.Tensor:
    """A histogram per block in shared memory, then one global atomicAdd per bin per block."""
    x = x.contiguous()
    counts = torch.zeros(bins, device=x.device, dtype=torch.int32)
    if x.numel():
        device = x.device.index or 0
        blocks = min(-(-x.numel() // THREADS), BLOCKS_PER_SM * _sms(device))
        loaded("shared", bins, device)(x, counts, x.numel(), grid=blocks, block=THREADS)
    return counts


def _shared_check(x: torch.Tensor, bins: int) -> str | None:
    if bins > MAX_SHARED_BINS:
        return (f"its histogram lives in a static shared array of at most {MAX_SHARED_BINS} "
                f"bins (48 KiB); got bins={bins}")
    return None


register("histogram", "nvrtc", "global", fn=histogram_global, dtypes=DTYPES,
         devices=("cuda",), needs=("cuda", "nvrtc"),
         meta={"source": "kernels/histogram/histogram.cu", "kernel": KERNELS["global"],
               "atomics": "global"})
register("histogram", "nvrtc", "shared", fn=histogram_shared, dtypes=DTYPES,
         devices=("cuda",), needs=("cuda", "nvrtc"), check=_shared_check,
         meta={"source": "kernels/histogram/histogram.cu", "kernel": KERNELS["shared"],
               "atomics": "shared, then one global per bin per block"})
