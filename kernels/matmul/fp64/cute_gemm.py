"""The FP64 GEMM in NVIDIA's CuTe DSL: the implementation, which knows nothing of the registry
(``interface.py`` gives it one). Importing this module needs ``nvidia-cutlass-dsl`` (an optional
extra: ``%%requires cute-dsl``); the rest of the course never imports it unless it is there.

It is the kernel of the CUTLASS API's "bring your own kernel" example, for 2-D operands: a
``@cute.jit`` host function picks the grid from the tile shape and launches a ``@cute.kernel``
in which each thread computes one element of ``out``. As in that example the sum is kept in
``out`` itself (a read and a write of global memory per step of K, the simplest code the DSL
compiles); the CUDA version in ``gemm.cu`` keeps it in a register, which is faster.

The DSL reads a kernel's Python source to compile it (a kernel defined in an ``exec``'d string
is refused); in this file it is also importable by the tests, the benchmark and the notebook.
"""

# No `from __future__ import annotations` here: the DSL reads the argument annotations
# (cute.Tensor, cuda.CUstream) as objects, not as strings.
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack


class Fp64Gemm:
    """``out = a @ b`` for row-major float64 ``a`` (M x K), ``b`` (K x N), ``out`` (M x N)."""

    def __init__(self, tile: tuple[int, int]):
        self.tile_m, self.tile_n = tile

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, out: cute.Tensor,
                 stream: cuda.CUstream):
        m, n = out.shape
        # x along N, y along M: a warp's 32 threads touch 32 neighbouring columns (coalesced)
        grid = ((n + self.tile_n - 1) // self.tile_n, (m + self.tile_m - 1) // self.tile_m, 1)
        self.kernel(a, b, out).launch(grid=grid, block=[self.tile_n, self.tile_m, 1],
                                      stream=stream)

    @cute.kernel
    def kernel(self, a: cute.Tensor, b: cute.Tensor, out: cute.Tensor):
        m, n = out.shape
        k = a.shape[1]
        block_n, block_m, _ = cute.arch.block_idx()
        tidx, tidy, _ = cute.arch.thread_idx()
        row = block_m * self.tile_m + tidy
        col = block_n * self.tile_n + tidx
        if row < m and col < n:
            out[row, col] = cutlass.Float64(0)
            for kk in range(k):
                out[row, col] += a[row, kk] * b[kk, col]


def _cute(t: torch.Tensor):
    # dynamic shapes and strides (one compiled kernel serves every M, N, K); the leading
    # dimension, stride 1, stays static
    return from_dlpack(t, assumed_align=8).mark_layout_dynamic(leading_dim=1)


_compiled: dict[tuple[int, int, int], object] = {}


def compile_gemm(tile: tuple[int, int], device: int = 0):
    """``cute.compile`` the kernel for ``tile`` once per tile shape and device (cached here)."""
    key = (*tile, device)
    if key not in _compiled:
        probe = [torch.zeros(2, 2, dtype=torch.float64, device=f"cuda:{device}")
                 for _ in range(3)]
        stream = cuda.CUstream(torch.cuda.current_stream(device).cuda_stream)
        _compiled[key] = cute.compile(Fp64Gemm(tile), *map(_cute, probe), stream)
    return _compiled[key]


def gemm(a: torch.Tensor, b: torch.Tensor, tile: tuple[int, int] = (16, 16)) -> torch.Tensor:
    """``a @ b`` for contiguous float64 CUDA tensors."""
    m, n = a.shape[0], b.shape[1]
    out = torch.empty((m, n), dtype=torch.float64, device=a.device)
    if m == 0 or n == 0:
        return out
    if a.shape[1] == 0:
        return out.zero_()  # an empty sum; a zero-size operand has no leading stride of 1
    device = a.device.index or 0
    compiled = compile_gemm(tile, device)
    stream = cuda.CUstream(torch.cuda.current_stream(device).cuda_stream)
    compiled(_cute(a), _cute(b), _cute(out), stream)
    return out
