"""Wrong answers to exercise distributed.one_shot, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "distributed.one_shot"
BLIND: dict[str, str] = {
        "no barrier after the last tile (a peer may still read my buffer)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every peer's input has landed
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
''',
        "accumulates in the buffer's dtype (bf16 added in bf16)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=out.dtype.element_ty)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask)
        tl.store(out + offsets, acc, mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
''',
        "each rank sums starting from its own buffer (a different order, different bits per rank)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for hop in tl.static_range(WORLD):  # my own buffer first (it is local), then the peers
            peer = (rank + hop) % WORLD
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
''',
        "writes the sum back into its own symmetric buffer too (peers may still be reading it)": r'''
# ✏️ Exercise distributed.one_shot: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of each rank's symmetric buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    mine = tl.load(buffer_ptrs + rank).to(tl.pointer_type(out.dtype.element_ty))
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        total = acc.to(out.dtype.element_ty)
        tl.store(out + offsets, total, mask=mask)
        tl.store(mine + offsets, total, mask=mask)  # in place as well, like an all-reduce
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
''',
    }
