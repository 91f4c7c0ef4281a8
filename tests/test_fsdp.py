"""Lesson 20's FSDP by hand (kernels/distributed/fsdp.py) on 2 and 4 gloo CPU ranks: against
one process's training, beside torch's own ``fully_shard``, and what it keeps in memory.

Each world size is one start of the ranks (:func:`_fsdp_checks` does every check in it): on 2
CPU cores a start costs seconds, the checks themselves a fraction of that."""

import gc
import weakref
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernels.distributed import data_parallel as dp
from kernels.distributed import fsdp, launch

STEPS = 3
# fp32: the ranks' gradients are the one process's summed in another order (a mean of the
# ranks' means, the reduce-scatter's sum): a few fp32 ulps, ~1e-7 of a gradient; AdamW's step
# (lr 3e-3) moves each weight by lr·m/√v, so after 3 steps the weights (≈0.02 to 1) differ by
# a few fp32 ulps (5.6e-8 seen on 2 ranks, 4.5e-8 on 4). 1e-5 leaves room; un-averaged
# gradients (each rank its own) are off by about lr, 3e-3 a step.
FP32_ATOL = 1e-5
# bf16 compute (fp32 master weights): every matmul's inputs rounded to 8 bits of mantissa
# (2^-9 ≈ 0.2% relative): the loss, a mean over 64 tokens, stays within 0.2% of fp32's (1e-4
# relative seen), and the whole model's 3-step change from its initial weights within 10% of
# fp32's change (a norm over all weights: 4% seen on 2 and on 4 ranks). A per-weight bound
# would say nothing: AdamW moves a weight by about lr a step whatever its gradient's size, so a
# weight whose tiny gradient bf16 flips moves the other way (7e-3 the largest difference seen).
BF16_LOSS_RTOL, BF16_UPDATE_RTOL = 2e-3, 0.1


class _Toy(nn.Module):
    """A buffer, a frozen parameter, and a weight tied between fc2 and fc4 (CS336's toys)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.ln = nn.Linear(5, 10, bias=False), nn.LayerNorm(10)
        self.fc2, self.fc3, self.fc4 = nn.Linear(10, 6), nn.Linear(6, 10), nn.Linear(10, 6)
        self.fc4.weight = self.fc2.weight
        self.register_buffer("scale", torch.randn(10))
        self.fixed = nn.Parameter(torch.randn(2), requires_grad=False)

    def forward(self, x):
        x = self.ln(self.fc1(x)) * self.scale
        return self.fc4(F.relu(self.fc3(F.relu(self.fc2(x)))))


def _toy_steps(wrapped, x, y, steps=STEPS):
    """SGD with momentum: its step scales with the gradient, unlike AdamW's (a gradient summed
    where the mean belongs shows)."""
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        F.mse_loss(wrapped(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def _copy(state: dict) -> dict:
    return {k: v.clone() for k, v in state.items()}


def _freed_between_forward_and_backward(model: fsdp.FSDP, tokens, targets) -> dict:
    """One step, watching: weak references to every whole parameter gathered in the forward
    (dead once the forward is over?), and the collectives the step ran."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Collectives(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func.namespace) == "c10d":
                self.seen[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    gathered = []

    def watch(_module, _args):  # after FSDP's own pre-hook: this unit and the root are whole
        gathered.extend(weakref.ref(p) for u in model.units for p in (u.full or ()))

    hooks = [b.register_forward_pre_hook(watch) for b in model.module.blocks]
    with Collectives() as forward:
        loss = F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
    gc.collect()
    alive = sum(r() is not None for r in gathered)
    with Collectives() as backward:
        loss.backward()
    for h in hooks:
        h.remove()
    return {"watched": len(gathered), "alive_after_forward": alive, "forward": forward.seen,
            "backward": backward.seen, "whole_after_backward": [u.full is not None
                                                                 for u in model.units]}


def _fully_shard(steps: int, compute_dtype: torch.dtype) -> dict:
    """torch's FSDP2 on the same steps as :func:`fsdp.train` (each block, then the root)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from kernels.model import TINY, Trainer, Transformer, batch

    n = dist.get_world_size()
    model = Transformer(TINY, seed=0)
    defaults = Trainer(model).optimizer.defaults
    mesh = init_device_mesh("cpu", (n,))
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=defaults["lr"], betas=defaults["betas"],
                                  weight_decay=defaults["weight_decay"])
    losses = []
    for i in range(steps):
        tokens, targets = dp.rank_slice(*batch(TINY.vocab, 4, 16, i, 0))
        loss = F.cross_entropy(model(tokens).float().flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        losses.append(float(mean))
    return {"losses": losses, "params": {k: v.full_tensor() for k, v in model.state_dict().items()}}


def _fsdp_checks() -> dict:
    """(A rank's work.) Everything the tests below look at, in one start of the ranks."""
    import torch.distributed as dist

    from kernels.model import TINY, Transformer, batch

    rank = dist.get_rank()
    # (on 4 ranks, data parallelism's methods too: tests/test_distributed.py runs them on 2)
    found = {"data_parallel": dp.train_all(steps=STEPS, vary_init=True)
             if dist.get_world_size() == 4 else None,
             "fp32": fsdp.train(STEPS, vary_init=True),  # each rank built from its own seed
             "bf16": fsdp.train(STEPS, compute_dtype=torch.bfloat16)}
    # the toy: broadcast of parameters and buffers, ties, a frozen parameter, SGD
    torch.manual_seed(rank)
    toy = _Toy()
    ours = _copy(toy.state_dict())  # (a state_dict holds the tensors: broadcast in place)
    torch.manual_seed(0)
    reference = _Toy()  # rank 0's
    wrapped = fsdp.FSDP(toy, units=[toy.fc2, toy.fc3])  # fc2's weight is tied: to the root
    found["toy_constructed"] = wrapped.full_state_dict()
    found["toy_reference_init"] = _copy(reference.state_dict())
    found["toy_own_init"] = ours
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 5, generator=g), torch.randn(8, 6, generator=g)
    _toy_steps(reference, x, y)
    _toy_steps(wrapped, x.chunk(dist.get_world_size())[rank],
               y.chunk(dist.get_world_size())[rank])
    found["toy_trained"] = wrapped.full_state_dict()
    found["toy_reference"] = reference.state_dict()
    model = fsdp.FSDP(Transformer(TINY, seed=0))
    tokens, targets = dp.rank_slice(*batch(16, 4, 16, 0))
    found["freed"] = _freed_between_forward_and_backward(model, tokens, targets)
    try:
        found["fully_shard"] = {"fp32": _fully_shard(STEPS, torch.float32),
                                "bf16": _fully_shard(STEPS, torch.bfloat16)}
    except Exception as err:  # noqa: BLE001  (the test says why it skips)
        found["fully_shard"] = f"{type(err).__name__}: {err}"
    return found


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
def ranks(request):
    return request.param, launch.run(_fsdp_checks, request.param, device="cpu", timeout_s=300)


@pytest.fixture(scope="module")
def reference():
    return {"fp32": dp.single_process(STEPS), "init": dp.single_process(0)}


def test_data_parallel_on_4_ranks(ranks, reference):
    from test_distributed import check_data_parallel_runs

    n, found = ranks
    if n != 4:
        pytest.skip("data parallelism on 2 ranks: tests/test_distributed.py")
    check_data_parallel_runs([r["data_parallel"] for r in found], reference["fp32"])


def test_fsdp_trains_as_one_process(ranks, reference):
    _, found = ranks
    ref = reference["fp32"]
    for rank in found:  # built from different seeds: the broadcast made them rank 0's
        run = rank["fp32"]
        assert run["losses"] == pytest.approx(ref["losses"], rel=1e-5)
        assert list(run["params"]) == list(ref["params"])  # every name, in state_dict's order
        assert dp.max_difference(run, ref) < FP32_ATOL


def test_fsdp_keeps_a_1_over_n_share(ranks, reference):
    n, found = ranks
    ref = reference["fp32"]
    whole = ref["param_bytes"] + ref["state_bytes"]  # fp32 weights, AdamW's moments and steps
    for rank in found:
        mine = rank["fp32"]["param_bytes"] + rank["fp32"]["state_bytes"]
        # a 1/n share, plus the padding to a multiple of n and AdamW's step counts (one a
        # parameter on every rank): within 1% of whole/n here
        assert whole / n <= mine <= 1.01 * whole / n, (mine, whole)
    assert sum(r["fp32"]["param_bytes"] for r in found) >= ref["param_bytes"]


def test_fsdp_frees_whole_parameters_between_forward_and_backward(ranks):
    n, found = ranks
    for rank in found:
        freed = rank["freed"]
        # each block's pre-hook saw the root's whole parameters and its own: none outlive the
        # forward (the graph saved notes, not tensors), and none the backward
        assert freed["watched"] > 0 and freed["alive_after_forward"] == 0
        assert freed["whole_after_backward"] == [False] * 3
        # 3 units: gathered once each in the forward, again in the backward, and their
        # gradients reduce-scattered once each
        gathers = [k for k in freed["forward"] if "allgather" in k]
        assert len(gathers) == 1 and freed["forward"][gathers[0]] == 3, freed["forward"]
        assert freed["backward"][gathers[0]] == 3, freed["backward"]
        scatters = [k for k in freed["backward"] if "reduce_scatter" in k]
        assert len(scatters) == 1 and freed["backward"][scatters[0]] == 3, freed["backward"]


def test_fsdp_broadcasts_parameters_and_buffers_and_shards_ties(ranks):
    _, found = ranks
    rank0_init = found[0]["toy_reference_init"]
    assert not torch.equal(found[1]["toy_own_init"]["scale"], rank0_init["scale"])
    for rank in found:
        for key, value in rank["toy_constructed"].items():  # both names of the tied weight
            assert torch.equal(value, rank0_init[key]), key
        assert list(rank["toy_constructed"]) == list(rank0_init)
        # SGD: a sum where the mean belongs would be off by about lr·|grad|, 1e-2
        for key, value in rank["toy_trained"].items():
            torch.testing.assert_close(value, rank["toy_reference"][key], rtol=1e-5, atol=1e-6,
                                       msg=key)


def test_fsdp_bf16_compute_dtype(ranks, reference):
    _, found = ranks
    ref, init = reference["fp32"], reference["init"]["params"]
    for rank in found:
        run = rank["bf16"]
        assert run["losses"] == pytest.approx(ref["losses"], rel=BF16_LOSS_RTOL)
        moved = torch.cat([(ref["params"][k] - init[k]).flatten() for k in init])
        error = torch.cat([(run["params"][k] - ref["params"][k]).flatten() for k in init])
        assert error.norm() < BF16_UPDATE_RTOL * moved.norm(), float(error.norm() / moved.norm())
        assert all(v.dtype == torch.float32 for v in run["params"].values())  # fp32 masters


def test_fsdp_beside_torch_fully_shard(ranks):
    n, found = ranks
    theirs = found[0]["fully_shard"]
    if isinstance(theirs, str):
        pytest.skip(f"torch {torch.__version__}: fully_shard failed on CPU/gloo: {theirs}")
    # the same arithmetic (fp32 shards, bf16 gathers for bf16, fp32 averaged reduce-scatters):
    # identical to the bit on torch 2.14.1 (0.0 seen, both dtypes); FP32_ATOL leaves room for a
    # torch that sums a reduction in another order
    for dtype in ("fp32", "bf16"):
        ours = found[0][dtype]
        assert ours["losses"] == pytest.approx(theirs[dtype]["losses"], rel=1e-5), dtype
        assert dp.max_difference(ours, theirs[dtype]) < FP32_ATOL, dtype
