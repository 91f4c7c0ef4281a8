"""Lesson 20's workers: the launcher, the collectives and data parallelism, on 2 gloo processes
(and with NCCL on 2 GPUs, where a machine has them)."""

import time

import pytest
import torch

from course_utils import requirements
from kernels.distributed import collectives, launch


def test_bus_factors():
    assert collectives.bus_factor("all_reduce", 2) == 1.0
    assert collectives.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert collectives.bus_factor("all_gather", 4) == collectives.bus_factor("reduce_scatter", 4)
    assert collectives.bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert collectives.bus_factor("broadcast", 8) == 1.0
    assert collectives.bytes_sent("all_reduce", 1 << 20, 4) == 1.5 * (1 << 20)
    with pytest.raises(ValueError, match="op expected"):
        collectives.bus_factor("allreduce", 2)
    with pytest.raises(ValueError, match="n expected"):
        collectives.bus_factor("all_reduce", 0)


def test_launch_refuses_a_cell_function_and_bad_arguments():
    def local():
        return 1

    with pytest.raises(ValueError, match="fn expected a function defined at the top"):
        launch.run(local, 2)
    with pytest.raises(ValueError, match="world_size expected"):
        launch.run(launch.device, 0)
    with pytest.raises(ValueError, match="timeout_s expected"):
        launch.run(launch.device, 2, timeout_s=0)
    with pytest.raises(ValueError, match="device expected"):
        launch.backend_for(2, "gpu")


def test_a_rank_that_fails_is_reported_and_a_hung_one_times_out():
    with pytest.raises(launch.WorkerError, match=r"(?s)rank \d.*ValueError: device expected"):
        launch.run(launch.backend_for, 2, 2, "gpu")
    start = time.monotonic()
    with pytest.raises(launch.WorkerError, match="did not finish within 6 s"):
        launch.run(time.sleep, 2, 60, timeout_s=6)
    assert time.monotonic() - start < 20  # ended, not waited for


def _environment() -> dict:
    import os

    return dict(os.environ)


def test_multicast_stays_off_in_every_rank():
    seen = launch.run(_environment, 2)
    for environment in seen:
        for key, value in launch.NO_MULTICAST.items():
            assert environment[key] == value


def test_sweep_on_gloo():
    rows = launch.run(collectives.sweep, 2, [4096, 65536], reps=3, device="cpu")
    assert rows[0] == rows[1]  # every rank returns the slowest rank's times
    assert [r["op"] for r in rows[0]] == [op for op in collectives.OPS for _ in range(2)]
    for r in rows[0]:
        assert r["ms"] > 0
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * collectives.bus_factor(r["op"], 2))
    seen = collectives.floor_and_ceiling(rows[0], "all_reduce", 2)
    assert seen["crossover_bytes"] > 0
    assert "all_gather" in collectives.table(rows[0])


def _collective_values():
    import torch.distributed as dist

    rank, n = dist.get_rank(), dist.get_world_size()
    x = torch.arange(4.0) + 10 * rank
    total = x.clone()
    dist.all_reduce(total)
    gathered = torch.empty(4 * n)
    collectives.all_gather(gathered, x)
    mine = torch.empty(4 // n)
    collectives.reduce_scatter(mine, x.clone())
    return total, gathered, mine


def test_collectives_compute_what_they_claim():
    results = launch.run(_collective_values, 2, device="cpu")  # CPU tensors: gloo
    x0, x1 = torch.arange(4.0), torch.arange(4.0) + 10
    for rank, (total, gathered, mine) in enumerate(results):
        assert torch.equal(total, x0 + x1)
        assert torch.equal(gathered, torch.cat([x0, x1]))
        assert torch.equal(mine, (x0 + x1).chunk(2)[rank])


def test_gpus2_requirement():
    assert requirements.is_requirement("gpus2")
    reasons = requirements.unmet("gpus2")
    if torch.cuda.device_count() >= 2:
        assert reasons == []
    else:
        assert reasons and ("GPU" in reasons[0])
    assert not requirements.too_few_gpus("cuda")


@pytest.mark.gpus2
def test_sweep_with_nccl():
    rows = launch.run(collectives.sweep, 2, [4096, 1 << 20], dtype=torch.bfloat16, reps=5)
    assert all(r["ms"] > 0 for r in rows[0])


def check_data_parallel_runs(runs: list[list[dict]], ref: dict) -> None:
    """``train_all``'s runs of every method on each rank against one process (tests/test_fsdp.py
    calls it on 4 ranks, in its own start of the ranks)."""
    from kernels.distributed import data_parallel as dp

    n = len(runs)
    for rank_runs in runs:
        assert [r["method"] for r in rank_runs] == list(dp.METHODS)
        for run in rank_runs:
            assert run["losses"] == pytest.approx(ref["losses"], rel=1e-5), run["method"]
            assert dp.max_difference(run, ref) < 1e-5, run["method"]
            assert run["param_bytes"] == ref["param_bytes"]  # the whole model on every rank
    zero = [rank_runs[dp.METHODS.index("zero1")] for rank_runs in runs]
    # each rank keeps about 1/n of AdamW's state, and together all of it
    assert sum(z["state_bytes"] for z in zero) == ref["state_bytes"]
    assert max(z["state_bytes"] for z in zero) < 1.2 / n * ref["state_bytes"]


def _data_parallel_checks() -> dict:
    """(A rank's work.) Every method on the Transformer, every wrapper on the toy: one start."""
    from kernels.distributed import data_parallel as dp

    # each rank builds its model from its own seed (vary_init): the wrapper's broadcast of
    # rank 0's weights must make them the one process's
    return {"transformer": dp.train_all(steps=3, vary_init=True), "toy": _toy_wrappers()}


@pytest.fixture(scope="module")
def data_parallel_runs():
    return launch.run(_data_parallel_checks, 2)


def test_data_parallel_matches_one_process(data_parallel_runs):
    from kernels.distributed import data_parallel as dp

    # 1e-5: the ranks sum the same gradients in another order (a few fp32 ulps); AdamW's steps
    # (lr 3e-3) carry ~1e-8 of that into the weights in 3 steps (6e-8 seen); a rank left with its
    # own weights or gradients is off by ~lr
    check_data_parallel_runs([r["transformer"] for r in data_parallel_runs],
                             dp.single_process(steps=3))


class _Toy(torch.nn.Module):
    """CS336's toy models in one: a LayerNorm, a weight tied between fc2 and fc4, a frozen
    parameter, and a buffer (``unused``: a parameter the forward leaves out, when asked)."""

    def __init__(self, unused: bool = False):
        super().__init__()
        nn = torch.nn
        self.fc1, self.ln = nn.Linear(5, 10, bias=False), nn.LayerNorm(10)
        self.fc2, self.fc3, self.fc4 = nn.Linear(10, 6), nn.Linear(6, 10), nn.Linear(10, 6)
        self.fc4.weight = self.fc2.weight
        self.register_buffer("scale", torch.randn(10))
        self.fixed = nn.Parameter(torch.randn(2), requires_grad=False)
        self.unused = nn.Parameter(torch.randn(3)) if unused else None

    def forward(self, x):
        x = self.ln(self.fc1(x)) * self.scale
        return self.fc4(torch.relu(self.fc3(torch.relu(self.fc2(x)))))


# each wrapper on the toy (train_all covers the Transformer): (name, how it wraps, ShardedOptimizer)
TOY_WRAPPERS = (("naive", "Naive", {}, False), ("overlapped", "Overlapped", {}, False),
                ("bucketed, a parameter a bucket", "Bucketed", {"bucket_size_mb": 1e-5}, False),
                ("bucketed, one bucket", "Bucketed", {"bucket_size_mb": 1000}, False),
                ("bucketed + ShardedOptimizer", "Bucketed", {}, True))


def _toy_wrappers(steps: int = 3) -> dict:
    """(A rank's work.) CS336's loop for each wrapper: the model built from this rank's seed,
    wrapped; then ``zero_grad()`` (its default, set_to_none=True), forward on this rank's rows,
    backward, ``finish_gradient_synchronization()``, step, beside the one-process model (rank
    0's seed) on all rows. SGD with momentum: its step scales with the gradient (AdamW's does
    not), so a gradient summed where the mean belongs shows. Returns, for each, the largest
    difference from rank 0's parameters and buffers after construction and from the one
    process's after each step; and what Bucketed says of a parameter the forward leaves out."""
    import torch.distributed as dist
    import torch.nn.functional as F

    from kernels.distributed import data_parallel as dp

    n, rank = dist.get_world_size(), dist.get_rank()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 5, generator=g), torch.randn(8, 6, generator=g)
    found = {}
    for name, cls, kwargs, sharded in TOY_WRAPPERS:
        torch.manual_seed(0)
        reference = _Toy()
        torch.manual_seed(rank)
        model = getattr(dp, cls)(_Toy(), **kwargs)
        assert isinstance(model, torch.nn.Module) and isinstance(model.module, _Toy)
        start = _largest_difference(model.module, reference)
        optimizers = [torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9),
                      dp.ShardedOptimizer(model.parameters(), torch.optim.SGD, lr=0.1,
                                          momentum=0.9) if sharded else
                      torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)]
        after = []
        for _ in range(steps):
            for opt in optimizers:
                opt.zero_grad()
            F.mse_loss(reference(x), y).backward()
            F.mse_loss(model(x.chunk(n)[rank]), y.chunk(n)[rank]).backward()
            model.finish_gradient_synchronization()
            for opt in optimizers:
                opt.step()
            after.append(_largest_difference(model.module, reference))
        found[name] = {"start": start, "after": after}
    model = dp.Bucketed(_Toy(unused=True))
    F.mse_loss(model(x), y).backward()
    try:
        model.finish_gradient_synchronization()
    except RuntimeError as err:
        found["unused"] = str(err)
    return found


def _largest_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    ours, theirs = a.state_dict(), b.state_dict()  # parameters and buffers
    assert ours.keys() == theirs.keys()
    return max(float((ours[k] - theirs[k]).abs().max()) for k in ours)


def test_wrappers_behave_like_ddp_on_cs336s_toy(data_parallel_runs):
    for rank in (r["toy"] for r in data_parallel_runs):
        for name, *_ in TOY_WRAPPERS:
            # ranks built from different seeds: rank 0's parameters and buffers, exactly
            assert rank[name]["start"] == 0.0, name
            # fp32 sums in another order: ~1e-8 seen; a summed gradient would be off by ~1e-2
            assert max(rank[name]["after"]) < 1e-6, (name, rank[name]["after"])
        assert "unused" in rank["unused"] and "never sent" in rank["unused"]


def test_buckets_cover_every_parameter_once():
    from kernels.distributed import data_parallel as dp
    from kernels.model import TINY, Transformer

    params = list(Transformer(TINY).parameters())
    buckets = dp.plan_buckets(params, 16 * 1024)
    flat = [p for b in buckets for p in b]
    assert len(flat) == len(params) and {id(p) for p in flat} == {id(p) for p in params}
    assert flat[0] is params[-1]  # the backward's order: last layer first
    assert len(dp.plan_buckets(params, 1 << 30)) == 1
    with pytest.raises(ValueError, match="bucket_bytes expected"):
        dp.plan_buckets(params, 0)
    with pytest.raises(ValueError, match="method expected"):
        dp.train("allreduce")


def _bucketed_steps(set_to_none: bool) -> dict:
    """(A rank's work.) Two steps of :class:`Bucketed` on this rank's half of a batch, zeroing
    the gradients between them with ``set_to_none``: after each step, whether every ``.grad``
    lies in its bucket's buffer, and the operators the backward and the sync ran; the averaged
    gradients of the second step (on the CPU)."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    from kernels.distributed import data_parallel as dp
    from kernels.model import TINY, Trainer, Transformer, batch

    class Operators(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    device = launch.device()
    model = Transformer(TINY, seed=0).to(device)
    trainer = Trainer(model)
    bucketed = dp.Bucketed(model)
    in_buckets, operators = [], []
    for step in range(2):
        tokens, targets = dp.rank_slice(*batch(TINY.vocab, 4, 16, step, 0, device))
        loss = trainer.loss(tokens, targets)
        with Operators() as counted:
            loss.backward()
            bucketed.finish_gradient_synchronization()
        in_buckets.append(all(p.grad.untyped_storage().data_ptr()
                              == bucketed.flats[i].untyped_storage().data_ptr()
                              for i, bucket in enumerate(bucketed.buckets) for p in bucket))
        operators.append(dict(counted.seen))
        grads = {name: p.grad.to("cpu", copy=True) for name, p in model.named_parameters()}
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=set_to_none)
    return {"in_buckets": in_buckets, "operators": operators, "buckets": len(bucketed.buckets),
            "grads": grads}


def _one_process_gradients() -> dict:
    """The second step's gradients of :func:`_bucketed_steps`, in one process on whole batches."""
    from kernels.model import TINY, Trainer, Transformer, batch

    model = Transformer(TINY, seed=0)
    trainer = Trainer(model)
    trainer.step(*batch(TINY.vocab, 4, 16, 0, 0, "cpu"))
    trainer.loss(*batch(TINY.vocab, 4, 16, 1, 0, "cpu")).backward()
    return {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("set_to_none", [False, True])
def test_bucketed_gradients_live_in_their_buckets(set_to_none):
    reference = _one_process_gradients()
    for rank in launch.run(_bucketed_steps, 2, set_to_none):
        # the averaged gradients are the whole batch's, also after zero_grad(set_to_none=True)
        # dropped the views (the hook copies the new gradient in and puts the view back)
        for name, grad in rank["grads"].items():
            torch.testing.assert_close(grad, reference[name], rtol=1e-4, atol=1e-5, msg=name)
        assert rank["in_buckets"] == [True, True]
        if set_to_none:
            assert "aten.copy_" in rank["operators"][1]  # the view restored by a copy
            continue
        for seen in rank["operators"]:
            # the backward adds into the buckets and each is all-reduced in place, once: no
            # packing (cat) and no copy back
            assert "aten.cat" not in seen and "aten.copy_" not in seen, sorted(seen)
            assert seen["aten.add_"] == len(rank["grads"])  # each gradient added in place
            assert seen["c10d.allreduce_"] == rank["buckets"] > 1


def test_bucketed_wants_one_dtype():
    from kernels.distributed import data_parallel as dp
    from kernels.model import TINY, Transformer

    model = Transformer(TINY)
    model.norm.half()  # one parameter in fp16, the rest fp32
    with pytest.raises(ValueError, match="model expected parameters of one dtype"):
        dp.Bucketed(model)


@pytest.mark.gpus2
def test_data_parallel_with_nccl():
    from kernels.distributed import data_parallel as dp

    ref = dp.single_process(steps=3, device="cuda")
    for run in launch.run(dp.train_all, 2, steps=3)[0]:
        assert run["losses"] == pytest.approx(ref["losses"], rel=1e-4), run["method"]
        assert dp.max_difference(run, ref) < 1e-4, run["method"]


def test_run_starts_again_once_when_gloos_first_connection_fails(monkeypatch):
    calls = []

    def once(*args):
        calls.append(args)
        if len(calls) == 1:
            raise launch.WorkerError("device failed\n--- rank 1 ---\nRuntimeError: Gloo "
                                     "connectFullMesh failed with ... Connection closed by peer")
        return ["cpu", "cpu"]

    monkeypatch.setattr(launch, "_run_once", once)
    assert launch.run(launch.device, 2) == ["cpu", "cpu"] and len(calls) == 2

    calls.clear()

    def always(*args):
        calls.append(args)
        raise launch.WorkerError("device failed\n--- rank 0 ---\nZeroDivisionError")

    monkeypatch.setattr(launch, "_run_once", always)
    with pytest.raises(launch.WorkerError, match="ZeroDivisionError"):
        launch.run(launch.device, 2)
    assert len(calls) == 1  # any other failure is the caller's: no second start
