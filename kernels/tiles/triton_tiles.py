"""One tiled 2-D copy, ``z[m, n] = x[m, n]``, addressed three ways, and a kernel that shows what a
ragged tile holds.

Each program copies one ``BM x BN`` tile; a grid of ``(cdiv(M, BM), cdiv(N, BN))`` programs
covers the matrix, and the tiles at the bottom and right edges are ragged (they reach past the
matrix). The three ways differ in who handles that edge:

* **pointer arithmetic** (:func:`copy_pointers_kernel`): the kernel builds a ``BM x BN`` block
  of addresses and a 2-D mask itself, as in lesson 03;
* **a block pointer** (:func:`copy_block_ptr_kernel`): ``tl.make_block_ptr`` describes the
  parent tensor (shape, strides) and the tile (offsets, block shape, order); ``boundary_check``
  names the dimensions to mask and ``padding_option`` what the masked-off elements read as.
  Deprecated in Triton 3.8 (it warns, and lowers to the same masked pointers), current in 3.6;
* **a tensor descriptor** (:func:`copy_descriptor_kernel`): ``tl.make_tensor_descriptor`` with
  shape, strides and block shape; ``desc.load([row, col])`` and ``desc.store`` mask every
  dimension always. On Hopper this is a TMA descriptor: the base and every stride but the last
  must be 16-byte aligned and the last stride 1 (the interpreter asserts the same), and
  a kernel that builds one on the device needs scratch memory (:func:`use_torch_allocator`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course_utils import env


@triton.jit
def copy_pointers_kernel(x_ptr, z_ptr, M, N, x_row_stride, z_row_stride, BM: tl.constexpr,
                         BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows < M)[:, None] & (cols < N)[None, :]  # the ragged edges, both of them
    tile = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask)
    tl.store(z_ptr + rows[:, None] * z_row_stride + cols[None, :], tile, mask=mask)


@triton.jit
def copy_block_ptr_kernel(x_ptr, z_ptr, M, N, x_row_stride, z_row_stride, BM: tl.constexpr,
                          BN: tl.constexpr):
    at = (tl.program_id(0) * BM, tl.program_id(1) * BN)  # in elements, not tiles
    # order=(1, 0): dimension 1 (the columns) is the contiguous one
    x = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(x_row_stride, 1), offsets=at,
                          block_shape=(BM, BN), order=(1, 0))
    z = tl.make_block_ptr(z_ptr, shape=(M, N), strides=(z_row_stride, 1), offsets=at,
                          block_shape=(BM, BN), order=(1, 0))
    tile = tl.load(x, boundary_check=(0, 1), padding_option="zero")  # both edges masked
    tl.store(z, tile, boundary_check=(0, 1))


@triton.jit
def copy_descriptor_kernel(x_ptr, z_ptr, M, N, x_row_stride, z_row_stride, BM: tl.constexpr,
                           BN: tl.constexpr):
    x = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[x_row_stride, 1],
                                  block_shape=[BM, BN])
    z = tl.make_tensor_descriptor(z_ptr, shape=[M, N], strides=[z_row_stride, 1],
                                  block_shape=[BM, BN])
    at = [tl.program_id(0) * BM, tl.program_id(1) * BN]
    z.store(at, x.load(at))  # every dimension bounds-checked: nothing to say, nothing to forget


@triton.jit
def edge_tile_kernel(x_ptr, tile_ptr, M, N, x_row_stride, row, col, PADDING: tl.constexpr,
                     BM: tl.constexpr, BN: tl.constexpr):
    """Store the ``BM x BN`` tile of ``x`` at (``row``, ``col``), as a block pointer with
    ``padding_option=PADDING`` loads it, whole (padding included) into ``tile`` (BM x BN)."""
    x = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(x_row_stride, 1), offsets=(row, col),
                          block_shape=(BM, BN), order=(1, 0))
    tile = tl.load(x, boundary_check=(0, 1), padding_option=PADDING)
    out = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(tile_ptr + out, tile)


KERNELS = {"pointers": copy_pointers_kernel, "block pointer": copy_block_ptr_kernel,
           "tensor descriptor": copy_descriptor_kernel}


def _torch_scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def use_torch_allocator() -> None:
    """Give Triton scratch memory from PyTorch's allocator: a compiled kernel that calls
    ``tl.make_tensor_descriptor`` writes its descriptor to global memory first, and without an
    allocator Triton refuses to launch it ("Kernel requires a runtime memory allocation, but no
    allocator was set"). Nothing to do under the interpreter."""
    if not env.TRITON_INTERPRET:
        triton.set_allocator(_torch_scratch)


def descriptor_problem(x: torch.Tensor) -> str | None:
    """Why a tensor descriptor cannot address ``x`` (2-D), or None: the base address and the
    row stride 16-byte aligned, the columns contiguous (TMA's rules, asserted by the
    interpreter too)."""
    size = x.element_size()
    if x.stride(1) != 1:
        return f"needs contiguous columns, got x with strides {tuple(x.stride())}"
    if (x.stride(0) * size) % 16:
        return (f"needs a 16-byte aligned row stride, got {x.stride(0)} elements of {size} "
                f"bytes ({x.stride(0) * size} bytes)")
    if x.data_ptr() % 16:
        return "needs a 16-byte aligned base address (a view that starts mid-row may not be)"
    return None


def copy(x: torch.Tensor, way: str = "pointers", block: tuple[int, int] = (32, 32)
         ) -> torch.Tensor:
    """``x`` (2-D, columns contiguous) copied by the kernel of ``way`` (:data:`KERNELS`), one
    ``block`` tile per program."""
    if way not in KERNELS:
        raise ValueError(f"way expected one of {', '.join(map(repr, KERNELS))}, got {way!r}")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or (x.numel() and x.stride(1) != 1):
        raise ValueError(f"x expected a 2-D tensor with contiguous columns, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if way == "tensor descriptor" and x.numel() and (why := descriptor_problem(x)):
        raise ValueError(f"x: a tensor descriptor {why}")
    z = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return z
    (m, n), (bm, bn) = x.shape, block
    if way == "tensor descriptor":
        use_torch_allocator()
    KERNELS[way][(triton.cdiv(m, bm), triton.cdiv(n, bn))](x, z, m, n, x.stride(0), z.stride(0),
                                                          BM=bm, BN=bn)
    return z


def edge_tile(x: torch.Tensor, padding: str, block: tuple[int, int] = (8, 8)) -> torch.Tensor:
    """The bottom-right tile of ``x`` as a block pointer loads it with ``padding_option=padding``
    ("zero" or "nan"): what the elements past the edge read as."""
    if padding not in ("zero", "nan"):
        raise ValueError(f"padding expected 'zero' or 'nan', got {padding!r}")
    (m, n), (bm, bn) = x.shape, block
    tile = torch.empty(bm, bn, dtype=x.dtype, device=x.device)
    edge_tile_kernel[(1,)](x, tile, m, n, x.stride(0), (m - 1) // bm * bm, (n - 1) // bn * bn,
                           PADDING=padding, BM=bm, BN=bn)
    return tile
