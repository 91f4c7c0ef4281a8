"""The rank side of exercise distributed.fsdp_backward (:mod:`exercises.distributed_fsdp`):
what each gloo process runs, the model and data both sides build, and the pool that keeps the
processes between checks.

Why a module of its own: a rank imports what it runs from a module (a spawned process cannot
import a notebook cell), and the check's own judging, in the parent, reads better without the
rank machinery beside it. The ranks are an :class:`exercises.distributed_ranks.Ranks` of its own
(the pool every distributed check uses, running this check's :func:`_rank_check`): a check then
costs its collectives, not four processes that each import torch. In each check every rank runs
the answer in a group of each size of :data:`WORLDS` it fits in (one launch of 4: its first
ranks form each smaller group), first alone on one unit (:func:`_alone`), then, where every
rank's answer returned what FSDP can use, as the backward of
:class:`kernels.distributed.fsdp.FSDP` in training (:func:`_training`); an exception in the
answer ends the pool with its case named.
"""

from __future__ import annotations

import types
from collections import Counter

import torch
from torch import nn

from exercises import distributed_ranks as ranks

HINT = ("free first (unit.full = None); pad each g.float().flatten() to n·s with zeros and view "
        "it (n, s); torch.cat those along dim=1 (rank-major, as gather's out) and flatten; one "
        "reduce_scatter into torch.empty(total // n); divide by n; split by unit.sizes")
WORLDS = tuple(range(1, ranks.WORLD + 1))  # (1, 2, 3, 4): the first ranks of the pool, each group
# the unit checked alone: 7, 15, 1, 12 and 4 elements (no rank count of 2-4 divides them all)
SHAPES = ((7,), (3, 5), (1,), (2, 2, 3), (4,))
SCALES = (1e-3, 1.0, 1e4, 1.0, 0.0)  # each parameter's gradient size; the last gets none
RANK_SCALE = 64.0  # rank r's gradients are RANK_SCALE**r times larger
DTYPES = (torch.float32, torch.bfloat16)
CALLS = 3  # each (world size, dtype) three times on new data: a buffer kept between calls shows
BATCH, STEPS, LR = 24, 3, 0.1  # the training: 24 rows (each rank's share even), SGD
# fp32 shards, fp32 sums of float64 gradients, 3 steps of lr 0.1: a few fp32 ulps of weights of
# about 1 (1.1e-7 seen); a mean taken as a sum, or one rank's gradient, is off by about 1e-2
TRAIN_ATOL = 1e-5


class _Collectives:
    """Counts the c10d operations (the collectives, however called) run inside it."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        seen = self.seen = Counter()

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if str(func.namespace) == "c10d":
                    seen[str(func.overloadpacket).split(".")[-1].strip("_")] += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


class _Block(nn.Module):
    def __init__(self, unused: bool):
        super().__init__()
        self.fc, self.scale = nn.Linear(7, 7), nn.Parameter(torch.ones(1))
        if unused:  # a parameter the forward never uses: its gradient is zero
            self.unused = nn.Parameter(torch.ones(3))

    def forward(self, h):
        return torch.tanh(self.fc(h)) * self.scale


class _Net(nn.Module):
    """Two blocks (FSDP's units) and a root: sizes no rank count of 2-4 divides, 1-element
    parameters, one parameter no forward uses; the same weights wherever it is built."""

    def __init__(self):
        super().__init__()
        self.inp, self.out, self.gain = nn.Linear(5, 7), nn.Linear(7, 3), nn.Parameter(
            torch.ones(1))
        self.blocks = nn.ModuleList([_Block(True), _Block(False)])
        g = torch.Generator().manual_seed(20)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (p.numel() == 1))

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h) * self.gain


def _data(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(BATCH, 5, generator=g, dtype=torch.float64),
             torch.randn(BATCH, 3, generator=g, dtype=torch.float64)) for _ in range(STEPS)]


def _fail(case: str, why: BaseException, source: str):
    return RuntimeError(f"{ranks.CASE}{case}{ranks.CASE}{ranks.raised_in_answer(why, source)}")


def _alone(module, world: int, rank: int, seed: int) -> list[dict]:
    """(A rank's work.) The answer on one unit of :data:`SHAPES`, each dtype, each call."""
    from kernels.distributed import fsdp

    params = [nn.Parameter(torch.zeros(shape)) for shape in SHAPES]
    unit = fsdp.Unit(params, [[] for _ in params], torch.float32)
    g = torch.Generator().manual_seed(seed * 31 + world * 7 + rank)
    found = []
    for dtype in DTYPES:
        for call in range(CALLS):
            case = (f"world size {world}, {ranks.dtype_name(dtype)} gradients" +
                    (f", call {call + 1} on new data" if call else ""))
            grads = tuple((torch.randn(shape, generator=g) * scale * RANK_SCALE ** rank)
                          .to(dtype) for shape, scale in zip(SHAPES, SCALES, strict=True))
            kept = [t.clone() for t in grads]
            unit.full = [p.detach().clone() for p in params]  # gathered for this backward
            try:
                with _Collectives() as seen:
                    got = module.shard_gradients(unit, grads)
            except Exception as why:
                raise _fail(case, why, source=module.SOURCE) from None
            tensors = isinstance(got, list | tuple) and all(isinstance(t, torch.Tensor)
                                                            for t in got)
            freed = getattr(unit, "full", "deleted")
            found.append({"part": "alone", "world": world, "dtype": dtype, "case": case,
                          "grads": kept, "numels": list(unit.numels), "sizes": list(unit.sizes),
                          "got": list(got) if tensors else None,
                          "returned": [t.detach().clone() for t in got] if tensors else None,
                          "kind": type(got).__name__, "seen": dict(seen.seen),
                          "changed": any(not torch.equal(a, b)
                                         for a, b in zip(grads, kept, strict=True)),
                          "freed": freed if freed is None or isinstance(freed, str) else "kept",
                          # what FSDP's training needs of it (every rank agrees to skip it)
                          "fits": tensors and freed is None and [tuple(t.shape) for t in got]
                          == [(s,) for s in unit.sizes]})
    return found


def _training(module, world: int, rank: int, seed: int) -> dict:
    """(A rank's work.) FSDP with the answer as its backward: :data:`STEPS` SGD steps, each of
    two micro-batches of this rank's share of the batch; the whole parameters at the end."""
    from kernels.distributed import fsdp

    case = f"world size {world}, training"

    def backward(ctx, *grads):
        try:
            return None, *module.shard_gradients(ctx.unit, grads)
        except Exception as why:
            raise _fail(case, why, source=module.SOURCE) from None

    fsdp._Gather.backward = staticmethod(backward)
    model = fsdp.FSDP(_Net(), compute_dtype=torch.float64)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    share = BATCH // world
    kept = []
    for x, y in _data(seed):
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        for xs, ys in zip(x.chunk(2), y.chunk(2), strict=True):
            (torch.nn.functional.mse_loss(model(xs), ys) / 2).backward()
            kept.append([u.full is not None for u in model.units])
        optimizer.step()
        optimizer.zero_grad()
    return {"part": "training", "world": world, "case": case, "kept": kept,
            "params": model.full_state_dict()}


def _rank_check(source: str, seed: int, store, number: int) -> list[dict]:
    """(A rank's work, in a launch of ``max(WORLDS)`` ranks.) The answer ``source`` in a group
    of each size of :data:`WORLDS` that this rank fits in, alone then in training."""
    import datetime
    import linecache

    import torch.distributed as dist

    linecache.cache["<your cell>"] = (len(source), None, source.splitlines(True), "<your cell>")
    module = types.ModuleType("your_cell")
    module.SOURCE = source
    try:
        exec(compile(source, "<your cell>", "exec"), vars(module))
    except Exception as why:
        raise _fail("running your cell", why, source) from None
    rank, found = dist.get_rank(), []
    for world in WORLDS:
        if rank >= world:
            continue
        dist.destroy_process_group()
        dist.init_process_group("gloo", store=dist.PrefixStore(f"fsdp/{number}/{world}", store),
                                rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=ranks.RANK_TIMEOUT_S))
        found += _alone(module, world, rank, seed)
        unfit = torch.tensor([sum(not row["fits"] for row in found[-CALLS * len(DTYPES):])])
        dist.all_reduce(unfit)  # (not the answer's: the check's own collective)
        if not unfit.item():  # else the records alone say what is wrong
            found.append(_training(module, world, rank, seed))
        dist.barrier()
    return found


# this check's ranks: a pool of its own, run as the halves check runs its
RANKS = ranks.Ranks(_rank_check, HINT)


def _one_process(seed: int) -> dict:
    """The reference: :class:`_Net` in float64, :data:`STEPS` SGD steps on the whole batch."""
    net = _Net().double()
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    for x, y in _data(seed):
        torch.nn.functional.mse_loss(net(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    return {k: v.detach() for k, v in net.state_dict().items()}
