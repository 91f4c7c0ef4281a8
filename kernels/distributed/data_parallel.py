"""Data parallelism by hand on lesson 12's model: every rank holds the whole model, trains on
its own slice of the batch, and the ranks average their gradients before each optimizer step, so
that every rank takes the step one process would take on the whole batch.

Each method is an ``nn.Module`` that wraps the model, as ``DistributedDataParallel`` does, and
is driven by the same training loop::

    model = Bucketed(Transformer(TINY, seed=rank))  # rank 0's parameters and buffers copied out
    loss = loss_fn(model(tokens), targets)          # the forward is model.module's
    loss.backward()                                 # hooks may send gradients already
    model.finish_gradient_synchronization()         # every .grad now the mean over the ranks
    optimizer.step()

What they share is :class:`DataParallel`: ``.module``, its forward, and the broadcast of rank
0's parameters and buffers at construction, so ranks whose models were built differently (from
another seed) start from the same weights. They differ in how and when gradients travel:

* :class:`Naive`: after the backward, one all-reduce per parameter (the tiny model has 15: 15
  latency floors a step, none of them hidden);
* :class:`Overlapped`: one all-reduce per parameter still, but each launched (``async_op=True``)
  by the parameter's hook the moment the backward has its gradient, so the last layers'
  gradients travel while the backward computes the first layers'; the step waits for them;
* :class:`Bucketed`: gradients grouped into buckets of about ``bucket_size_mb``, in the order
  the backward finishes them, each bucket one flat buffer in which every parameter's ``.grad``
  is a view (the backward adds straight into it: nothing is packed or copied back); a hook on
  each parameter (``register_post_accumulate_grad_hook``) launches a bucket's all-reduce, in
  place and async, the moment its last gradient is ready: fewer, larger messages, still
  overlapped;
* ZeRO-1, optimizer-state sharding: the gradients averaged by a wrapper (``train`` uses
  :class:`Bucketed`), and :class:`ShardedOptimizer` keeps AdamW's state (two fp32 moments per
  weight) for this rank's share of the parameters only, steps those and broadcasts them to the
  others: the state's memory divided by the rank count;
* ``"ddp"``: ``torch.nn.parallel.DistributedDataParallel``, what they are measured against.

:func:`train` is a rank's work (started by :func:`kernels.distributed.launch.run`), and
:func:`single_process` the reference: the same steps on the whole batch in one process. Sharding
the parameters and gradients too (FSDP, ZeRO-3) is :mod:`kernels.distributed.fsdp`.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch import nn

from kernels.distributed import launch, profile
from kernels.model import TINY, Trainer, Transformer, batch

METHODS = ("naive", "overlapped", "bucketed", "zero1", "ddp")
BUCKET_BYTES = 16 * 1024  # small, so the tiny model (107 KiB of fp32 weights) has 7 buckets


def broadcast_state(module: nn.Module, src: int = 0) -> None:
    """Every parameter and buffer of ``module`` overwritten with rank ``src``'s (in place: the
    tensors stay the same objects, so hooks and optimizers that hold them still do)."""
    for tensor in [*module.parameters(), *module.buffers()]:
        dist.broadcast(tensor.detach(), src=src)  # detach(): the same memory, outside autograd


def trainable(module: nn.Module) -> list[nn.Parameter]:
    """The parameters that get gradients (tied ones once)."""
    return [p for p in module.parameters() if p.requires_grad]


class DataParallel(nn.Module):
    """What every wrapper shares: the model as ``.module`` (a submodule, so its parameters are
    this wrapper's too, named ``module.…``), a forward that is its forward, and rank 0's
    parameters and buffers broadcast at construction, as ``DistributedDataParallel`` does
    (DDP also broadcasts the buffers again before each forward, by default: BatchNorm's
    running statistics; lesson 12's model has no buffer that changes)."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        broadcast_state(module)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self) -> None:
        """Called after ``loss.backward()`` and before ``optimizer.step()``: when it returns,
        every gradient is the mean over the ranks (CS336's name for it)."""
        raise NotImplementedError


class Naive(DataParallel):
    """One all-reduce per parameter, after the whole backward."""

    def __init__(self, module: nn.Module):
        super().__init__(module)
        self.params = trainable(module)

    def finish_gradient_synchronization(self) -> None:
        n = dist.get_world_size()
        for p in self.params:
            if p.grad is not None:  # (every rank gets the same gradients, or none)
                dist.all_reduce(p.grad)  # the sum over the ranks...
                p.grad /= n  # ...then the mean: one more pass (AVG: see Bucketed._ready)


class Overlapped(DataParallel):
    """One all-reduce per parameter, each launched by the parameter's hook as soon as the
    backward has its gradient, and waited for before the step."""

    def __init__(self, module: nn.Module):
        super().__init__(module)
        self.launched: list = []  # the all-reduces' work handles
        for p in trainable(module):
            p.register_post_accumulate_grad_hook(self._ready)

    def _ready(self, p: nn.Parameter) -> None:
        # called by autograd once p.grad holds this backward's whole gradient (a parameter
        # used twice, like tied weights, once: after both uses are added up). AVG: the mean,
        # as in Bucketed._ready
        self.launched.append(dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, async_op=True))

    def finish_gradient_synchronization(self) -> None:
        for work in self.launched:  # the step waits for the last all-reduces
            work.wait()
        self.launched.clear()


def plan_buckets(params: list[nn.Parameter], bucket_bytes: int) -> list[list]:
    """Parameters grouped into buckets of about ``bucket_bytes``, last parameter first (the
    backward produces the gradients of the last layers first)."""
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"bucket_bytes expected a positive int, got {bucket_bytes!r}")
    buckets, current, size = [], [], 0
    for p in reversed(params):
        current.append(p)
        size += p.numel() * p.element_size()
        if size >= bucket_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class Bucketed(DataParallel):
    """Buckets of gradients all-reduced in place while the backward runs.

    Each bucket is one flat buffer, allocated once, and each of its parameters' ``.grad`` a view
    of its own slice (``DistributedDataParallel``'s ``gradient_as_bucket_view``): autograd adds
    a gradient into ``p.grad`` in place when ``p.grad`` already holds a tensor, so the backward
    writes the bucket itself, the all-reduce runs on that buffer, and the optimizer reads the
    averaged gradients through the same views: no packing, no copy back. Zero them with the
    optimizer's ``zero_grad(set_to_none=False)`` (``zero_()`` on each view): its default,
    ``set_to_none=True``, drops the views, autograd then makes the next gradient a fresh tensor
    outside the bucket, and the hook has to copy it in and put the view back (as DDP does):
    still right, but one copy a gradient slower.

    Every trainable parameter must get a gradient in every backward (DDP's default, without
    ``find_unused_parameters``): a bucket waiting for one that never comes is never sent, and
    :meth:`finish_gradient_synchronization` says which."""

    def __init__(self, module: nn.Module, bucket_size_mb: float = BUCKET_BYTES / 2**20):
        if isinstance(bucket_size_mb, bool) or not isinstance(bucket_size_mb, int | float) \
                or not bucket_size_mb > 0:
            raise ValueError(f"bucket_size_mb expected a positive number, got {bucket_size_mb!r}")
        params = trainable(module)
        if len({(p.dtype, p.device) for p in params}) > 1:
            raise ValueError("model expected parameters of one dtype on one device, got "
                             f"{sorted({f'{p.dtype} on {p.device}' for p in params})}")
        super().__init__(module)
        self.buckets = plan_buckets(params, max(1, round(bucket_size_mb * 2**20)))
        self.flats, self.view_of = [], {}  # a buffer per bucket; each parameter's slice of it
        for bucket in self.buckets:
            flat = torch.zeros(sum(p.numel() for p in bucket), dtype=params[0].dtype,
                               device=params[0].device)
            offset = 0
            for p in bucket:
                self.view_of[p] = p.grad = flat[offset:offset + p.numel()].view_as(p)
                offset += p.numel()
            self.flats.append(flat)
        self.bucket_of = {p: i for i, b in enumerate(self.buckets) for p in b}
        self.names = {p: name for name, p in module.named_parameters()}
        self.pending = [len(b) for b in self.buckets]
        self.launched: list = []  # the all-reduces' work handles
        for p in params:
            p.register_post_accumulate_grad_hook(self._ready)

    def _ready(self, p: nn.Parameter) -> None:
        # called by autograd once p.grad holds this backward's whole gradient
        view = self.view_of[p]
        if p.grad.data_ptr() != view.data_ptr():  # the view was dropped (set_to_none=True)
            view.copy_(p.grad)
            p.grad = view
        i = self.bucket_of[p]
        self.pending[i] -= 1
        if self.pending[i] == 0:  # the bucket's last gradient: send it now
            # AVG: the mean, not the sum. NCCL scales as it reduces (no pass of our own over the
            # bucket); gloo sums then divides, and has AVG for all_reduce and reduce (since
            # torch 2.8) and reduce_scatter (seen on 2.14.1), not its other reductions: where
            # AVG is missing, divide the buffer by the rank count first and all-reduce with
            # SUM, as DDP does
            self.launched.append(dist.all_reduce(self.flats[i], op=dist.ReduceOp.AVG,
                                                 async_op=True))

    def finish_gradient_synchronization(self) -> None:
        for work in self.launched:  # the step waits for the last all-reduces
            work.wait()
        self.launched.clear()
        unsent = [i for i, left in enumerate(self.pending) if left]
        self.pending = [len(b) for b in self.buckets]
        if unsent:
            missing = [self.names[p] for i in unsent for p in self.buckets[i]]
            raise RuntimeError(f"Bucketed: bucket(s) {unsent} were never sent: a gradient of "
                               f"one of {missing} did not come in this backward (a parameter "
                               "the forward did not use?); every trainable parameter must get "
                               "one (DDP's default, without find_unused_parameters)")


class ShardedOptimizer(torch.optim.Optimizer):
    """ZeRO-1: any optimizer (``optimizer_cls(params, **kwargs)``), its state kept by one rank
    per parameter. Each parameter is given to the least-loaded rank (largest first: shares
    within one tensor of equal); this rank's optimizer steps its own parameters only, so it
    allocates their state only, and each parameter is then broadcast from its owner.

    Why a separate optimizer, and not a wrapper of the model (CS336's shape, and
    ``torch.distributed.optim.ZeroRedundancyOptimizer``'s): what ZeRO-1 shards is the
    optimizer's state, and the gradients must still be averaged before its step, by any of the
    wrappers above (``train`` uses :class:`Bucketed`); keeping the two apart lets each wrapper
    pair with it, and lets the training loop stay ``backward, finish, step``. Every rank
    computes the whole averaged gradient and then uses only its share of it: ZeRO-2 would
    reduce-scatter instead (each rank receiving its share only), ZeRO-3 shards the parameters
    too (:mod:`kernels.distributed.fsdp`). Not here: ``state_dict`` of the whole state."""

    def __init__(self, params, optimizer_cls: type[torch.optim.Optimizer], **kwargs):
        self.loads, self.owner = [0] * dist.get_world_size(), {}
        self.local = None  # built after the base class has called add_param_group for each group
        super().__init__(params, kwargs)
        self.local = optimizer_cls([self._mine(g) for g in self.param_groups], **kwargs)

    def _mine(self, group: dict) -> dict:
        return {**group, "params": [p for p in group["params"]
                                    if self.owner[p] == dist.get_rank()]}

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in sorted(group["params"], key=lambda q: -q.numel()):
            r = self.loads.index(min(self.loads))
            self.owner[p] = r
            self.loads[r] += p.numel()
        if self.local is not None:  # a group added later
            self.local.add_param_group(self._mine(group))

    @torch.no_grad()
    def step(self, closure=None):
        for mine, group in zip(self.local.param_groups, self.param_groups, strict=True):
            # (so that what changes this optimizer's groups, a scheduler's lr, reaches it)
            mine.update({k: v for k, v in group.items() if k != "params"})
        loss = self.local.step(closure)
        for group in self.param_groups:
            for p in group["params"]:  # every rank's copy from the rank that stepped it
                dist.broadcast(p.detach(), src=self.owner[p])
        return loss


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state (AdamW: the two moments and the step counts); of this
    rank's share for a :class:`ShardedOptimizer`."""
    if isinstance(optimizer, ShardedOptimizer):
        optimizer = optimizer.local
    return sum(t.numel() * t.element_size() for state in optimizer.state.values()
               for t in state.values() if isinstance(t, torch.Tensor))


def tensor_bytes(tensors) -> int:
    """Bytes of ``tensors`` (a model's parameters, say)."""
    return sum(t.numel() * t.element_size() for t in tensors)


def rank_slice(tokens: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n, rank = dist.get_world_size(), dist.get_rank()
    return tokens.chunk(n)[rank], targets.chunk(n)[rank]


def train(method: str, steps: int = 3, batch_size: int = 4, seq: int = 16, seed: int = 0,
          config=TINY, bucket_bytes: int = BUCKET_BYTES, precision: str = "fp32",
          keep_params: bool = True, profile_step: bool = False, vary_init: bool = False) -> dict:
    """(A rank's work.) ``steps`` training steps of lesson 12's model by ``method`` on this
    rank's slice of a global batch of ``batch_size`` sequences, in ``precision`` (lesson 12's
    :class:`~kernels.model.Trainer` precisions). ``vary_init``: each rank builds its model from
    ``seed + rank`` (the wrapper's broadcast must make them agree). Returns the losses averaged
    over the ranks, the milliseconds of each step, this rank's parameter and optimizer-state
    bytes and the final parameters (on the CPU; None with ``keep_params=False``, for a
    benchmark of a model too large to send back from every rank). ``profile_step`` (GPUs): one
    more step, untimed, under the profiler: ``"busy"`` holds where its GPU time went
    (:func:`kernels.distributed.profile.busy`)."""
    if method not in METHODS:
        raise ValueError(f"method expected one of {', '.join(METHODS)}, got {method!r}")
    if precision not in ("fp32", "bf16-autocast"):  # (bf16-master steps fp32 copies instead)
        raise ValueError(f"precision expected 'fp32' or 'bf16-autocast' (the weights are the "
                         f"optimizer's), got {precision!r}")
    n, device = dist.get_world_size(), launch.device()
    if batch_size % n:
        raise ValueError(f"batch_size expected a multiple of the {n} ranks, got {batch_size}")
    model = Transformer(config, seed=seed + dist.get_rank() if vary_init else seed).to(device)
    trainer = Trainer(model, precision)
    optimizer, wrapped = trainer.optimizer, None
    if method == "ddp":  # DDP averages the gradients in its own hooks
        trainer.forward = torch.nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=bucket_bytes / 2**20)
    elif method in ("bucketed", "zero1"):
        wrapped = Bucketed(model, bucket_size_mb=bucket_bytes / 2**20)
    else:
        wrapped = {"naive": Naive, "overlapped": Overlapped}[method](model)
    if wrapped is not None:
        trainer.forward = wrapped
    if method == "zero1":
        defaults = trainer.optimizer.defaults
        optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=defaults["lr"],
                                     betas=defaults["betas"],
                                     weight_decay=defaults["weight_decay"])

    def data(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return rank_slice(*batch(config.vocab, batch_size, seq, i, seed, device))

    def step(tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = trainer.loss(tokens, targets)
        loss.backward()
        if wrapped is not None:
            wrapped.finish_gradient_synchronization()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)  # (keeps Bucketed's views)
        return loss

    losses, times = [], []
    for i in range(steps):
        tokens, targets = data(i)
        _synchronize(device)
        start = time.perf_counter()
        loss = step(tokens, targets)
        _synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / n)
    found_busy = None
    if profile_step and device.type == "cuda":
        tokens, targets = data(steps)
        _synchronize(device)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step(tokens, targets)
            _synchronize(device)
        found_busy = profile.busy(profile.kernel_events(prof))
    return {"method": method, "losses": losses, "step_ms": times, "busy": found_busy,
            "state_bytes": state_bytes(optimizer),
            "param_bytes": tensor_bytes(model.parameters()),
            "params": {k: v.detach().cpu() for k, v in model.state_dict().items()}
            if keep_params else None}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_all(methods: tuple[str, ...] = METHODS, **kwargs) -> list[dict]:
    """(A rank's work.) :func:`train` by each method in turn, in one group (one start-up)."""
    return [train(m, **kwargs) for m in methods]


def single_process(steps: int = 3, batch_size: int = 4, seq: int = 16, seed: int = 0,
                   config=TINY, device: str = "cpu") -> dict:
    """The reference: the same steps on the whole batch, in this process."""
    model = Transformer(config, seed=seed).to(device)
    trainer = Trainer(model)
    losses, times = [], []
    for i in range(steps):
        tokens, targets = batch(config.vocab, batch_size, seq, i, seed, device)
        start = time.perf_counter()
        losses.append(float(trainer.step(tokens, targets)))
        times.append((time.perf_counter() - start) * 1e3)
    return {"method": "one process", "losses": losses, "step_ms": times,
            "state_bytes": state_bytes(trainer.optimizer),
            "param_bytes": tensor_bytes(model.parameters()),
            "params": {k: v.detach().cpu() for k, v in model.state_dict().items()}}


def max_difference(a: dict, b: dict) -> float:
    """The largest absolute difference between two runs' final parameters."""
    if a["params"].keys() != b["params"].keys():
        raise ValueError("a and b expected the same model's parameters")
    return max(float((a["params"][k].float() - b["params"][k].float()).abs().max())
               for k in a["params"])


def median_step_ms(run: dict, skip_first: int = 1) -> float:
    """The median step time, without the first ``skip_first`` steps (warm-up)."""
    times = run["step_ms"][skip_first:] or run["step_ms"]
    return statistics.median(times)
