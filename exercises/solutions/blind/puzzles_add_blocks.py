"""Wrong answers to exercise puzzles.add_blocks, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.add_blocks"
BLIND: dict[str, str] = {
        "no mask: the ragged last program reads and writes past the end": r'''
# ✏️ Exercise puzzles.add_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is
    ragged."""
    offsets = tl.program_id(0) * B0 + tl.arange(0, B0)
    tl.store(z_ptr + offsets, tl.load(x_ptr + offsets) + 10)
''',
        "mask on the store only: the load reads past the end": r'''
# ✏️ Exercise puzzles.add_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is
    ragged."""
    offsets = tl.program_id(0) * B0 + tl.arange(0, B0)
    x = tl.load(x_ptr + offsets)
    tl.store(z_ptr + offsets, x + 10, mask=offsets < N0)
''',
        "mask built from the lane index, not the global offset": r'''
# ✏️ Exercise puzzles.add_blocks: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    """z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is
    ragged."""
    lanes = tl.arange(0, B0)
    offsets = tl.program_id(0) * B0 + lanes
    mask = lanes < N0
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(z_ptr + offsets, x + 10, mask=mask)
''',
    }
