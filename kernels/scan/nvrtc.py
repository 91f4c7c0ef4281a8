"""The single-pass scan of ``scan.cu`` through NVRTC: block scans, then a decoupled look-back.

One kernel, one launch (plus the zeroing of its status words, ``rows * tiles + 1`` of them: a
few hundred KiB for 2^26 elements). ``ITEMS``, the elements each thread owns, is the coarsening
factor: more items per thread means fewer tiles to look back over and more loads in flight per
thread, fewer blocks to hide the latency with; lesson 21 sweeps it (:func:`scan_cuda` takes it).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.registry import register
from kernels.scan.op import DTYPES

SOURCE = Path(__file__).with_name("scan.cu")
KERNEL = "scan_kernel"
BLOCK = 256  # threads per block, generated into the header AND used for the launch
ITEMS = 16  # elements per thread by default: a tile of 4096
ITEMS_SWEPT = (1, 2, 4, 8, 16, 32)  # the coarsening factors lesson 21 measures


def defines(dtype: torch.dtype, items: int = ITEMS) -> dict:
    """The generated header's values for one kernel (also what :mod:`cuda_on_cpu` takes)."""
    if items not in ITEMS_SWEPT:
        raise ValueError(f"items expected one of {', '.join(map(str, ITEMS_SWEPT))}, "
                         f"got {items!r}")
    return {"scalar_t": dtype, "BLOCK": BLOCK, "ITEMS": items}


def compile_scan(dtype: torch.dtype = torch.float32, items: int = ITEMS, arch=None,
                 **kwargs) -> nvrtc.Compiled:
    """Compile ``scan.cu`` for ``dtype`` and ``items`` per thread (no GPU needed; ``arch``
    defaults to this GPU or sm_90)."""
    return nvrtc.compile(SOURCE, KERNEL, arch=arch, defines=defines(dtype, items), **kwargs)


@functools.cache  # compiled (or read from the cache) and loaded once per dtype/items/GPU
def loaded(dtype: torch.dtype, items: int, device: int) -> nvrtc.Kernel:
    return nvrtc.load(compile_scan(dtype, items), device)


def launch(kernel, x: torch.Tensor, y: torch.Tensor, items: int = ITEMS) -> None:
    """``kernel`` (scan.cu's, loaded by NVRTC or by :mod:`course_utils.cuda_on_cpu`) on a
    contiguous 2-D ``x`` into ``y``: one block per tile, the status words zeroed first."""
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return
    tiles = -(-cols // (BLOCK * items))
    status = torch.zeros(1 + rows * tiles, dtype=torch.int64, device=x.device)
    kernel(x, y, status, cols, tiles, grid=rows * tiles, block=BLOCK)


@functools.cache  # built once per dtype/items: g++ with the runner's checks takes seconds
def on_this_cpu(dtype: torch.dtype, items: int = ITEMS):
    """``scan.cu`` compiled for this CPU by :mod:`course_utils.cuda_on_cpu` (every thread of
    every block run, each access checked): the same source, to check it without a GPU."""
    from course_utils import cuda_on_cpu

    return cuda_on_cpu.kernel(SOURCE.read_text(), KERNEL, defines=defines(dtype, items))


def scan_on_cpu(x: torch.Tensor, items: int = ITEMS) -> torch.Tensor:
    """:func:`scan_cuda` on a CPU tensor, through :func:`on_this_cpu` (slow: for checking)."""
    y = torch.empty_like(x)
    rows = x.view(1, -1) if x.dim() == 1 else x
    launch(on_this_cpu(x.dtype, items), rows, y.view(rows.shape), items)
    return y


def scan_cuda(x: torch.Tensor, items: int = ITEMS) -> torch.Tensor:
    """The inclusive scan of ``x`` along its last dim, ``items`` elements per thread."""
    y = torch.empty_like(x)
    rows = x.view(1, -1) if x.dim() == 1 else x
    launch(loaded(x.dtype, items, x.device.index or 0), rows, y.view(rows.shape), items)
    return y


register("scan", "nvrtc", fn=scan_cuda, dtypes=DTYPES, devices=("cuda",), needs=("cuda", "nvrtc"),
         contiguous=True,
         meta={"source": "kernels/scan/scan.cu", "kernel": KERNEL, "block": BLOCK,
               "items_per_thread": ITEMS, "across_tiles": "decoupled look-back (one pass)"},
         description="scan.cu's single-pass scan compiled with NVRTC")
