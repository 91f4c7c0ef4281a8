"""The row-sum kernels of ``row_sum.cu`` through NVRTC: a warp per row, and a block per row.

``row_sum_warp`` suits many short rows (8 rows per 256-thread block); ``row_sum_block`` gives a
long row a whole block of 1024 threads. Both read a row with neighbouring threads on
neighbouring columns (coalesced) and accumulate in float32 whatever the input dtype.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.registry import register
from kernels.row_sum.op import DTYPES

SOURCE = Path(__file__).with_name("row_sum.cu")
WARP = 32
KERNELS = {"warp": "row_sum_warp", "block": "row_sum_block"}
# threads per block, generated into the header AND used for the launch: 8 rows of a warp each,
# or one row for 1024 threads (a long row needs many loads in flight)
BLOCKS = {"warp": 256, "block": 1024}


def compile_row_sum(variant: str = "warp", dtype: torch.dtype = torch.float32, arch=None,
                    **kwargs) -> nvrtc.Compiled:
    """Compile one kernel of ``row_sum.cu`` (no GPU needed; ``arch`` defaults to this GPU or
    sm_90): ``variant`` is "warp" or "block"."""
    if variant not in KERNELS:
        raise ValueError(f"variant expected one of {', '.join(KERNELS)}, got {variant!r}")
    return nvrtc.compile(SOURCE, KERNELS[variant], arch=arch,
                         defines={"scalar_t": dtype, "BLOCK": BLOCKS[variant]}, **kwargs)


@functools.cache  # compiled (or read from the cache) and loaded once per variant/dtype/GPU
def loaded(variant: str, dtype: torch.dtype, device: int) -> nvrtc.Kernel:
    return nvrtc.load(compile_row_sum(variant, dtype), device)


def _rows_ready(x: torch.Tensor) -> torch.Tensor:
    """The kernels step along a row one element at a time: columns must be adjacent."""
    return x if x.stride(1) == 1 or x.shape[1] <= 1 else x.contiguous()


def row_sum_warp(x: torch.Tensor) -> torch.Tensor:
    """One warp per row: lanes add strided columns, then 5 shuffles add the lanes."""
    x = _rows_ready(x)
    rows, cols = x.shape
    y = torch.empty(rows, device=x.device, dtype=torch.float32)
    if rows:
        block = BLOCKS["warp"]
        loaded("warp", x.dtype, x.device.index or 0)(
            x, y, rows, cols, x.stride(0), grid=-(-rows // (block // WARP)), block=block)
    return y


def row_sum_block(x: torch.Tensor) -> torch.Tensor:
    """One block per row: shuffles within each warp, shared memory between the warps."""
    x = _rows_ready(x)
    rows, cols = x.shape
    y = torch.empty(rows, device=x.device, dtype=torch.float32)
    if rows:
        loaded("block", x.dtype, x.device.index or 0)(x, y, cols, x.stride(0), grid=rows,
                                                       block=BLOCKS["block"])
    return y


for _variant, _fn, _rows in (("warp", row_sum_warp, BLOCKS["warp"] // WARP),
                             ("block", row_sum_block, 1)):
    register("row_sum", "nvrtc", _variant, fn=_fn, dtypes=DTYPES, devices=("cuda",),
             needs=("cuda", "nvrtc"),
             meta={"source": "kernels/row_sum/row_sum.cu", "kernel": KERNELS[_variant],
                   "rows_per_block": _rows, "block": BLOCKS[_variant],
                   "accumulator": "float32"},
             description=f"row_sum.cu's {KERNELS[_variant]} compiled with NVRTC")
