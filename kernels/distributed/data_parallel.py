"""Data parallelism by hand on lesson 12's model: every rank holds the whole model, trains on
its own slice of the batch, and the ranks average their gradients before each optimizer step, so
that every rank takes the step one process would take on the whole batch.

* :class:`Naive`: after the backward, one all-reduce per parameter (the tiny model has 15: 15
  latency floors a step);
* :class:`Bucketed`: gradients grouped into buckets of about ``bucket_bytes``, in the order the
  backward finishes them, each bucket one flat buffer in which every parameter's ``.grad`` is a
  view (the backward adds straight into it: nothing is packed or copied back); a hook on each
  parameter (``register_post_accumulate_grad_hook``) launches a bucket's all-reduce, in place
  and ``async_op=True``, the moment its last gradient is ready, so communication runs while the
  backward computes the earlier layers; the step waits for them;
* :class:`ZeRO1`: optimizer-state sharding: the gradients averaged as above, but each rank keeps
  AdamW's state (two fp32 moments per weight) for its own share of the parameters only, steps
  those, and broadcasts them to the others: the state's memory divided by the rank count;
* ``"ddp"``: ``torch.nn.parallel.DistributedDataParallel``, what the three are measured against.

:func:`train` is a rank's work (started by :func:`kernels.distributed.launch.run`), and
:func:`single_process` the reference: the same steps on the whole batch in one process.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from kernels.distributed import launch, profile
from kernels.model import TINY, Trainer, Transformer, batch

METHODS = ("naive", "bucketed", "zero1", "ddp")
BUCKET_BYTES = 16 * 1024  # small, so the tiny model (107 KiB of fp32 weights) has 7 buckets


class Naive:
    """One all-reduce per parameter, after the whole backward."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]

    def sync(self) -> None:
        n = dist.get_world_size()
        for p in self.params:
            dist.all_reduce(p.grad)
            p.grad /= n


def plan_buckets(params: list[torch.nn.Parameter], bucket_bytes: int) -> list[list]:
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


class Bucketed:
    """Buckets of gradients all-reduced in place while the backward runs.

    Each bucket is one flat buffer, allocated once, and each of its parameters' ``.grad`` a view
    of its own slice (``DistributedDataParallel``'s ``gradient_as_bucket_view``): autograd adds
    a gradient into ``p.grad`` in place when ``p.grad`` already holds a tensor, so the backward
    writes the bucket itself, the all-reduce runs on that buffer, and the optimizer reads the
    averaged gradients through the same views: no packing, no copy back. Zero them with the
    optimizer's ``zero_grad(set_to_none=False)`` (``zero_()`` on each view): its default,
    ``set_to_none=True``, drops the views, autograd then makes the next gradient a fresh tensor
    outside the bucket, and the hook has to copy it in and put the view back (as DDP does):
    still right, but one copy a gradient slower."""

    def __init__(self, model: torch.nn.Module, bucket_bytes: int = BUCKET_BYTES):
        params = [p for p in model.parameters() if p.requires_grad]
        if len({(p.dtype, p.device) for p in params}) > 1:
            raise ValueError("model expected parameters of one dtype on one device, got "
                             f"{sorted({f'{p.dtype} on {p.device}' for p in params})}")
        self.buckets = plan_buckets(params, bucket_bytes)
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
        self.pending = [len(b) for b in self.buckets]
        self.launched: list = []  # the all-reduces' work handles
        for p in params:
            p.register_post_accumulate_grad_hook(self._ready)

    def _ready(self, p: torch.nn.Parameter) -> None:
        # called by autograd once p.grad holds this backward's whole gradient
        view = self.view_of[p]
        if p.grad.data_ptr() != view.data_ptr():  # the view was dropped (set_to_none=True)
            view.copy_(p.grad)
            p.grad = view
        i = self.bucket_of[p]
        self.pending[i] -= 1
        if self.pending[i] == 0:  # the bucket's last gradient: send it now
            # AVG: the mean, not the sum. NCCL scales as it reduces (no pass of our own over the
            # bucket); gloo sums then divides, and has AVG for all_reduce and reduce only
            # (since 2025), not its other reductions: where AVG is missing, divide the buffer
            # by the rank count first and all-reduce with SUM, as DDP does
            self.launched.append(dist.all_reduce(self.flats[i], op=dist.ReduceOp.AVG,
                                                 async_op=True))

    def sync(self) -> None:
        for work in self.launched:  # the step waits for the last all-reduces
            work.wait()
        self.launched.clear()
        self.pending = [len(b) for b in self.buckets]


class ZeRO1:
    """Gradients averaged as :class:`Bucketed` does; AdamW's state kept for this rank's share of
    the parameters only; each parameter broadcast from the rank that stepped it."""

    def __init__(self, model: torch.nn.Module, make_optimizer, bucket_bytes: int = BUCKET_BYTES):
        self.grads = Bucketed(model, bucket_bytes)
        params = [p for p in model.parameters() if p.requires_grad]
        n, rank = dist.get_world_size(), dist.get_rank()
        # largest first, each to the least-loaded rank: shares within one tensor of equal
        loads, self.owner = [0] * n, {}
        for p in sorted(params, key=lambda q: -q.numel()):
            r = loads.index(min(loads))
            self.owner[p] = r
            loads[r] += p.numel()
        self.params = params
        self.optimizer = make_optimizer([p for p in params if self.owner[p] == rank])

    def sync(self) -> None:
        self.grads.sync()

    def step(self) -> None:
        self.optimizer.step()
        for p in self.params:  # every rank's copy from the rank that stepped it
            dist.broadcast(p.data, src=self.owner[p])


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state (AdamW: the two moments and the step counts)."""
    return sum(t.numel() * t.element_size() for state in optimizer.state.values()
               for t in state.values() if isinstance(t, torch.Tensor))


def _shard(tokens: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n, rank = dist.get_world_size(), dist.get_rank()
    return tokens.chunk(n)[rank], targets.chunk(n)[rank]


def train(method: str, steps: int = 3, batch_size: int = 4, seq: int = 16, seed: int = 0,
          config=TINY, bucket_bytes: int = BUCKET_BYTES, precision: str = "fp32",
          keep_params: bool = True, profile_step: bool = False) -> dict:
    """(A rank's work.) ``steps`` training steps of lesson 12's model by ``method`` on this
    rank's slice of a global batch of ``batch_size`` sequences, in ``precision`` (lesson 12's
    :class:`~kernels.model.Trainer` precisions). Returns the losses averaged over the ranks,
    the milliseconds of each step, this rank's optimizer-state bytes and the final parameters
    (on the CPU; None with ``keep_params=False``, for a benchmark of a model too large to send
    back from every rank). ``profile_step`` (GPUs): one more step, untimed, under the profiler:
    ``"busy"`` holds where its GPU time went (:func:`kernels.distributed.profile.busy`)."""
    if method not in METHODS:
        raise ValueError(f"method expected one of {', '.join(METHODS)}, got {method!r}")
    if precision not in ("fp32", "bf16-autocast"):  # (bf16-master steps fp32 copies instead)
        raise ValueError(f"precision expected 'fp32' or 'bf16-autocast' (the weights are the "
                         f"optimizer's), got {precision!r}")
    n, device = dist.get_world_size(), launch.device()
    if batch_size % n:
        raise ValueError(f"batch_size expected a multiple of the {n} ranks, got {batch_size}")
    model = Transformer(config, seed=seed).to(device)
    trainer = Trainer(model, precision)
    optimizer, sync = trainer.optimizer, None
    if method == "naive":
        sync = Naive(model).sync
    elif method == "bucketed":
        sync = Bucketed(model, bucket_bytes).sync
    elif method == "zero1":
        defaults = trainer.optimizer.defaults
        zero = ZeRO1(model, lambda ps: torch.optim.AdamW(
            ps, lr=defaults["lr"], betas=defaults["betas"],
            weight_decay=defaults["weight_decay"]), bucket_bytes)
        sync, optimizer = zero.sync, zero
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_bytes / 2**20)
        trainer.forward = ddp  # DDP averages the gradients in its own hooks
    def data(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return _shard(*batch(config.vocab, batch_size, seq, i, seed, device))

    def step(tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = trainer.loss(tokens, targets)
        loss.backward()
        if sync is not None:
            sync()
        optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=False)
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
    inner = optimizer.optimizer if isinstance(optimizer, ZeRO1) else optimizer
    return {"method": method, "losses": losses, "step_ms": times, "busy": found_busy,
            "state_bytes": state_bytes(inner),
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
