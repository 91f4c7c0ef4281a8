"""On GPUs: PyTorch's symmetric memory, as the course's all-reduces use it.

:func:`symm_mem` is ``torch.distributed._symmetric_memory``, or a RuntimeError saying why it
cannot be used here; :class:`SymmetricBuffer` is one rank's buffer, rendezvoused with every rank
of a group: the peers' buffer addresses and signal pads as int64 tensors on the GPU, the blocks
a launch may use (bounded by the pads), and tensor views of the buffer; :func:`buffer_for` is a
group's cached one.

Separate from :mod:`kernels.distributed.symmetric`, which holds the kernels, their launch and the
all-reduce on top: this part is the memory the kernels read, and only GPUs have it (on a CPU,
:class:`kernels.distributed.symmetric_cpu.SharedBuffers` plays its part). ``symmetric`` imports
these names, so ``symmetric.SymmetricBuffer`` works as before.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

# blocks of one launch: at most two per SM of an H100 (132), so every block is resident at once
# (a block spins in its barrier until block b of every peer arrives: none may wait for an SM).
# Each block needs one int32 slot per rank in every signal pad: 256 × 8 ranks × 4 bytes fits
# PyTorch's default pad (32 × 72 × 4 = 9216 bytes); a smaller pad gets fewer blocks
MAX_BLOCKS = 256
SIGNAL_BYTES = 4


def symm_mem():
    """``torch.distributed._symmetric_memory``, or a RuntimeError saying why it cannot be used
    here (it needs CUDA GPUs, one per rank, in an NCCL process group)."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("symmetric memory needs a process group: call this inside a rank "
                           "started by launch.run")
    if dist.get_backend() != "nccl" or not torch.cuda.is_available():
        raise RuntimeError(f"symmetric memory needs CUDA GPUs (one per rank, NCCL); this rank "
                           f"runs {dist.get_backend()} on the CPU: symmetric_cpu.simulate shows "
                           f"the same steps, symmetric_cpu.run runs the kernels in Triton's "
                           f"interpreter")
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
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.nbytes = -(-nbytes // 16) * 16  # whole 16-byte words: vector loads stay aligned
        self.tensor = module.empty(self.nbytes, dtype=torch.uint8, device=self.device)
        self.handle = module.rendezvous(self.tensor, group.group_name)
        self.rank, self.world_size = self.handle.rank, self.handle.world_size
        # the pads' size bounds the blocks: one int32 slot per block and rank
        pad = getattr(self.handle, "signal_pad_size", None) or getattr(
            module, "get_signal_pad_size", lambda: None)()
        self.max_blocks = MAX_BLOCKS if pad is None else min(
            MAX_BLOCKS, pad // (SIGNAL_BYTES * self.world_size))
        if self.max_blocks < 1:
            raise RuntimeError(f"the signal pads hold {pad} bytes: not one int32 slot per rank "
                               f"({self.world_size} ranks)")
        # buffer_ptrs are the bases of the peers' allocations; this tensor may start further
        # in (a memory pool), at the same offset on every rank
        offset = self.tensor.data_ptr() - self.handle.buffer_ptrs[self.rank]
        addresses = [p + offset for p in self.handle.buffer_ptrs]
        if any(a % 16 for a in addresses):  # the kernels promise Triton 16-byte alignment
            raise RuntimeError(f"symmetric buffers at {[hex(a) for a in addresses]}: the "
                               f"kernels need every one 16-byte aligned")
        self.buffer_ptrs = torch.tensor(addresses, dtype=torch.int64, device=self.device)
        self.signal_pad_ptrs = torch.tensor(self.handle.signal_pad_ptrs, dtype=torch.int64,
                                            device=self.device)
        self._views: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    def view(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """The first ``numel`` elements of this rank's buffer as ``dtype`` (made once per
        ``(numel, dtype)``: an eager all-reduce asks for it on every call)."""
        found = self._views.get((numel, dtype))
        if found is not None:
            return found
        size = torch.tensor([], dtype=dtype).element_size()
        if numel * size > self.nbytes:
            raise ValueError(f"numel expected at most {self.nbytes // size} {dtype} elements "
                             f"(the buffer holds {self.nbytes} bytes), got {numel}")
        if len(self._views) >= 256:  # a long sweep of lengths must not grow it forever
            self._views.clear()
        self._views[numel, dtype] = self.tensor[:numel * size].view(dtype)
        return self._views[numel, dtype]


_buffers: dict[tuple[str, int], SymmetricBuffer] = {}


def buffer_for(nbytes: int, group: dist.ProcessGroup | None = None) -> SymmetricBuffer:
    """This group's cached buffer, replaced by a larger one when ``nbytes`` exceeds it (every
    rank asks for the same sizes in the same order, as any collective does)."""
    group = group or dist.group.WORLD
    key = (group.group_name, torch.cuda.current_device())
    if key not in _buffers or _buffers[key].nbytes < nbytes:
        _buffers[key] = SymmetricBuffer(max(nbytes, 1 << 20), group)
    return _buffers[key]
