"""Wrong answers to exercise distributed.fsdp_backward, written from its statement and stub
alone (see :mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "distributed.fsdp_backward"
_HEAD = r'''
# ✏️ Exercise distributed.fsdp_backward: edit this cell, run it, then run the check below
import torch
import torch.distributed as dist
import torch.nn.functional as F

from kernels.distributed.collectives import reduce_scatter

'''
BLIND: dict[str, str] = {
    "parameters laid end to end (parameter-major), not rank-major": _HEAD + r'''
def shard_gradients(unit, grads):
    """This rank's shards' gradients."""
    n = dist.get_world_size()
    flat = []
    for g, k, s in zip(grads, unit.numels, unit.sizes):
        flat.append(F.pad(g.float().reshape(-1), (0, n * s - k)))
    full = torch.cat(flat)
    out = torch.empty(full.numel() // n, dtype=torch.float32)
    reduce_scatter(out, full)
    out /= n
    unit.full = None
    return list(out.split(unit.sizes))
''',
    "one reduce-scatter per parameter": _HEAD + r'''
def shard_gradients(unit, grads):
    """This rank's shards' gradients."""
    n = dist.get_world_size()
    unit.full = None
    result = []
    for g, k, s in zip(grads, unit.numels, unit.sizes):
        padded = F.pad(g.to(torch.float32).flatten(), (0, n * s - k))
        mine = torch.zeros(s, dtype=torch.float32)
        reduce_scatter(mine, padded)
        result.append(mine / n)
    return result
''',
    "reduce-scattered in the gradients' dtype, widened afterwards": _HEAD + r'''
def shard_gradients(unit, grads):
    """This rank's shards' gradients."""
    n = dist.get_world_size()
    dtype = grads[0].dtype
    blocks = [F.pad(g.flatten(), (0, n * s - k)).view(n, s)
              for g, k, s in zip(grads, unit.numels, unit.sizes)]
    full = torch.cat(blocks, dim=1).reshape(-1)
    out = torch.empty(full.numel() // n, dtype=dtype)
    reduce_scatter(out, full)
    unit.full = None
    return [piece.float() / n for piece in out.split(unit.sizes)]
''',
    "padded once, at the end of the whole unit": _HEAD + r'''
def shard_gradients(unit, grads):
    """This rank's shards' gradients."""
    n = dist.get_world_size()
    flat = torch.cat([g.float().flatten() for g in grads])
    total = n * sum(unit.sizes)
    flat = F.pad(flat, (0, total - flat.numel()))
    full = flat.view(n, -1).reshape(-1)
    out = torch.empty(total // n)
    reduce_scatter(out, full)
    unit.full = None
    return list((out / n).split(unit.sizes))
''',
    "the sum over the ranks, not the mean": _HEAD + r'''
def shard_gradients(unit, grads):
    """This rank's shards' gradients."""
    n = dist.get_world_size()
    blocks = []
    for g, k, s in zip(grads, unit.numels, unit.sizes):
        blocks.append(F.pad(g.float().flatten(), (0, n * s - k)).view(n, s))
    full = torch.cat(blocks, dim=1).flatten()
    out = torch.empty(sum(unit.sizes))
    reduce_scatter(out, full)  # the mean over the ranks
    unit.full = None
    return list(out.split(unit.sizes))
''',
    "the output buffer kept between calls": _HEAD + r'''
_buffers = {}


def shard_gradients(unit, grads):
    """This rank's shards' gradients."""
    n = dist.get_world_size()
    blocks = [F.pad(g.float().flatten(), (0, n * s - k)).view(n, s)
              for g, k, s in zip(grads, unit.numels, unit.sizes)]
    full = torch.cat(blocks, dim=1).flatten()
    key = (id(unit), n)
    if key not in _buffers:
        _buffers[key] = torch.empty(full.numel() // n)
    out = _buffers[key]
    reduce_scatter(out, full)
    out.div_(n)
    unit.full = None
    return list(out.split(unit.sizes))
''',
}
