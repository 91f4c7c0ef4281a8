"""Exercises of lesson 11: an all-reduce built from its two halves.

* ``11.halves``: the mean of every rank's tensor, as an all-reduce computes it, built from a
  reduce-scatter (each rank sums one 1/n chunk) and an all-gather (every rank receives every
  summed chunk), the all-gather launched asynchronously and awaited. The check runs the answer
  in 2 gloo processes (any machine) on fresh random tensors of several lengths; in those
  processes an asynchronous all-gather's result lands only when its handle is waited on (as on
  a GPU, where the copy finishes later on another stream), so an answer that forgets ``wait()``
  gets zeros, and an answer that calls ``all_reduce`` itself is told to use the halves.
"""

from __future__ import annotations

import random

import torch

from exercises import CannotCheck, Mismatch, compare, exercise, expect

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
LENGTHS = (2, 6, 1000, 4096)


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


def _rank_check(source: str, seed: int) -> dict:
    """(A rank's work.) The answer ``source`` run on this rank's random tensors: what it
    returned for each length, the inputs, and which collectives it called."""
    import torch.distributed as dist

    from exercises.triton_child import imported
    from kernels.distributed import collectives

    calls = []
    real_gather, real_scatter = collectives.all_gather, collectives.reduce_scatter

    def all_gather(output, input, async_op=False):
        calls.append("all_gather")
        if not async_op:
            return real_gather(output, input)
        result = torch.empty_like(output)
        real_gather(result, input)
        output.zero_()  # not there yet: it lands when the handle is waited on
        return _Landed(output, result)

    def reduce_scatter(output, input, async_op=False):
        calls.append("reduce_scatter")
        return real_scatter(output, input, async_op=async_op)

    def refused(*args, **kwargs):
        calls.append("all_reduce")
        raise RuntimeError("this exercise builds the all-reduce from its halves: "
                           "dist.all_reduce is not available here")

    collectives.all_gather, collectives.reduce_scatter = all_gather, reduce_scatter
    dist.all_reduce = refused
    module = imported(source)
    g = torch.Generator().manual_seed(seed * 31 + dist.get_rank())
    found = []
    for length in LENGTHS:
        x = torch.randn(length, generator=g)
        kept = x.clone()
        try:
            got = module.mean_all_reduce(x)
        except RuntimeError as why:
            return {"error": str(why), "calls": calls}
        found.append({"x": kept, "got": got.detach().clone() if isinstance(got, torch.Tensor)
                      else got, "changed": not torch.equal(x, kept)})
    return {"results": found, "calls": calls}


@exercise("11.halves", title="An all-reduce from a reduce-scatter and an all-gather",
          stub=HALVES_STUB, answers=("mean_all_reduce",),
          section="Measured: the latency floor", intro="""
An all-reduce is a reduce-scatter followed by an all-gather: that is where a ring's
`2(n−1)/n` comes from. Write `mean_all_reduce(x)`: the mean of every rank's `x`, from
`reduce_scatter` and an asynchronous `all_gather` whose handle you wait on. The check runs your
function in 2 gloo processes on fresh random tensors (its own copy of your cell's text: nothing
you define in the notebook reaches them otherwise); there an all-gather's result lands only when
its handle is waited on, as on a GPU.""")
def check_halves(mean_all_reduce, report) -> None:
    from exercises.triton_child import answer_source
    from kernels.distributed import launch

    expect(callable(mean_all_reduce), f"mean_all_reduce expected a function, got "
           f"{type(mean_all_reduce).__name__}", "keep def mean_all_reduce(x)")
    # the stub's own import first (answer_source follows modules and the student's functions,
    # not names imported from elsewhere): in the ranks it binds the checking versions
    source = ("from kernels.distributed.collectives import all_gather, reduce_scatter\n"
              + answer_source(mean_all_reduce))
    seed = random.randrange(1 << 30)
    try:
        ranks = launch.run(_rank_check, 2, source, seed, timeout_s=60, device="cpu")
    except launch.WorkerError as why:
        if "did not finish" in str(why):
            raise Mismatch("your function did not return within 60 s on 2 ranks: does every rank "
                           "call the same collectives in the same order?", HINT) from None
        first = str(why).strip().splitlines()[-1]
        raise Mismatch(f"your function raised on a rank: {first}", HINT) from None
    except OSError as why:  # no sockets or processes in this sandbox
        raise CannotCheck(f"cannot start 2 processes here: {why}") from None
    for rank, seen in enumerate(ranks):
        if "error" in seen or "all_reduce" in seen["calls"]:
            raise Mismatch("your function called dist.all_reduce: build it from reduce_scatter "
                           "and all_gather", HINT)
        expect(seen["calls"].count("reduce_scatter") == len(LENGTHS)
               and seen["calls"].count("all_gather") == len(LENGTHS),
               f"rank {rank} made {seen['calls'].count('reduce_scatter')} reduce-scatters and "
               f"{seen['calls'].count('all_gather')} all-gathers for {len(LENGTHS)} calls: "
               "expected one of each per call", HINT)
    for i, length in enumerate(LENGTHS):
        mean = (ranks[0]["results"][i]["x"] + ranks[1]["results"][i]["x"]) / 2
        for rank, seen in enumerate(ranks):
            row = seen["results"][i]
            expect(not row["changed"], f"rank {rank}: your function changed its input x (length "
                   f"{length}); return a new tensor", "reduce_scatter reads x: it need not be "
                   "written")
            compare(row["got"], mean, what=f"rank {rank}, length {length}", atol=1e-6,
                    rtol=1e-6, hint=HINT)
    report.line(f"on 2 gloo processes, lengths {', '.join(map(str, LENGTHS))}: every rank holds "
                "the mean of both ranks' tensors, from one reduce-scatter and one awaited "
                "all-gather per call")
