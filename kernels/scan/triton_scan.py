"""Inclusive scan in Triton: ``tl.cumsum`` within a tile, reduce-then-scan across tiles.

A program owns one TILE of one row. Inside the tile, ``tl.cumsum(x, 0)``, which is
``tl.associative_scan(x, 0, add)``, is the whole block scan (Triton lowers it to the warp
shuffles and shared memory that the CUDA kernel spells out). Across tiles each tile needs the
sum of every tile before it in its row, and that is where the two providers differ:

* here, **reduce-then-scan**, three steps: every tile's total (:func:`tile_sums_kernel`), a scan
  of those totals (the same function on a tensor TILE times smaller, recursively), then every
  tile scanned again with its carry added (:func:`scan_tiles_kernel`). x is read twice and y
  written once, 3 bytes moved where a copy moves 2: at best 2/3 of the copy bandwidth.
* the CUDA kernel (``scan.cu``) does it in one pass with a **decoupled look-back**: a tile
  publishes its total, then waits for its predecessors' totals. That needs programs that wait
  for each other, which Triton promises nothing about (no forward-progress guarantee, no
  spin-wait primitive) and which the interpreter, running one program after another in its own
  order, cannot run at all. Reduce-then-scan needs no program to wait for another.
"""

import torch
import triton
import triton.language as tl

from kernels.gelu.triton_gelu import triton_device_check
from kernels.registry import register
from kernels.scan.op import DTYPES

TILE = 4096  # elements a program owns: a tile's scan in registers, 8 warps of 16 per thread
NUM_WARPS = 8


@triton.jit
def tile_sums_kernel(x_ptr, sums_ptr, cols, tiles, TILE: tl.constexpr):
    """sums[row, t] = the sum of tile t of row ``row`` (pass 1)."""
    row, tile = tl.program_id(0).to(tl.int64), tl.program_id(1)
    cols_here = tile * TILE + tl.arange(0, TILE)
    x = tl.load(x_ptr + row * cols + cols_here, mask=cols_here < cols, other=0)
    tl.store(sums_ptr + row * tiles + tile, tl.sum(x, axis=0))


@triton.jit
def scan_tiles_kernel(x_ptr, y_ptr, carry_ptr, cols, tiles, HAS_CARRY: tl.constexpr,
                      TILE: tl.constexpr):
    """y = the tile's own inclusive scan, plus the inclusive scan of the tile sums up to the
    tile before it (pass 3; one tile per row needs no carry)."""
    row, tile = tl.program_id(0).to(tl.int64), tl.program_id(1)
    cols_here = tile * TILE + tl.arange(0, TILE)
    inside = cols_here < cols
    x = tl.load(x_ptr + row * cols + cols_here, mask=inside, other=0)
    # tl.cumsum is tl.associative_scan(x, 0, <add>) with Triton's own add (its standard
    # library's definition); the interpreter runs that one as numpy's cumsum, a combine function
    # of ours one element at a time (4096 Python calls a tile)
    y = tl.cumsum(x, 0)
    if HAS_CARRY:
        # the carry tensor holds the scanned sums; tile 0 adds nothing (a masked load of 0)
        y += tl.load(carry_ptr + row * tiles + tile - 1, mask=tile > 0, other=0)
    tl.store(y_ptr + row * cols + cols_here, y, mask=inside)


def scan_rows(x: torch.Tensor) -> torch.Tensor:
    """The inclusive scan of each row of a contiguous 2-D ``x`` (the recursion's step)."""
    rows, cols = x.shape
    y = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return y
    tiles = -(-cols // TILE)
    warps = {"num_warps": NUM_WARPS} if x.is_cuda else {}
    carry = None
    if tiles > 1:
        sums = torch.empty(rows, tiles, dtype=x.dtype, device=x.device)
        tile_sums_kernel[(rows, tiles)](x, sums, cols, tiles, TILE=TILE, **warps)
        carry = scan_rows(sums)  # TILE times fewer elements: one more level per factor 4096
    scan_tiles_kernel[(rows, tiles)](x, y, carry if carry is not None else x, cols, tiles,
                                     HAS_CARRY=carry is not None, TILE=TILE, **warps)
    return y


@register("scan", "triton", dtypes=DTYPES, needs=("triton",), check=triton_device_check,
          contiguous=True,
          meta={"tile": TILE, "across_tiles": "reduce-then-scan (3 passes over x and y)"})
def scan_triton(x: torch.Tensor) -> torch.Tensor:
    """Triton: tl.cumsum in each 4096-element tile, tile sums scanned in between."""
    return scan_rows(x.view(1, -1) if x.dim() == 1 else x).view(x.shape)
