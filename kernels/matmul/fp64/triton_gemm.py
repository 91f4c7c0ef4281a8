"""The FP64 GEMM in Triton: the implementation, which knows nothing of the registry
(``interface.py`` gives it one).

Triton programs work on blocks, not threads: one program computes a ``BLOCK_M x BLOCK_N`` tile
of ``out``, and Triton spreads the tile's elements over the threads of its warps (each thread
holds a few). Each step of the loop over K multiplies a ``BLOCK_M x BLOCK_K`` slice of ``a`` by
a ``BLOCK_K x BLOCK_N`` slice of ``b`` as a broadcast product summed over K, in float64, on the
CUDA cores. ``BLOCK_K`` trades registers (the product holds ``BLOCK_M·BLOCK_K·BLOCK_N`` values)
against loop steps; the interpreter, which pays per step, likes it large.

``tl.dot`` is left out on purpose: whether it takes float64 depends on the Triton version and
the GPU, and this kernel must run the same under Triton 3.6 on an H100 and under the
interpreter on a laptop.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course_utils import env


@triton.jit
def fp64_gemm_kernel(a_ptr, b_ptr, out_ptr, M, N, K, stride_am, stride_bk, stride_om,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_ok = rows < M
    col_ok = cols < N
    # 64-bit row offsets: M * K may exceed 2^31
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :]
    b_ptrs = b_ptr + ks.to(tl.int64)[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + ks) < K  # the last slice of a K that is not a multiple of BLOCK_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    offsets = rows.to(tl.int64)[:, None] * stride_om + cols[None, :]
    tl.store(out_ptr + offsets, acc, mask=row_ok[:, None] & col_ok[None, :])


def gemm(a: torch.Tensor, b: torch.Tensor, tile: tuple[int, int, int] = (32, 32, 8),
         num_warps: int = 4) -> torch.Tensor:
    """``a @ b`` for contiguous float64 tensors (CUDA; CPU under ``TRITON_INTERPRET=1``)."""
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty((m, n), dtype=torch.float64, device=a.device)
    if m == 0 or n == 0:
        return out
    block_m, block_n, block_k = tile
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    # the interpreter ignores num_warps; compiled Triton spreads the tile over that many warps
    launch = {} if env.TRITON_INTERPRET else {"num_warps": num_warps}
    fp64_gemm_kernel[grid](a, b, out, m, n, k, a.stride(0), b.stride(0), out.stride(0),
                           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, **launch)
    return out
