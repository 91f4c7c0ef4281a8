"""The FP64 GEMM in CUDA, compiled with NVRTC: the implementation, which knows nothing of the
registry (``interface.py`` gives it one).

``gemm.cu`` takes its tile shape from the generated header, so each tile shape is its own small
program: compiled on first use (tens of milliseconds, no GPU needed) and cached in memory and
under ``var/nvrtc_cache/``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc

SOURCE = Path(__file__).with_name("gemm.cu")
KERNEL = "fp64_gemm"


def compile_gemm(tile: tuple[int, int], arch=None, **kwargs) -> nvrtc.Compiled:
    """Compile ``gemm.cu`` for a ``(TILE_M, TILE_N)`` tile (arch: this GPU, else sm_90)."""
    tile_m, tile_n = tile
    return nvrtc.compile(SOURCE, KERNEL, defines={"TILE_M": tile_m, "TILE_N": tile_n},
                         arch=arch, **kwargs)


@functools.cache  # compiled and loaded on first use; then a call is a dictionary lookup
def loaded(tile: tuple[int, int], device: int) -> nvrtc.Kernel:
    """gemm.cu for ``tile``, loaded on GPU ``device`` (compiled or read from the cache once)."""
    return nvrtc.load(compile_gemm(tile), device)


def gemm(a: torch.Tensor, b: torch.Tensor, tile: tuple[int, int] = (16, 16)) -> torch.Tensor:
    """``a @ b`` for contiguous float64 CUDA tensors; the launch is written here, in Python."""
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty((m, n), dtype=torch.float64, device=a.device)
    if m == 0 or n == 0:
        return out  # an empty grid is not a launch
    kernel = loaded(tuple(tile), a.device.index or 0)
    tile_m, tile_n = tile
    # x along N (coalesced loads of b and stores of out), y along M
    grid = (-(-n // tile_n), -(-m // tile_m))
    kernel(a, b, out, m, n, k, grid=grid, block=(tile_n, tile_m))
    return out
