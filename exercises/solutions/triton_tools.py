"""Solutions (and known-wrong answers) of lesson 13, Triton's everyday tools."""

_HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"

SOLUTIONS = {
    "triton_tools.transpose": _HEAD + '''def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr,
                     BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    x = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    z = tl.make_tensor_descriptor(z_ptr, shape=[N, M], strides=[M, 1], block_shape=[BN, BM])
    tile = x.load([pm * BM, pn * BN])
    z.store([pn * BN, pm * BM], tl.trans(tile))
''',
}

# the same answer with block pointers, right: the base of two wrong ones below
_BLOCK_PTR = _HEAD + '''def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr,
                     BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    x = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(pm * BM, pn * BN),
                          block_shape=(BM, BN), order=(1, 0))
    z = tl.make_block_ptr(z_ptr, shape=(N, M), strides=(M, 1), offsets=(pn * BN, pm * BM),
                          block_shape=(BN, BM), order=(1, 0))
    tile = tl.load(x, boundary_check=(0, 1), padding_option="zero")
    tl.store(z, tl.trans(tile), boundary_check=(0, 1))
'''


def _edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"{old!r} is not in the answer")
    return source.replace(old, new)


_S = SOLUTIONS["triton_tools.transpose"]

WRONG = {
    "triton_tools.transpose": {
        # PyTorch, not a kernel
        "plain PyTorch": "def transpose_kernel(x_ptr, z_ptr, M, N, BM=16, BN=32):\n"
                         "    z_ptr.copy_(x_ptr.t())\n",
        # z described with x's shape and strides: rows of N where z's rows hold M
        "z with x's shape": _edit(_S, "shape=[N, M], strides=[M, 1]",
                                  "shape=[M, N], strides=[N, 1]"),
        # the strides swapped: a column-major x (the descriptor's last stride must be 1)
        "strides swapped": _edit(_S, "strides=[N, 1], block_shape=[BM, BN]",
                                 "strides=[1, N], block_shape=[BM, BN]"),
        # the tile stored where it was loaded: offsets not swapped for z
        "store offsets not swapped": _edit(_S, "z.store([pn * BN, pm * BM]",
                                           "z.store([pm * BM, pn * BN]"),
        # offsets counted in tiles, not elements
        "offsets in tiles": _edit(_S, "x.load([pm * BM, pn * BN])", "x.load([pm, pn])").replace(
            "z.store([pn * BN, pm * BM]", "z.store([pn, pm]"),
        # the descriptor declares one row more than x has: the last tile reads past x
        "descriptor a row too long": _edit(_S, "shape=[M, N]", "shape=[M + 1, N]"),
        # a block pointer whose load checks the columns only: the bottom tiles read past x
        "boundary_check on one dimension": _edit(_BLOCK_PTR, "tl.load(x, boundary_check=(0, 1)",
                                                 "tl.load(x, boundary_check=(1,)"),
        # a block pointer whose store checks nothing: the edge tiles write past z
        "store without boundary_check": _edit(_BLOCK_PTR,
                                              "tl.store(z, tl.trans(tile), boundary_check=(0, 1))",
                                              "tl.store(z, tl.trans(tile))"),
        # a tile shape assumed to divide the matrix: a block pointer with no boundary_check
        # at all (right only when BM divides M and BN divides N)
        "tiles assumed to divide": _edit(_BLOCK_PTR, "tl.load(x, boundary_check=(0, 1), "
                                         'padding_option="zero")', "tl.load(x)").replace(
            "tl.store(z, tl.trans(tile), boundary_check=(0, 1))", "tl.store(z, tl.trans(tile))"),
        # right, by pointer arithmetic: not the tool the exercise asks for
        "pointer arithmetic": _HEAD + '''def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr,
                     BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tile = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask)
    tl.store(z_ptr + cols[None, :] * M + rows[:, None], tile, mask=mask)
''',
    },
}
