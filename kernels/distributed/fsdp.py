"""Fully sharded data parallelism (FSDP, ZeRO-3) by hand, on lesson 12's model.

Data parallelism (:mod:`~kernels.distributed.data_parallel`) keeps the whole model on every rank:
fp32 weights, gradients and AdamW's two moments, 16 bytes a weight (ZeRO-1 divides the moments
only). FSDP divides all four by the rank count ``n``, and has the whole weights only while a
part of the model computes:

* **shards**: each parameter flattened, padded with zeros to a multiple of ``n`` and cut in
  ``n``; rank ``r`` keeps piece ``r``, in fp32, as an ``nn.Parameter``. The shards are what the
  optimizer steps (the fp32 master weights), so its state is sharded with them;
* **units**: the parameters are grouped (here each Transformer block is a unit, and the rest,
  the embeddings and the final norm, the *root* unit); one all-gather per unit brings its whole
  parameters just before the unit's forward, and they are dropped right after it;
* **backward**: :class:`_Gather` is an autograd Function whose forward is the unit's
  all-gather and whose backward is its transpose, a reduce-scatter: the whole gradients
  averaged over the ranks, each rank receiving its shards' part, straight into the shards'
  ``.grad``;
* ``compute_dtype`` (bf16, say): the shards cast before the all-gather (half the bytes moved;
  the forward and backward in bf16), the gradients widened to fp32 before the reduce-scatter
  (the sum over ranks in fp32), the optimizer on the fp32 shards (torch's
  ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``).

**Keeping the whole parameters out of the autograd graph.** Ops save tensors for their
backward: ``F.linear`` saves its weight. Left alone, the graph would keep every unit's gathered
weights from its forward to its backward: the whole model at the end of the forward, which FSDP
exists to avoid. A pair of ``torch.autograd.graph.saved_tensors_hooks`` around the forward
stores, in place of a saved tensor that is (a view of) a gathered parameter, a note (the unit,
the parameter, the view's offset, sizes and strides); unpacking the note in the backward gathers
the unit again if it is not there, and the unit's reduce-scatter drops it again. (torch's FSDP
frees the gathered memory instead, resizing its storage to 0 bytes, and gathers again into it
in a pre-backward hook: the same memory saved; here it is plain Python references.)

What it saves: between a unit's forward and its backward this rank holds only its shards of
the unit, and at any moment whole parameters of at most the root unit and one block. What it
does not: the activations (each rank keeps its own batch's, as in DDP: activation
checkpointing is that tool); gathering a unit briefly costs twice its size (the all-gather's
rank-major output, then each parameter's own copy); the root unit (with the token embedding,
tied to the head) stays whole from the start of the forward to its end, and in the backward
from the head to the embeddings; and nothing is prefetched (torch's FSDP gathers the next unit
while this one computes): every all-gather here waits in line, twice per unit and step.
"""

from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from kernels.distributed import launch
from kernels.distributed.data_parallel import broadcast_state, rank_slice, state_bytes, tensor_bytes
from kernels.model import TINY, Trainer, Transformer, batch

# torch 2.14 renamed the single-tensor collectives (the old names warn; torch 2.11 has only
# them). gloo has both, AVG for the reduce-scatter included (checked on torch 2.14.1); a gloo
# without them would need an all-reduce of the whole buffer, keeping this rank's slice (twice
# a reduce-scatter's traffic). NCCL's is the real one: a ring, (n-1)/n of the buffer per rank
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class Unit:
    """Parameters gathered together: their shards, and where the whole parameters go (every
    ``(module, attribute)`` that held one: tied parameters are held twice) while they exist."""

    def __init__(self, params: list[nn.Parameter], slots: list[list[tuple[nn.Module, str]]],
                 compute_dtype: torch.dtype):
        n, rank = dist.get_world_size(), dist.get_rank()
        self.shapes = [p.shape for p in params]
        self.numels = [p.numel() for p in params]
        self.sizes = [math.ceil(k / n) for k in self.numels]  # each shard's length
        self.slots, self.dtype = slots, compute_dtype
        self.shards = [nn.Parameter(F.pad(p.detach().float().flatten(), (0, s * n - k))
                                    .view(n, s)[rank].clone(), requires_grad=p.requires_grad)
                       for p, k, s in zip(params, self.numels, self.sizes, strict=True)]
        self.full: list[torch.Tensor] | None = None  # the whole parameters, while they exist

    def gather(self, dtype: torch.dtype | None = None) -> list[torch.Tensor]:
        """The whole parameters, in ``dtype`` (the compute dtype unless given): one all-gather
        of every rank's shards side by side."""
        n, dtype = dist.get_world_size(), dtype or self.dtype
        mine = torch.cat([s.detach() for s in self.shards]).to(dtype)
        out = torch.empty(n * mine.numel(), dtype=dtype, device=mine.device)
        _all_gather(out, mine)
        # out is rank-major, [rank 0's shards | rank 1's | ...]: a parameter is its (n, size)
        # block of columns read row by row (a copy: a contiguous tensor of its own)
        blocks = out.view(n, -1).split(self.sizes, dim=1)
        return [b.reshape(-1)[:k].view(shape)
                for b, k, shape in zip(blocks, self.numels, self.shapes, strict=True)]

    def reduce_scatter(self, grads: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
        """The shards' gradients: the whole ``grads`` averaged over the ranks, in fp32, this
        rank receiving its part (one reduce-scatter: :meth:`gather` run backwards)."""
        n = dist.get_world_size()
        blocks = [F.pad(g.float().flatten(), (0, s * n - k)).view(n, s)
                  for g, k, s in zip(grads, self.numels, self.sizes, strict=True)]
        full = torch.cat(blocks, dim=1).flatten()  # rank-major, as gather's out
        mine = torch.empty(full.numel() // n, device=full.device)
        _reduce_scatter(mine, full, op=dist.ReduceOp.AVG)
        return list(mine.split(self.sizes))


class _Gather(torch.autograd.Function):
    """A unit's shards → its whole parameters (all-gather); in the backward, their whole
    gradients → the shards' averaged gradients (reduce-scatter)."""

    @staticmethod
    def forward(ctx, unit: Unit, *shards: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.unit = unit
        return tuple(unit.gather())

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        # every gradient of the unit's parameters is in (autograd runs a node once all its
        # outputs' gradients are), so the copies gathered for this backward can go
        ctx.unit.full = None
        return None, *ctx.unit.reduce_scatter(grads)


class FSDP(nn.Module):
    """``module`` sharded over the ranks: ``units`` (disjoint submodules; by default
    ``module.blocks``) are gathered one at a time, the rest of the parameters form the root
    unit, gathered for the whole forward. A parameter held by several units (tied) goes to the
    root. Rank 0's parameters and buffers are broadcast first, so ranks that built their models
    from other seeds agree. This module's parameters are the shards: give them to the
    optimizer; :meth:`full_state_dict` gathers the whole model back."""

    def __init__(self, module: nn.Module, units: list[nn.Module] | None = None,
                 compute_dtype: torch.dtype = torch.float32):
        super().__init__()
        broadcast_state(module)
        self.module = module
        units = list(module.blocks if units is None else units)
        name_of = {m: prefix for prefix, m in module.named_modules()}
        slots: dict[nn.Parameter, list[tuple[nn.Module, str]]] = {}
        for m in module.modules():
            for attr, p in m._parameters.items():
                if p is not None:
                    slots.setdefault(p, []).append((m, attr))
        members = [set(u.modules()) for u in units]
        groups: list[list[nn.Parameter]] = [[] for _ in range(len(units) + 1)]  # root last
        for p, held in slots.items():
            inside = [i for i, ms in enumerate(members) if all(m in ms for m, _ in held)]
            groups[inside[0] if inside else -1].append(p)
        self.units = [Unit(g, [slots[p] for p in g], compute_dtype) for g in groups]
        self.root = self.units[-1]
        # the names each parameter had (for full_state_dict), then the parameters taken out of
        # the module: between forwards it holds no whole parameter
        self.names = [[(name_of[m] + "." if name_of[m] else "") + attr for m, attr in slots[p]]
                      for g in groups for p in g]
        self.keys = list(module.state_dict().keys())  # and the order of its state_dict
        for m, attr in (slot for held in slots.values() for slot in held):
            del m._parameters[attr]
        self.shards = nn.ParameterList(s for u in self.units for s in u.shards)
        for unit, m in zip(self.units[:-1], units, strict=True):  # (the root: in forward)
            m.register_forward_pre_hook(lambda _m, _args, unit=unit: self._gather(unit))
            m.register_forward_hook(lambda _m, _args, _out, unit=unit: self._free(unit))

    def _gather(self, unit: Unit) -> None:
        unit.full = list(_Gather.apply(unit, *unit.shards))
        for p, held in zip(unit.full, unit.slots, strict=True):
            for m, attr in held:
                setattr(m, attr, p)  # a plain attribute: the module's forward reads it

    def _free(self, unit: Unit) -> None:
        unit.full = None
        for held in unit.slots:
            for m, attr in held:
                delattr(m, attr)

    def _pack(self, saved: torch.Tensor):
        """(saved_tensors_hooks) A note in place of a saved (view of a) whole parameter."""
        storage = saved.untyped_storage().data_ptr()
        for unit in self.units:
            for i, p in enumerate(unit.full or ()):
                if p.untyped_storage().data_ptr() == storage:
                    return unit, i, saved.storage_offset(), saved.shape, saved.stride()
        return saved  # anything else (activations) is kept as autograd would

    def _unpack(self, note):
        if isinstance(note, torch.Tensor):
            return note
        unit, i, offset, shape, stride = note
        if unit.full is None:  # the first of the unit's saved tensors its backward needs
            unit.full = unit.gather()
        return unit.full[i].as_strided(shape, stride, offset)

    def forward(self, *args, **kwargs):
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            self._gather(self.root)
            try:
                return self.module(*args, **kwargs)
            finally:
                self._free(self.root)

    @torch.no_grad()
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """(Every rank calls it: all-gathers.) The whole model's fp32 parameters and its
        buffers, named and ordered as the wrapped module's ``state_dict`` was."""
        found = dict(self.module.state_dict())
        whole = [p for unit in self.units for p in unit.gather(torch.float32)]
        for names, p in zip(self.names, whole, strict=True):
            found.update(dict.fromkeys(names, p))
        return {k: found[k] for k in self.keys}


def train(steps: int = 3, batch_size: int = 4, seq: int = 16, seed: int = 0, config=TINY,
          compute_dtype: torch.dtype = torch.float32, vary_init: bool = False) -> dict:
    """(A rank's work.) :func:`kernels.distributed.data_parallel.train`'s steps (the same data,
    model and AdamW) with FSDP: the losses averaged over the ranks, each step's milliseconds,
    this rank's parameter (shard) and AdamW-state bytes, and the whole final parameters (on
    the CPU), comparable with :func:`~kernels.distributed.data_parallel.single_process`."""
    n, device = dist.get_world_size(), launch.device()
    if batch_size % n:
        raise ValueError(f"batch_size expected a multiple of the {n} ranks, got {batch_size}")
    model = Transformer(config, seed=seed + dist.get_rank() if vary_init else seed).to(device)
    defaults = Trainer(model).optimizer.defaults  # lesson 12's AdamW settings
    fsdp = FSDP(model, compute_dtype=compute_dtype)
    optimizer = torch.optim.AdamW(fsdp.parameters(), lr=defaults["lr"],
                                  betas=defaults["betas"], weight_decay=defaults["weight_decay"])
    losses, times = [], []
    for i in range(steps):
        tokens, targets = rank_slice(*batch(config.vocab, batch_size, seq, i, seed, device))
        start = time.perf_counter()
        loss = F.cross_entropy(fsdp(tokens).float().flatten(0, 1), targets.flatten())
        loss.backward()  # the shards' .grad: averaged already, by the reduce-scatters
        optimizer.step()
        optimizer.zero_grad()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / n)
    return {"method": "fsdp", "losses": losses, "step_ms": times,
            "param_bytes": tensor_bytes(fsdp.parameters()), "state_bytes": state_bytes(optimizer),
            "params": {k: v.cpu() for k, v in fsdp.full_state_dict().items()}}
