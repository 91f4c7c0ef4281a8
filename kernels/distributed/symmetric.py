"""All-reduces that read the peers' memory directly, one-shot and two-shot, over symmetric memory.

NCCL's all-reduce costs tens of µs on two NVLink GPUs whatever the message up to a MiB: that is
its machinery (proxy threads, channels, a protocol per size), not the link. With *symmetric
memory* every rank allocates the same buffer and maps every peer's into its own address space
(``torch.distributed._symmetric_memory``: ``empty``, then ``rendezvous`` hands back the peers'
buffer addresses and a *signal pad* per rank, a small array of int32 that peers may write). A
kernel can then load a peer's input as if it were its own memory, over NVLink:

* **one-shot**: each rank reads all ``n`` buffers and sums them; ``n·size`` bytes read per rank,
  one step: the fastest for small messages;
* **two-shot**: rank ``r`` sums only chunk ``r`` of every buffer and writes it back into its own
  buffer (a reduce-scatter), then reads each peer's finished chunk (an all-gather); ``2·size``
  bytes per rank whatever ``n``: the one for large messages;
* **two-shot push**: the same chunks, but rank ``r`` *writes* its reduced chunk into chunk ``r``
  of every rank's buffer, so that after one barrier each rank's own buffer holds the whole sum:
  the gather is a local read (none at all in place), and a barrier fewer (PyTorch's in-place
  ``two_shot_all_reduce_`` is built so).

Before reading a peer's buffer a rank must know the peer's input has landed, and before a rank
returns (and its caller writes the next input into the buffer) it must know no peer still reads
it: a **barrier** on the signal pads at the start and at the end, one per block (block ``b`` of
every rank meets block ``b`` of every other). A rank *sends* to peer ``p`` by swapping ``p``'s
slot ``[b, rank]`` from 0 to 1 with **release** semantics at **system** scope (everything this
block wrote or read before is ordered before the flag, for a reader on another GPU), and *waits*
for ``p`` by swapping its own slot ``[b, p]`` back from 1 to 0 with **acquire** semantics (what
``p`` did before it signalled is visible after). Both spin on a compare-and-swap, so a slot is a
token: a second signal waits until the first is taken, and the pads are all zero again at the
end (PyTorch's contract for signal pads).

Why Triton and not CUDA through NVRTC: the kernel is a few loads and adds around two barriers,
which Triton says in a dozen lines (a peer's pointer is loaded from the int64 pointer array and
cast with ``.to(tl.pointer_type(...))``; ``tl.atomic_cas(..., sem=, scope="sys")`` is the
signal), and Triton's interpreter runs the *same* kernel on a laptop:
:mod:`kernels.distributed.symmetric_cpu` maps each rank's buffer into every rank as shared
memory, and two CPU processes then run these kernels, barriers and all, so a student without
GPUs checks the real protocol. (Scalar atomics in Triton are issued by one thread of the block,
which then broadcasts the result; a ``tl.debug_barrier()`` before sending makes the whole
block's reads and writes come first, as ``__syncthreads()`` does before PyTorch's own CUDA
barrier.)

NVLink *multicast* (NVLS: one ``multimem`` store reaching every GPU, a reduction in the switch)
is off on the course's machines; nothing here uses it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.distributed.symmetric_buffer import (
    MAX_BLOCKS,
    SIGNAL_BYTES,  # noqa: F401  (read from here: tests/test_symmetric.py)
    SymmetricBuffer,
    buffer_for,
    symm_mem,
)
from kernels.triton_launch import Launcher, cdiv

METHODS = ("one_shot", "two_shot", "two_shot_push")
DTYPES = (torch.bfloat16, torch.float32)
BLOCK = 2048  # elements per tile: 8 per thread with 8 warps (one 16-byte load per peer in bf16)
NUM_WARPS = 8
# every tile and every two-shot chunk starts at a multiple of ALIGN elements (32 bytes of bf16):
# with 16-byte aligned buffers, each thread's 8 (bf16) or 4 (fp32) elements are one vector load
ALIGN = 16



@triton.jit
def barrier(signal_pad_ptrs, block, rank, WORLD: tl.constexpr):
    """Block ``block`` of this rank meets block ``block`` of every peer: what each did before
    the barrier is visible to all after it."""
    tl.debug_barrier()  # every thread of the block is done with what came before
    for peer in tl.static_range(WORLD):
        if peer != rank:
            pad = tl.load(signal_pad_ptrs + peer).to(tl.pointer_type(tl.int32))
            # send: 0 -> 1 in the peer's slot [block, rank]; release: my earlier reads and
            # writes happen before the peer sees the 1 (spins while an older signal is unread)
            while tl.atomic_cas(pad + block * WORLD + rank, 0, 1, sem="release",
                                scope="sys") != 0:
                pass
    mine = tl.load(signal_pad_ptrs + rank).to(tl.pointer_type(tl.int32))
    for peer in tl.static_range(WORLD):
        if peer != rank:
            # wait: 1 -> 0 in my slot [block, peer]; acquire: the peer's earlier writes are
            # visible to my loads after this
            while tl.atomic_cas(mine + block * WORLD + peer, 1, 0, sem="acquire",
                                scope="sys") != 1:
                pass
    tl.debug_barrier()


@triton.jit
def peer_buffer(buffer_ptrs, peer, out):
    """Rank ``peer``'s symmetric buffer, as a pointer to ``out``'s element type. Triton cannot
    see the alignment of an address it loads from memory, and issues a 16-byte vector load only
    where it knows the address is a multiple of 16 bytes: the wrappers check that every buffer
    is, and ``tl.multiple_of`` tells the compiler."""
    ptr = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
    return tl.multiple_of(ptr, 16)


@triton.jit
def tile(start, BLOCK: tl.constexpr):
    """The ``BLOCK`` contiguous offsets from ``start``, which the launch makes a multiple of
    ``ALIGN``: said to the compiler, so that each thread's elements become vector loads."""
    return tl.multiple_of(start, 16) + tl.arange(0, BLOCK)


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """``out`` = the sum over ranks of the first ``numel`` elements of every rank's buffer.
    Block ``pid`` takes tiles ``pid``, ``pid + grid``, ``pid + 2·grid``, ...: at every step the
    blocks together read one contiguous stretch of the message."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every peer's input has landed
    # (a while loop, not range(): Triton 3.6's interpreter cannot range over a program id)
    start = pid * BLOCK
    while start < numel:
        offsets = tile(start, BLOCK)
        mask = offsets < numel  # the last tile is ragged
        acc = tl.zeros([BLOCK], dtype=tl.float32)  # bf16 inputs summed in fp32, rounded once
        for peer in tl.static_range(WORLD):  # in rank order on every rank: the same sum
            acc += tl.load(peer_buffer(buffer_ptrs, peer, out) + offsets,
                           mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # no peer still reads my buffer


@triton.jit
def sum_of_ranks(buffer_ptrs, offsets, mask, out, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """The tile ``offsets`` of every rank's buffer, summed in fp32 in rank order (the same sum
    on every rank) and rounded once to ``out``'s dtype: the one-shot's loop body, which the
    two-shots share (the one-shot keeps it written out: it is exercise distributed.one_shot's
    answer)."""
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for peer in tl.static_range(WORLD):
        acc += tl.load(peer_buffer(buffer_ptrs, peer, out) + offsets, mask=mask).to(tl.float32)
    return acc.to(out.dtype.element_ty)


@triton.jit
def copy_chunk(src, out, index, chunk, numel, BLOCK: tl.constexpr):
    """Chunk ``index`` (elements ``index·chunk`` up to the next chunk or ``numel``) of ``src``
    into the same place in ``out``, block ``pid`` taking tiles ``pid``, ``pid + grid``, ...:
    the two-shots' gather of a reduced chunk, from a peer's buffer or from this rank's own."""
    begin = index * chunk
    end = tl.minimum(begin + chunk, numel)
    start = begin + tl.program_id(0) * BLOCK
    while start < end:
        offsets = tile(start, BLOCK)
        mask = offsets < end
        tl.store(out + offsets, tl.load(src + offsets, mask=mask), mask=mask)
        start += tl.num_programs(0) * BLOCK


@triton.jit
def two_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, chunk, rank,
                    WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """The same sum in two steps over ``WORLD`` chunks of ``chunk`` elements (a multiple of
    ``ALIGN``; the last chunks may be short or empty): reduce chunk ``rank`` of every buffer
    into ``out`` and into this rank's own buffer, then copy every peer's reduced chunk into
    ``out``. Block ``b`` takes the same tiles of each chunk in both steps (every rank launches
    the same grid), so it waits only for block ``b`` of the peers."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every peer's input has landed
    mine = peer_buffer(buffer_ptrs, rank, out)
    begin = rank * chunk
    end = tl.minimum(begin + chunk, numel)
    start = begin + pid * BLOCK
    while start < end:  # reduce-scatter: my chunk
        offsets = tile(start, BLOCK)
        mask = offsets < end
        total = sum_of_ranks(buffer_ptrs, offsets, mask, out, WORLD, BLOCK)
        tl.store(out + offsets, total, mask=mask)  # my part of the answer
        tl.store(mine + offsets, total, mask=mask)  # and for the peers to read
        start += step
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every rank's chunk is reduced
    for hop in tl.static_range(1, WORLD):  # all-gather: the peers' chunks, from rank + 1 on
        peer = (rank + hop) % WORLD  # (so that the ranks do not all read rank 0 first)
        copy_chunk(peer_buffer(buffer_ptrs, peer, out), out, peer, chunk, numel, BLOCK)
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # no peer still reads my buffer


@triton.jit
def two_shot_push_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, chunk, rank,
                         WORLD: tl.constexpr, BLOCK: tl.constexpr, IN_PLACE: tl.constexpr):
    """The two-shot's sum with its all-gather turned around: rank ``rank`` reduces chunk
    ``rank`` of every buffer and *pushes* the result into chunk ``rank`` of every rank's buffer
    (its own included), so that after the second barrier its own buffer holds every reduced
    chunk. ``IN_PLACE``: ``out`` is this rank's buffer, and that is the answer; else the
    reduced chunk goes into ``out`` as well and the peers' chunks are copied in from the own
    buffer, a local read. Two barriers, as PyTorch's ``two_shot_all_reduce_``: no rank reads
    what another writes between them (rank ``p`` reads only chunk ``p`` of each buffer, and
    only rank ``p`` writes chunk ``p``), so the pull version's middle barrier has no job.
    (PyTorch's first barrier is relaxed, as the inputs were written by work that finished
    before the kernel began; the course's one barrier orders both ways: a fence where this
    block has written nothing yet.)"""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    # every peer's input has landed (I read chunk `rank` of it), and my pushes cannot land
    # before a peer's caller has copied its input in (its copy would overwrite them)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    begin = rank * chunk
    end = tl.minimum(begin + chunk, numel)
    start = begin + pid * BLOCK
    while start < end:  # reduce my chunk, push it everywhere
        offsets = tile(start, BLOCK)
        mask = offsets < end
        total = sum_of_ranks(buffer_ptrs, offsets, mask, out, WORLD, BLOCK)
        for hop in tl.static_range(WORLD):  # from rank + 1 on: not every rank into rank 0 first
            theirs = peer_buffer(buffer_ptrs, (rank + 1 + hop) % WORLD, out)
            tl.store(theirs + offsets, total, mask=mask)
        if not IN_PLACE:
            tl.store(out + offsets, total, mask=mask)  # my part of the answer
        start += step
    # every peer's pushes into my buffer have landed (the sum is whole in it), and no peer
    # reads my buffer any more: my caller may return it, or write the next input into it
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    if not IN_PLACE:  # the peers' chunks, from my own buffer: nobody writes them until my
        mine = peer_buffer(buffer_ptrs, rank, out)  # next call's first barrier
        for hop in tl.static_range(1, WORLD):
            copy_chunk(mine, out, (rank + hop) % WORLD, chunk, numel, BLOCK)


def chunk_for(numel: int, world_size: int) -> int:
    """The two-shot's chunk: ``numel / world_size`` rounded up to a multiple of ``ALIGN``, so
    that every chunk starts 16-byte aligned (the last chunks short or empty)."""
    return cdiv(cdiv(numel, world_size), ALIGN) * ALIGN


def blocks_for(numel: int, method: str, world_size: int, max_blocks: int = MAX_BLOCKS) -> int:
    """How many blocks a launch uses: one per tile of what each rank reads in one pass (all of
    the message for one-shot, a chunk for two-shot), at most ``max_blocks``; more tiles than
    that and each block loops. A message of up to ``BLOCK`` elements is one block: one
    barrier's latency, one pass."""
    per_pass = numel if method == "one_shot" else chunk_for(numel, world_size)
    return max(1, min(max_blocks, cdiv(per_pass, BLOCK)))


# A launch plan per problem (kernels/triton_launch.py): the grid, the sizes and the compiled
# kernel are worked out on a problem's first call; every later call passes its three tensors
# to Triton's C launcher (in the interpreter, kernel[grid] each call)
_launchers = {"one_shot": Launcher(one_shot_kernel), "two_shot": Launcher(two_shot_kernel),
              "two_shot_push": Launcher(two_shot_push_kernel)}


def launch(buffer_ptrs: torch.Tensor, signal_pad_ptrs: torch.Tensor, out: torch.Tensor,
           numel: int, rank: int, world_size: int, method: str,
           max_blocks: int = MAX_BLOCKS, in_place: bool = False) -> None:
    """Launch one rank's kernel: ``out`` (``numel`` elements) = the sum of the first ``numel``
    elements of every rank's buffer. ``buffer_ptrs`` and ``signal_pad_ptrs``: int64 tensors of
    ``world_size`` addresses, on the kernel's device (or the CPU, in Triton's interpreter);
    every buffer 16-byte aligned, every pad of at least ``max_blocks × world_size`` int32.
    ``in_place`` (``two_shot_push`` only): ``out`` is this rank's own buffer."""
    if in_place and method != "two_shot_push":
        raise ValueError(f"in_place expected False for {method}: only two_shot_push sums in "
                         f"place (the others' peers still read the buffer while out is written)")

    def make():  # once per problem: reads only what the key below holds
        grid = (blocks_for(numel, method, world_size, max_blocks),)
        sizes = (numel, rank) if method == "one_shot" else \
            (numel, chunk_for(numel, world_size), rank)
        meta = {"WORLD": world_size, "BLOCK": BLOCK, "num_warps": NUM_WARPS}
        if method == "two_shot_push":
            meta["IN_PLACE"] = in_place
        return grid, sizes, meta

    _launchers[method]((method, numel, rank, world_size, max_blocks, in_place),
                       (buffer_ptrs, signal_pad_ptrs, out), make)



# --------------------------------------------------------------------------------------------
# On GPUs: the all-reduce over PyTorch's symmetric memory (symmetric_buffer.py holds the memory)
# --------------------------------------------------------------------------------------------


def check_input(t, method: str) -> None:
    """ValueError naming what is wrong with an all-reduce's input (any device)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"t expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in DTYPES:
        raise ValueError(f"t expected dtype bfloat16 or float32, got {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"t expected a contiguous tensor, got strides {t.stride()} for "
                         f"shape {tuple(t.shape)}: call .contiguous() first")
    if method not in METHODS:
        raise ValueError(f"method expected one of {', '.join(METHODS)}, got {method!r}")


def all_reduce(t: torch.Tensor, method: str = "one_shot",
               buffer: SymmetricBuffer | None = None, in_place: bool = False) -> torch.Tensor:
    """(Inside a rank.) The sum over every rank of ``t``, as a new tensor, computed by the
    course's kernel ``method`` (one of ``METHODS``). ``t`` is copied into the symmetric
    ``buffer`` (this group's cached one by default) unless it already is ``buffer.view(...)``:
    then the call is the kernel alone. ``in_place`` (``two_shot_push`` only, ``t`` the buffer's
    view): the sum is left in ``t`` and ``t`` returned, as PyTorch's ``two_shot_all_reduce_``.

    Called eagerly, what the GPU waits for is this function's Python: with a ``buffer`` given,
    a few checks, ``empty_like`` and the launch plan's lookup (the grid, sizes and compiled
    kernel of this length, dtype and rank were worked out on its first call)."""
    check_input(t, method)
    if in_place and method != "two_shot_push":
        raise ValueError(f"in_place expected False for {method}: only two_shot_push sums in "
                         f"place (the others' peers still read the buffer while out is written)")
    if buffer is None:
        symm_mem()  # RuntimeError on a CPU or gloo rank, before anything else
        if not t.is_cuda:
            raise ValueError(f"t expected a CUDA tensor (symmetric memory is GPU memory), "
                             f"got {t.device}")
        buffer = buffer_for(t.numel() * t.element_size())
    elif t.device != buffer.device:
        raise ValueError(f"t expected a tensor on the buffer's device {buffer.device}, got "
                         f"{t.device}")
    in_buffer = t.data_ptr() == buffer.tensor.data_ptr()
    if in_place and not in_buffer:
        raise ValueError("t expected the symmetric buffer's own view (buffer.view(numel, "
                         "dtype)) with in_place=True: the sum is left in the buffer")
    out = t if in_place else torch.empty_like(t)
    numel = t.numel()
    if numel == 0:
        return out
    if numel * t.element_size() > buffer.nbytes:
        raise ValueError(f"t expected at most {buffer.nbytes} bytes (the symmetric buffer's "
                         f"size), got {numel * t.element_size()}: pass a larger buffer")
    if not in_buffer:
        buffer.view(numel, t.dtype).copy_(t.view(-1))
    launch(buffer.buffer_ptrs, buffer.signal_pad_ptrs, out, numel, buffer.rank,
           buffer.world_size, method, buffer.max_blocks, in_place)
    return out
