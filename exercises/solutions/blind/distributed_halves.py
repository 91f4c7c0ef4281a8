"""Wrong answers to exercise distributed.halves, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "distributed.halves"
BLIND: dict[str, str] = {
        "never waits on the all-gather's handle": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    chunk = torch.empty(x.numel() // n, dtype=x.dtype, device=x.device)
    reduce_scatter(chunk, x)
    chunk /= n
    out = torch.empty_like(x)
    all_gather(out, chunk, async_op=True)  # the gather runs in the background
    return out
''',
        "chunk sized numel // 2 (a half: right for two ranks only)": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    half = torch.empty(x.numel() // 2, dtype=x.dtype, device=x.device)
    reduce_scatter(half, x)
    half /= n
    out = torch.empty_like(x)
    work = all_gather(out, half, async_op=True)
    work.wait()
    return out
''',
        "output buffers cached by length and reused between calls": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter

_BUFFERS = {}  # (numel, dtype) -> (chunk, out): no allocation after the first call


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    key = (x.numel(), x.dtype, x.device)
    if key not in _BUFFERS:
        _BUFFERS[key] = (torch.empty(x.numel() // n, dtype=x.dtype, device=x.device),
                         torch.empty_like(x))
    chunk, out = _BUFFERS[key]
    reduce_scatter(chunk, x)
    chunk /= n
    work = all_gather(out, chunk, async_op=True)
    work.wait()
    return out
''',
        "gathers into x itself: the caller's tensor is overwritten, no new tensor": r'''
# ✏️ Exercise distributed.halves: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x, as a new tensor, on every rank."""
    n = dist.get_world_size()
    chunk = torch.empty(x.numel() // n, dtype=x.dtype, device=x.device)
    reduce_scatter(chunk, x)
    chunk /= n
    work = all_gather(x, chunk, async_op=True)  # x is no longer needed: reuse its memory
    work.wait()
    return x
''',
    }
