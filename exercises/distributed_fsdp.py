"""Exercise distributed.fsdp_backward of lesson 20: FSDP's backward, a unit's whole gradients
reduce-scattered into this rank's shards (what :class:`kernels.distributed.fsdp._Gather` does
in its backward).

Why a check of its own, in real processes: the answer is one collective whose layout must be
the transpose of the unit's all-gather, and only real ranks show a layout that holds on one
rank and not on two, a mean taken as a sum, or padding that some ranks receive whole. So the
answer runs in gloo processes (any machine), on groups of 1, 2, 3 and 4 ranks (the first ranks
of one launch of 4, as exercise distributed.halves does; its :class:`~exercises.distributed._Pool`
keeps them for the checks that follow), two ways:

* **alone**, on a unit of parameters no rank count divides (a 1-element one: every rank but 0
  receives only padding), float32 and bfloat16 gradients whose sizes differ by 10 orders of
  magnitude between parameters and by 64× from one rank to the next (a bf16 sum loses the small
  ones), one parameter with a zero gradient (the forward never used it), three calls each on
  new data: each shard's gradient against the float64 mean of every rank's padded gradient,
  in float32, with the collectives it ran counted (one reduce-scatter, nothing else), the
  unit's gathered parameters freed, its inputs untouched, and the tensors one call returned
  unchanged by the next (a buffer kept between calls);
* **in training**: :class:`kernels.distributed.fsdp.FSDP` with the answer as its backward,
  float64 compute on fp32 shards, three SGD steps of two micro-batches each (gradients
  accumulate into the shards' ``.grad``), against one process's float64 training on the whole
  batch.
"""

from __future__ import annotations

import random

import torch

from exercises import CannotCheck, Mismatch, compare, exercise, expect
from exercises import distributed_fsdp_ranks as ranks
from exercises.distributed_ranks import same_bits
from exercises.shipped_code import shipped_source

FSDP_STUB = '''
import torch
import torch.distributed as dist
import torch.nn.functional as F

from kernels.distributed.collectives import reduce_scatter


def shard_gradients(unit, grads):
    """The backward of a unit's all-gather: this rank's shards' gradients, as a list.

    grads[i] is this rank's whole gradient of the unit's parameter i (shape unit.shapes[i],
    in the compute dtype: float32 or bfloat16). Parameter i is flattened, padded with zeros to
    n·unit.sizes[i] elements (its unit.numels[i] real ones first) and cut in n pieces; rank r's
    shard is piece r. Return, for each parameter, this rank's piece of the mean over the n
    ranks of their whole gradients: unit.sizes[i] elements, float32 (the shards' dtype),
    summed in float32. Send the whole unit in ONE reduce-scatter, laid out as unit.gather()'s
    all-gather: rank-major, [rank 0's pieces of every parameter | rank 1's | ...];
    reduce_scatter(out, full) sums full over the ranks and leaves this rank's 1/n of it in
    out. Every gradient of the unit is here now: free its whole parameters (unit.full = None).
    n = dist.get_world_size()."""
    ...
'''


HINT, SHAPES, STEPS, WORLDS = ranks.HINT, ranks.SHAPES, ranks.STEPS, ranks.WORLDS


def _expected(rows: list[tuple[int, dict]], world: int) -> list[torch.Tensor]:
    """Each rank's shards' gradients: the float64 mean of every rank's padded gradients."""
    first = rows[0][1]
    means = []
    for i, (k, s) in enumerate(zip(first["numels"], first["sizes"], strict=True)):
        total = sum(row["grads"][i].double().flatten() for _, row in rows) / world
        means.append(torch.cat([total, total.new_zeros(s * world - k)]).view(world, s))
    return means


def _judge_alone(case: str, rows: list[tuple[int, dict]]) -> None:
    world = rows[0][1]["world"]
    means = _expected(rows, world)
    size = [sum(row["grads"][i].double().abs().flatten() for _, row in rows) / world
            for i in range(len(SHAPES))]
    for rank, row in rows:
        where = f"{case}, rank {rank}"
        seen = row["seen"]
        scatters = sum(v for k, v in seen.items() if "reduce_scatter" in k)
        others = {k: v for k, v in seen.items() if "reduce_scatter" not in k}
        expect(not others, f"{where}: your function ran {others} besides its reduce-scatters: "
               "an all-reduce (or a gather) leaves every rank the whole gradient, n times the "
               "memory and twice the traffic a reduce-scatter needs", HINT)
        expect(scatters == 1 or (world == 1 and scatters == 0), f"{where}: {scatters} "
               f"reduce-scatters for one unit of {len(SHAPES)} parameters: expected one (each "
               "message pays the latency floor of section 3: send the unit as one buffer, "
               "laid out as its all-gather)", HINT)
        expect(row["got"] is not None and len(row["got"]) == len(SHAPES),
               f"{where}: shard_gradients returned {row['kind']}"
               + (f" of {len(row['got'])} tensors" if row["got"] is not None else "") +
               f": expected a list of {len(SHAPES)} tensors, one per parameter", HINT)
        expect(not row["changed"], f"{where}: your function changed its input grads: "
               "autograd may hand the same tensor to another node; make new tensors", HINT)
        expect(row["freed"] != "deleted", f"{where}: your function deleted unit.full, and "
               "FSDP reads it afterwards (is the unit gathered?): set it to None", HINT)
        expect(row["freed"] is None, f"{where}: the unit's whole parameters are still held "
               "after its backward (unit.full is not None): every gradient of the unit has "
               "arrived, and FSDP exists to keep only the shards between uses", HINT)
        for i, (got, mean) in enumerate(zip(row["returned"], means, strict=True)):
            expected, s = mean[rank].float(), row["sizes"][i]
            what = (f"{where}: parameter {i} (shape {SHAPES[i]}, {row['numels'][i]} "
                    f"elements, shards of {s})")
            real = max(min(row["numels"][i] - rank * s, s), 0)  # the rest is padding
            if isinstance(got, torch.Tensor) and got.shape == expected.shape and \
                    not bool((got[real:] == 0).all()):
                raise Mismatch(f"{what}: its last {s - real} elements are padding (past the "
                               f"parameter's end) and must be zeros, got {got[real:].tolist()}"
                               ": a norm or a clipping over the shards reads them", HINT)
            bound = torch.cat([size[i], size[i].new_zeros(s * world - row["numels"][i])])
            # fp32 sums of n terms, then one division: a few fp32 ulps of the terms' size
            atol = 4 * world * torch.finfo(torch.float32).eps * bound.view(world, s)[rank]
            compare(got, expected, what=what, atol=atol.float() + 1e-30, rtol=0, hint=HINT)


def _judge_training(rows: list[tuple[int, dict]], reference: dict) -> None:
    for rank, row in rows:
        where = f"{row['case']}, rank {rank}"
        held = [i for step in row["kept"] for i, kept in enumerate(step) if kept]
        expect(not held, f"{where}: after a backward, unit {held[:1]} still held its whole "
               "parameters: set unit.full = None in your function", HINT)
        for name, want in reference.items():
            compare(row["params"][name].double(), want, what=f"{where}: {name} after {STEPS} "
                    f"SGD steps of 2 micro-batches, against one process's float64 training on "
                    "the whole batch", atol=ranks.TRAIN_ATOL, rtol=0, hint=HINT)


@exercise("distributed.fsdp_backward", title="FSDP's backward: one reduce-scatter per unit",
          stub=FSDP_STUB, answers=("shard_gradients",),
          section="Data parallelism by hand", intro="""
FSDP's backward is its all-gather run backwards. Write `shard_gradients(unit, grads)`: pad
each gradient as its parameter was, lay the unit out rank-major as `Unit.gather` did,
reduce-scatter it once in float32, return this rank's piece of each mean gradient, and free
the gathered parameters. The check runs a copy of your function (with its imports) in 1 to 4
gloo processes: alone against the float64 mean, then as `fsdp.FSDP`'s backward against one
process's training.""")
def check_fsdp_backward(shard_gradients, report) -> None:
    expect(callable(shard_gradients), f"shard_gradients expected a function, got "
           f"{type(shard_gradients).__name__}", "keep def shard_gradients(unit, grads)")
    try:
        source = shipped_source(shard_gradients)
    except (OSError, TypeError) as why:
        raise CannotCheck(f"cannot read the source of shard_gradients ({why}), so it cannot "
                          "be sent to the ranks: define it in a cell of its own") from None
    seed = random.randrange(1 << 30)
    try:
        records_of = ranks.RANKS.run(source, seed)
    except OSError as why:  # no sockets or processes in this sandbox
        raise CannotCheck(f"cannot start {WORLDS[-1]} processes here: {why}") from None
    by_case: dict[str, list[tuple[int, dict]]] = {}
    for rank, records in enumerate(records_of):
        for row in records:
            by_case.setdefault(row["case"], []).append((rank, row))
    reference = ranks._one_process(seed)
    for case, rows in by_case.items():
        if rows[0][1]["part"] == "alone":
            _judge_alone(case, rows)
    for case, rows in by_case.items():
        for rank, row in rows:
            if row["part"] == "alone":
                for i, (got, kept) in enumerate(zip(row["got"], row["returned"], strict=True)):
                    expect(same_bits(got.detach(), kept), f"{case}, rank {rank}: the "
                           f"gradient of parameter {i} this call returned was changed by a "
                           "later call: keep no buffer between calls (gradients accumulate "
                           "into the shards' .grad across micro-batches)", HINT)
    trained = [rows for rows in by_case.values() if rows[0][1]["part"] == "training"]
    expect(len(trained) == len(WORLDS), "FSDP could not train with what your function "
           "returned (one tensor of unit.sizes[i] elements per parameter, unit.full freed)",
           HINT)
    for rows in trained:
        _judge_training(rows, reference)
    report.line(f"on groups of {', '.join(map(str, WORLDS))} gloo processes: float32 and "
                f"bfloat16 gradients of sizes from 1e-3 to 1e4 (×{ranks.RANK_SCALE:g} a rank), "
                "parameters of 1 to 15 elements padded, one with no gradient, each three "
                "times: every shard's gradient the float64 mean to fp32 rounding, zero "
                "padding, from one reduce-scatter, the gathered parameters freed; and as "
                f"FSDP's backward, {STEPS} SGD steps of 2 micro-batches match one process")
