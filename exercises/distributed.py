"""Exercise distributed.halves of lesson 20: an all-reduce built from its two halves (the
pipelined matmul is :mod:`exercises.distributed_pipeline`, the one-shot kernel
:mod:`exercises.distributed_one_shot`).

* ``distributed.halves``: the mean of every rank's tensor, as an all-reduce computes it, built
  from a reduce-scatter (each rank sums one 1/n chunk) and an all-gather (every rank receives
  every summed chunk), the all-gather launched asynchronously and awaited. The check runs the
  answer in 4 gloo processes (any machine); their first 1, 2, 3 and 4 ranks form a group of each
  size in turn, and in each the answer runs on fresh random float32, bfloat16 and float16 tensors
  of several lengths, each twice on new data. The processes stay for the checks that follow
  (:mod:`exercises.distributed_ranks`): starting four Pythons that import torch is most of a
  check's time. It sends the ranks the answer's text with what it names: the cell's
  imports as written (``import x``, ``from x import y as z``), or, for a name imported in
  another cell, an import made from the object (:func:`exercises.shipped_code.shipped_source`). An
  asynchronous all-gather's result lands only when its handle is waited on (as on a GPU, where
  the copy finishes later on another stream), so an answer that forgets ``wait()`` gets zeros;
  an answer that calls ``all_reduce`` itself is told to use the halves; the mean is judged in
  the input's dtype, the same bits on every rank, and a returned tensor must not change when
  the function is called again (a buffer kept between calls).
"""

from __future__ import annotations

import linecache
import random
import types

import torch

from exercises import CannotCheck, Mismatch, compare, exercise, expect
from exercises.distributed_ranks import (
    CASE,
    RANK_TIMEOUT_S,
    WORLD,
    Ranks,
    dtype_name,
    raised_in_answer,
    same_bits,
)
from exercises.shipped_code import shipped_source

HALVES_STUB = '''
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    """The element-wise mean over the ranks of each rank's x (1-D float, its length a multiple
    of the rank count n), as a new tensor, on every rank. Build it from the two halves:
    reduce_scatter(out, x) sums every rank's x and leaves this rank's 1/n chunk in out;
    all_gather(out, chunk, async_op=True) returns a handle whose .wait() makes out hold every
    rank's chunk, in rank order. n = dist.get_world_size()."""
    ...
'''

HINT = ("n = dist.get_world_size(); chunk = torch.empty(x.numel() // n, dtype=x.dtype); "
        "reduce_scatter(chunk, x); out = torch.empty_like(x); "
        "all_gather(out, chunk, async_op=True).wait(); return out / n")
WORLDS = tuple(range(1, WORLD + 1))  # one launch of WORLD ranks: its first form each group
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
CHUNKS = (1, 5, 256)  # elements of each rank's chunk: the length is the world size times this
CALLS = 2  # each (world size, dtype, length) twice, on new data: a buffer kept between calls shows
# a collective (or a group's rendezvous) that some rank never reaches fails after this, naming
# its case: generous, since a busy 2-core machine can take seconds for what takes milliseconds
REFUSED = "dist.all_reduce is not available here"



class _Landed:
    """An async all-gather's handle whose output lands when it is waited on."""

    def __init__(self, output: torch.Tensor, result: torch.Tensor):
        self.output, self.result, self.waited = output, result, False

    def wait(self, *args, **kwargs) -> bool:
        if not self.waited:
            self.output.copy_(self.result)
            self.waited = True
        return True

    def is_completed(self) -> bool:
        return self.waited


_CALLS: list[str] = []  # (in a rank) the collectives the answers called, in order


def _patch_collectives() -> None:
    """(In a rank, once.) The course's collectives replaced by ones that write their calls in
    :data:`_CALLS`; an async all-gather's output lands when its handle is waited on; and
    ``dist.all_reduce`` refused."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    from kernels.distributed import collectives

    real_gather, real_scatter = collectives.all_gather, collectives.reduce_scatter

    def all_gather(output, input, async_op=False):
        _CALLS.append("all_gather")
        if not async_op:
            return real_gather(output, input)
        result = torch.empty_like(output)
        real_gather(result, input)
        output.zero_()  # not there yet: it lands when the handle is waited on
        return _Landed(output, result)

    def reduce_scatter(output, input, async_op=False):
        _CALLS.append("reduce_scatter")
        return real_scatter(output, input, async_op=async_op)

    def refused(*args, **kwargs):
        _CALLS.append("all_reduce")
        raise RuntimeError(f"this exercise builds the all-reduce from its halves: {REFUSED}")

    collectives.all_gather, collectives.reduce_scatter = all_gather, reduce_scatter
    dist.all_reduce = distributed_c10d.all_reduce = refused


def _rank_check(source: str, seed: int, store, number: int) -> list[dict]:
    """(A rank's work, in a launch of ``max(WORLDS)`` ranks.) The answer ``source`` in a group
    of each size of :data:`WORLDS` (this rank joins those it fits in; ``store`` is the launch's,
    ``number`` makes this check's keys in it its own), on this rank's random tensors of every
    dtype and length, each twice: the inputs, what each call returned (kept as returned, and
    as it stands after every later call) and the collectives it called. The last group (all
    the ranks) stays the default one."""
    import datetime

    import torch.distributed as dist

    linecache.cache["<your cell>"] = (len(source), None, source.splitlines(True), "<your cell>")
    module = types.ModuleType("your_cell")
    try:
        exec(compile(source, "<your cell>", "exec"), vars(module))
    except Exception as why:
        said = raised_in_answer(why, source)
        raise RuntimeError(f"{CASE}running your cell{CASE}{said}") from None
    rank = dist.get_rank()
    timeout = datetime.timedelta(seconds=RANK_TIMEOUT_S)
    found = []
    for world in WORLDS:
        if rank >= world:
            continue
        dist.destroy_process_group()
        dist.init_process_group("gloo", store=dist.PrefixStore(f"halves/{number}/{world}", store),
                                rank=rank, world_size=world, timeout=timeout)
        g = torch.Generator().manual_seed(seed * 31 + world * 7 + rank)
        for dtype in DTYPES:
            for chunk in CHUNKS:
                for call in range(CALLS):
                    case = f"world size {world}, {dtype_name(dtype)}, length {world * chunk}" + (
                        ", second call on new data" if call else "")
                    x = torch.randn(world * chunk, generator=g).to(dtype)
                    kept = x.clone()
                    before = len(_CALLS)
                    try:
                        got = module.mean_all_reduce(x)
                    except Exception as why:
                        said = raised_in_answer(why, source)
                        raise RuntimeError(f"{CASE}{case}{CASE}{said}") from None
                    found.append({"world": world, "dtype": dtype, "length": world * chunk,
                                  "case": case, "x": kept, "got": got,
                                  "returned": got.detach().clone()
                                  if isinstance(got, torch.Tensor) else got,
                                  "changed": not torch.equal(x, kept),
                                  "calls": _CALLS[before:]})
        dist.barrier()  # (every rank connected before any leaves the group)
    return found


# the halves check's ranks: every collective but the answer's halves refused in them
RANKS = Ranks(_rank_check, HINT, setup=_patch_collectives, refusals={
    REFUSED: "your function called dist.all_reduce: build it from reduce_scatter and "
             "all_gather"})


@exercise("distributed.halves", title="An all-reduce from a reduce-scatter and an all-gather",
          stub=HALVES_STUB, answers=("mean_all_reduce",),
          section="Measured: the latency floor", intro="""
An all-reduce is a reduce-scatter followed by an all-gather: that is where a ring's
`2(n−1)/n` comes from. Write `mean_all_reduce(x)`: the mean of every rank's `x`, from
`reduce_scatter` and an asynchronous `all_gather` whose handle you wait on. The check runs your
function in gloo processes (any machine), on 1 to 4 ranks, in float32, bfloat16 and float16, on
fresh random tensors, each length twice. It runs its own copy of your function, with the
imports and constants it names: nothing else you define in the notebook reaches the ranks.
There an all-gather's result lands only when its handle is waited on, as on a GPU.""")
def check_halves(mean_all_reduce, report) -> None:
    expect(callable(mean_all_reduce), f"mean_all_reduce expected a function, got "
           f"{type(mean_all_reduce).__name__}", "keep def mean_all_reduce(x)")
    try:
        source = shipped_source(mean_all_reduce)
    except (OSError, TypeError) as why:
        raise CannotCheck(f"cannot read the source of mean_all_reduce ({why}), so it cannot "
                          "be sent to the ranks: define it in a cell of its own") from None
    try:
        ranks = RANKS.run(source, random.randrange(1 << 30))
    except OSError as why:  # no sockets or processes in this sandbox
        raise CannotCheck(f"cannot start {WORLDS[-1]} processes here: {why}") from None
    by_case: dict[str, list[tuple[int, dict]]] = {}
    for rank, records in enumerate(ranks):
        for row in records:
            by_case.setdefault(row["case"], []).append((rank, row))
    for case, rows in by_case.items():
        world, dtype = rows[0][1]["world"], rows[0][1]["dtype"]
        xs = [row["x"].double() for _, row in rows]
        mean = (sum(xs) / world).to(dtype)
        # each rounding of the sum and of the division is at most eps times the sum of
        # magnitudes
        atol = torch.finfo(dtype).eps * sum(x.abs() for x in xs) + torch.finfo(dtype).tiny
        for rank, row in rows:
            made = row["calls"]
            if "all_reduce" in made:
                raise Mismatch(f"{case}, rank {rank}: your function called dist.all_reduce: "
                               "build it from reduce_scatter and all_gather", HINT)
            expect(made.count("reduce_scatter") == 1 and made.count("all_gather") == 1,
                   f"{case}, rank {rank}: one call made {made.count('reduce_scatter')} "
                   f"reduce-scatters and {made.count('all_gather')} all-gathers: expected one "
                   "of each", HINT)
            expect(not row["changed"], f"{case}, rank {rank}: your function changed its input "
                   "x; return a new tensor", "reduce_scatter reads x: it need not be written")
            compare(row["returned"], mean, what=f"{case}, rank {rank}", atol=atol, rtol=0,
                    hint=HINT)
        first, got0 = rows[0][1]["returned"], rows[0][0]
        for rank, row in rows[1:]:
            if not same_bits(row["returned"], first):
                i = int(torch.nonzero(row["returned"] != first)[0])
                raise Mismatch(f"{case}: rank {got0} and rank {rank} returned different "
                               f"bits at index {i} ({first[i].item()!r} and "
                               f"{row['returned'][i].item()!r}): an all-reduce leaves the same "
                               "tensor on every rank", HINT)
    for case, rows in by_case.items():
        for rank, row in rows:
            expect(same_bits(row["got"].detach(), row["returned"]),
                   f"{case}, rank {rank}: the tensor this call returned was changed by a later "
                   "call: it held the mean when returned, and something else after the next "
                   "call. Keep no buffer between calls: return a new tensor each time", HINT)
    report.line(f"on groups of {', '.join(map(str, WORLDS))} gloo processes, "
                f"{', '.join(map(dtype_name, DTYPES))}, chunks of {', '.join(map(str, CHUNKS))} "
                f"elements per rank, each twice on new data: every rank holds the mean of every "
                "rank's tensor, in its dtype, the same bits on every rank, from one "
                "reduce-scatter and one awaited all-gather per call, and a returned tensor "
                "stays as it was")


# -- distributed.pipeline: the loop that multiplies each gathered chunk as soon as it lands --------
