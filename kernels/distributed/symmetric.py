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
  bytes per rank whatever ``n``: the one for large messages.

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
import torch.distributed as dist
import triton
import triton.language as tl

METHODS = ("one_shot", "two_shot")
DTYPES = (torch.bfloat16, torch.float32)
BLOCK = 2048  # elements per tile: 8 per thread with 8 warps (16-byte loads in bf16)
NUM_WARPS = 8
# blocks of one launch: each needs one int32 slot per rank in every signal pad. One block
# carries a message up to BLOCK elements (4 KiB of bf16): the latency floor is one block's
# barrier and one pass; larger messages spread over more blocks, up to this many
MAX_BLOCKS = 64
SIGNAL_BYTES = 4


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
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """``out`` = the sum over ranks of the first ``numel`` elements of every rank's buffer."""
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every peer's input has landed
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel  # the last tile is ragged
        acc = tl.zeros([BLOCK], dtype=tl.float32)  # bf16 inputs summed in fp32, rounded once
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # no peer still reads my buffer


@triton.jit
def two_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, chunk, rank,
                    WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """The same sum in two steps over ``WORLD`` chunks of ``chunk`` elements (the last may be
    short or empty): reduce chunk ``rank`` into this rank's own buffer, then gather every
    rank's reduced chunk into ``out``. Block ``b`` handles the same tiles of each chunk in
    both steps, so it waits only for block ``b`` of the peers."""
    pid = tl.program_id(0)
    dtype = out.dtype.element_ty
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every peer's input has landed
    mine = tl.load(buffer_ptrs + rank).to(tl.pointer_type(dtype))
    begin = rank * chunk
    end = tl.minimum(begin + chunk, numel)
    start = begin + pid * BLOCK
    while start < end:  # reduce-scatter: my chunk, from every buffer
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < end
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(dtype))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(mine + offsets, acc.to(dtype), mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # every rank's chunk is reduced
    for peer in tl.static_range(WORLD):  # all-gather: each rank's reduced chunk
        buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(dtype))
        begin = peer * chunk
        end = tl.minimum(begin + chunk, numel)
        start = begin + pid * BLOCK
        while start < end:
            offsets = start + tl.arange(0, BLOCK)
            mask = offsets < end
            tl.store(out + offsets, tl.load(buf + offsets, mask=mask), mask=mask)
            start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)  # no peer still reads my buffer


def blocks_for(numel: int, method: str, world_size: int) -> int:
    """How many blocks a launch uses: one per tile of what each rank reads in one pass (all of
    the message for one-shot, a chunk for two-shot), at most :data:`MAX_BLOCKS`. A message of
    up to ``BLOCK`` elements is one block: one barrier's latency, one pass."""
    per_pass = numel if method == "one_shot" else triton.cdiv(numel, world_size)
    return max(1, min(MAX_BLOCKS, triton.cdiv(per_pass, BLOCK)))


def launch(buffer_ptrs: torch.Tensor, signal_pad_ptrs: torch.Tensor, out: torch.Tensor,
           numel: int, rank: int, world_size: int, method: str) -> None:
    """Launch one rank's kernel: ``out`` (``numel`` elements) = the sum of the first ``numel``
    elements of every rank's buffer. ``buffer_ptrs`` and ``signal_pad_ptrs``: int64 tensors of
    ``world_size`` addresses, on the kernel's device (or the CPU, in Triton's interpreter)."""
    grid = (blocks_for(numel, method, world_size),)
    if method == "one_shot":
        one_shot_kernel[grid](buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD=world_size,
                              BLOCK=BLOCK, num_warps=NUM_WARPS)
    else:
        two_shot_kernel[grid](buffer_ptrs, signal_pad_ptrs, out, numel,
                              triton.cdiv(numel, world_size), rank, WORLD=world_size,
                              BLOCK=BLOCK, num_warps=NUM_WARPS)


# --------------------------------------------------------------------------------------------
# On GPUs: PyTorch's symmetric memory
# --------------------------------------------------------------------------------------------


def symm_mem():
    """``torch.distributed._symmetric_memory``, or a RuntimeError saying why it cannot be used
    here (it needs CUDA GPUs, one per rank, in an NCCL process group)."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("symmetric memory needs a process group: call this inside a rank "
                           "started by launch.run")
    if dist.get_backend() != "nccl" or not torch.cuda.is_available():
        raise RuntimeError(f"symmetric memory needs CUDA GPUs (one per rank, NCCL); this rank "
                           f"runs {dist.get_backend()} on the CPU: symmetric_cpu.simulate shows "
                           f"the same steps, symmetric_cpu.run_interpreted runs the kernels")
    try:
        import torch.distributed._symmetric_memory as module
    except ImportError as why:
        raise RuntimeError(f"this torch ({torch.__version__}) has no symmetric memory: "
                           f"{why}") from None
    for name in ("empty", "rendezvous"):
        if not hasattr(module, name):
            raise RuntimeError(f"torch {torch.__version__}: torch.distributed._symmetric_memory "
                               f"has no {name}() (the course needs torch 2.11 or newer)")
    return module


class SymmetricBuffer:
    """``nbytes`` of symmetric memory on this rank's GPU, rendezvoused with every rank of
    ``group`` (a collective: every rank creates its buffer with the same size, in the same
    order). :meth:`view` is a tensor in it; the kernels read every rank's copy."""

    def __init__(self, nbytes: int, group: dist.ProcessGroup | None = None):
        module = symm_mem()
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise ValueError(f"nbytes expected a positive int, got {nbytes!r}")
        group = group or dist.group.WORLD
        device = torch.device("cuda", torch.cuda.current_device())
        self.nbytes = -(-nbytes // 16) * 16  # whole 16-byte words: vector loads stay aligned
        self.tensor = module.empty(self.nbytes, dtype=torch.uint8, device=device)
        self.handle = module.rendezvous(self.tensor, group.group_name)
        self.rank, self.world_size = self.handle.rank, self.handle.world_size
        slots = MAX_BLOCKS * self.world_size * SIGNAL_BYTES
        pad = getattr(self.handle, "signal_pad_size", None) or getattr(
            module, "get_signal_pad_size", lambda: None)()
        if pad is not None and pad < slots:
            raise RuntimeError(f"the signal pads hold {pad} bytes; the kernels need {slots} "
                               f"({MAX_BLOCKS} blocks × {self.world_size} ranks × 4 bytes)")
        # buffer_ptrs are the bases of the peers' allocations; this tensor may start further
        # in (a memory pool), at the same offset on every rank
        offset = self.tensor.data_ptr() - self.handle.buffer_ptrs[self.rank]
        self.buffer_ptrs = torch.tensor([p + offset for p in self.handle.buffer_ptrs],
                                        dtype=torch.int64, device=device)
        self.signal_pad_ptrs = torch.tensor(self.handle.signal_pad_ptrs, dtype=torch.int64,
                                            device=device)

    def view(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """The first ``numel`` elements of this rank's buffer as ``dtype``."""
        size = torch.tensor([], dtype=dtype).element_size()
        if numel * size > self.nbytes:
            raise ValueError(f"numel expected at most {self.nbytes // size} {dtype} elements "
                             f"(the buffer holds {self.nbytes} bytes), got {numel}")
        return self.tensor[:numel * size].view(dtype)


_buffers: dict[tuple[str, int], SymmetricBuffer] = {}


def buffer_for(nbytes: int, group: dist.ProcessGroup | None = None) -> SymmetricBuffer:
    """This group's cached buffer, replaced by a larger one when ``nbytes`` exceeds it (every
    rank asks for the same sizes in the same order, as any collective does)."""
    group = group or dist.group.WORLD
    key = (group.group_name, torch.cuda.current_device())
    if key not in _buffers or _buffers[key].nbytes < nbytes:
        _buffers[key] = SymmetricBuffer(max(nbytes, 1 << 20), group)
    return _buffers[key]


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
               buffer: SymmetricBuffer | None = None) -> torch.Tensor:
    """(Inside a rank.) The sum over every rank of ``t``, as a new tensor, computed by the
    course's kernel ``method`` (``"one_shot"`` or ``"two_shot"``). ``t`` is copied into the
    symmetric ``buffer`` (this group's cached one by default) unless it already is
    ``buffer.view(...)``: then the call is the kernel alone."""
    check_input(t, method)
    symm_mem()  # RuntimeError on a CPU or gloo rank, before anything else
    if t.device.type != "cuda":
        raise ValueError(f"t expected a CUDA tensor (symmetric memory is GPU memory), got "
                         f"{t.device}")
    out = torch.empty_like(t)
    if t.numel() == 0:
        return out
    if buffer is None:
        buffer = buffer_for(t.numel() * t.element_size())
    elif t.numel() * t.element_size() > buffer.nbytes:
        raise ValueError(f"t expected at most {buffer.nbytes} bytes (the symmetric buffer's "
                         f"size), got {t.numel() * t.element_size()}: pass a larger buffer")
    if t.data_ptr() != buffer.tensor.data_ptr():
        buffer.view(t.numel(), t.dtype).copy_(t.view(-1))
    launch(buffer.buffer_ptrs, buffer.signal_pad_ptrs, out, t.numel(), buffer.rank,
           buffer.world_size, method)
    return out
