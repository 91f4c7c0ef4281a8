"""The Hopper matmul's Triton peer, the device code: :func:`tma_persistent_matmul_kernel` and the
grouped tile order it walks (:func:`tile_coordinates`).

One program per SM loads its tiles through TMA tensor descriptors (``desc.load``, zeros past the
edges), multiplies them with ``tl.dot`` (``wgmma`` on Hopper) and stores each output tile by TMA
or, where the rows are not 16-byte aligned, through masked pointers. Why each of these (TMA, a
persistent grid, the grouped order) is :mod:`kernels.matmul.hopper.triton_tma`'s docstring.

Separate from :mod:`~kernels.matmul.hopper.triton_tma`, which holds the host side (the tile
configurations, what a GPU and a problem allow, the descriptors and the launch, the registered
kernels): the kernels alone, as a student reads them beside ``wgmma.cu``, and
:func:`tile_coordinates` with them, which ``kernels/matmul/triton_dot.py`` calls too (one copy
of the grouped order).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_coordinates(tile, num_tiles_m, num_tiles_n, GROUP_M: tl.constexpr):
    """Tile number -> (tile row, tile column) in the grouped order: GROUP_M tile rows at a time,
    walked column by column, so tiles that run together share rows of a and columns of b."""
    tiles_per_group = GROUP_M * num_tiles_n
    first_row = (tile // tiles_per_group) * GROUP_M
    rows_in_group = min(num_tiles_m - first_row, GROUP_M)  # the last group may be shorter
    tile_m = first_row + (tile % tiles_per_group) % rows_in_group
    tile_n = (tile % tiles_per_group) // rows_in_group
    return tile_m, tile_n


@triton.jit
def tma_persistent_matmul_kernel(a_desc, bt_desc, c_desc, c_ptr, M, N, K, stride_cm,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                 NUM_SMS: tl.constexpr, TMA_STORE: tl.constexpr,
                                 EPILOGUE_SUBTILE: tl.constexpr):
    """out = a @ b, a from ``a_desc`` ([M, K]), b from ``bt_desc`` (b.t(): [N, K]); one program
    per SM, each walking the output tiles start, start + NUM_SMS, ... in grouped order."""
    start = tl.program_id(axis=0)
    num_tiles_m = tl.cdiv(M, BLOCK_M)
    num_tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_tiles_m * num_tiles_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    out_dtype = c_ptr.dtype.element_ty
    # The epilogue recomputes its tile from a counter of its own, as Triton's tutorial does:
    # with flatten=True the pipeliner moves loads of the next tile ahead of this tile's
    # epilogue, and the tutorial notes a pipelining bug when one value feeds both sides.
    tile_c = start - NUM_SMS

    # flatten=True: the tile loop and the K loop become one loop for the software pipeliner, so
    # the TMA ring never drains between two tiles of the same program
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=True):
        tile_m, tile_n = tile_coordinates(tile, num_tiles_m, num_tiles_n, GROUP_M)
        off_m = tile_m * BLOCK_M
        off_n = tile_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            # one TMA copy per operand per stage; rows past M or N and columns past K read 0
            a = a_desc.load([off_m, kk * BLOCK_K])
            bt = bt_desc.load([off_n, kk * BLOCK_K])
            # bt is [BLOCK_N, BLOCK_K], K-major: .T is a view, which wgmma reads as is (fp8
            # wgmma on sm_90 takes only K-major operands)
            acc = tl.dot(a, bt.T, acc)

        tile_c += NUM_SMS
        tile_m, tile_n = tile_coordinates(tile_c, num_tiles_m, num_tiles_n, GROUP_M)
        off_m = tile_m * BLOCK_M
        off_n = tile_n * BLOCK_N
        if TMA_STORE:
            # TMA stores clip the box at the matrix's edges: no masks here either
            if EPILOGUE_SUBTILE:
                halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
                left, right = tl.split(halves)
                c_desc.store([off_m, off_n], left.to(out_dtype))
                c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(out_dtype))
            else:
                c_desc.store([off_m, off_n], acc.to(out_dtype))
        else:
            # rows of out that are not 16-byte aligned (N * element size % 16 != 0) cannot be a
            # TMA destination: store through pointers with a mask instead
            rows = off_m + tl.arange(0, BLOCK_M)
            cols = off_n + tl.arange(0, BLOCK_N)
            ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :]
            tl.store(ptrs, acc.to(out_dtype), mask=(rows < M)[:, None] & (cols < N)[None, :])
