"""Wrong answers to exercise triton_tools.transpose, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "triton_tools.transpose"
BLIND: dict[str, str] = {
        "block pointers without boundary_check (ragged tiles run past the matrices)": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_block = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(p0 * BM, p1 * BN),
                                block_shape=(BM, BN), order=(1, 0))
    z_block = tl.make_block_ptr(z_ptr, shape=(N, M), strides=(M, 1), offsets=(p1 * BN, p0 * BM),
                                block_shape=(BN, BM), order=(1, 0))
    tile = tl.load(x_block)
    tl.store(z_block, tl.trans(tile))
''',
        "boundary_check on dimension 0 only": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_block = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(p0 * BM, p1 * BN),
                                block_shape=(BM, BN), order=(1, 0))
    z_block = tl.make_block_ptr(z_ptr, shape=(N, M), strides=(M, 1), offsets=(p1 * BN, p0 * BM),
                                block_shape=(BN, BM), order=(1, 0))
    tile = tl.load(x_block, boundary_check=(0,), padding_option="zero")
    tl.store(z_block, tl.trans(tile), boundary_check=(0,))
''',
        "z's tensor descriptor takes x's strides [N, 1]: right only when M == N": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    z_desc = tl.make_tensor_descriptor(z_ptr, shape=[N, M], strides=[N, 1], block_shape=[BN, BM])
    tile = x_desc.load([p0 * BM, p1 * BN])
    z_desc.store([p1 * BN, p0 * BM], tl.trans(tile))
''',
        "tile stored at the same (row, column) offsets it was loaded from, not swapped": r'''
# ✏️ Exercise triton_tools.transpose: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """z = x transposed (x: M x N, z: N x M, both row-major)."""
    p0 = tl.program_id(0)
    p1 = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    z_desc = tl.make_tensor_descriptor(z_ptr, shape=[N, M], strides=[M, 1], block_shape=[BN, BM])
    tile = x_desc.load([p0 * BM, p1 * BN])
    z_desc.store([p0 * BM, p1 * BN], tl.trans(tile))
''',
    }
