"""Exercises of lesson 18: an all-reduce built from its two halves, and a matmul pipelined with
its all-gather.

* ``distributed.halves``: the mean of every rank's tensor, as an all-reduce computes it, built
  from a reduce-scatter (each rank sums one 1/n chunk) and an all-gather (every rank receives
  every summed chunk), the all-gather launched asynchronously and awaited. The check runs the answer
  in 2 gloo processes (any machine) on fresh random tensors of several lengths; in those
  processes an asynchronous all-gather's result lands only when its handle is waited on (as on
  a GPU, where the copy finishes later on another stream), so an answer that forgets ``wait()``
  gets zeros, and an answer that calls ``all_reduce`` itself is told to use the halves.
* ``distributed.pipeline``: the loop of :func:`kernels.distributed.tensor_parallel.pipelined` that
  waits for each chunk of the all-gather and multiplies its peer rows into the right rows of
  the output. The check simulates the ranks in this process: a chunk's rows land (NaN before)
  only when its handle is waited on, and a dispatch mode logs the order of waits and matmuls,
  so waiting for every chunk before the first matmul (right values, no overlap) is caught, and
  so is recomputing this rank's own rows.
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


@exercise("distributed.halves", title="An all-reduce from a reduce-scatter and an all-gather",
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


# -- distributed.pipeline: the loop that multiplies each gathered chunk as soon as it lands --------

PIPELINE_STUB = '''
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out (n·m, N) with A's rows times b_shard, chunk after chunk.
    gathered[c] (n, rows of chunk c, K) holds rows start … start + rows of every rank's shard
    (gathered[c][p]: rank p's), but only once works[c].wait() has returned; chunks are
    ceil(m / chunks) rows, the last one shorter. Rank p's shard is rows p·m … (p + 1)·m of A
    (m = out.shape[0] // n) and of out; this rank's own rows are in out already. Wait for
    chunk c just before multiplying it (never for all chunks first: then nothing overlaps);
    torch.mm(x, b_shard, out=out[i:j]) writes a product into rows i … j of out."""
    ...
'''

PIPELINE_HINT = ("n = gathered[0].shape[0]; m = out.shape[0] // n; start = 0; for each chunk "
                 "and its work: work.wait(); rows = chunk.shape[1]; for every peer != rank: "
                 "torch.mm(chunk[peer], b_shard, out=out[peer*m + start : peer*m + start + "
                 "rows]); then start += rows")
# (ranks, this rank, rows per rank, chunks): ragged last chunks, one chunk, more than 2 ranks
PIPELINE_CASES = ((2, 0, 7, 3), (2, 1, 10, 4), (3, 1, 5, 2), (4, 3, 9, 5), (2, 1, 6, 1),
                  (3, 0, 8, 8))


class _Arrives:
    """An all-gather's handle: its chunk lands in ``buffer`` (NaN until then) on ``wait()``,
    which it writes in the log."""

    def __init__(self, buffer: torch.Tensor, result: torch.Tensor, index: int, log: list):
        self.buffer, self.result, self.index, self.log = buffer, result, index, log
        self.waited = False

    def wait(self, *args, **kwargs) -> bool:
        if not self.waited:
            self.buffer.copy_(self.result)
            self.waited = True
        self.log.append(("wait", self.index, 0))
        return True

    def is_completed(self) -> bool:
        return self.waited


def _matmul_log(gathered: list[torch.Tensor], log: list):
    """A dispatch mode that writes each matrix product reading a gathered chunk in ``log``:
    ``("mm", chunk, rows multiplied)``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    storages = {g.untyped_storage().data_ptr(): c for c, g in enumerate(gathered)}
    products = {"mm", "addmm", "bmm", "baddbmm", "matmul", "dot", "mv", "einsum"}

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = kwargs.get("out")
            before = tuple(out.shape) if isinstance(out, torch.Tensor) else None
            if func.overloadpacket.__name__ in products:
                for arg in args:
                    if isinstance(arg, torch.Tensor) and arg.numel():
                        c = storages.get(arg.untyped_storage().data_ptr())
                        if c is not None:
                            log.append(("mm", c, arg.numel() // arg.shape[-1]))
            result = func(*args, **kwargs)
            if before is not None and tuple(out.shape) != before:
                log.append(("resized", -1, f"{before[0]} rows received a product of "
                            f"{out.shape[0]}"))
            return result

    return Log()


def _pipeline_case(multiply_arrived, n: int, rank: int, m: int, chunks: int,
                   g: torch.Generator) -> None:
    from kernels.distributed.tensor_parallel import chunk_bounds

    k, cols = (int(torch.randint(3, 17, (), generator=g)) for _ in range(2))
    shards = [torch.randn(m, k, generator=g) for _ in range(n)]
    b = torch.randn(k, cols, generator=g)
    bounds = chunk_bounds(m, chunks)
    log: list = []
    gathered, works = [], []
    for c, (start, stop) in enumerate(bounds):
        buffer = torch.full((n, stop - start, k), float("nan"))  # not there yet
        gathered.append(buffer)
        works.append(_Arrives(buffer, torch.stack([s[start:stop] for s in shards]), c, log))
    expected = torch.cat(shards) @ b
    out = torch.full((n * m, cols), float("nan"))
    out[rank * m:(rank + 1) * m] = expected[rank * m:(rank + 1) * m]
    case = (f"{n} ranks, rank {rank}, {m} rows per rank in chunks of "
            f"{', '.join(str(stop - start) for start, stop in bounds)} rows")
    with _matmul_log(gathered, log):
        multiply_arrived(out, gathered, works, b, rank)
    resized = [what for kind, _, what in log if kind == "resized"]
    # an out= slice with the wrong row count still gets the right rows here: torch resizes the
    # view (its storage is all of out) and writes from its start; the slice is wrong all the same
    expect(not resized, f"{case}: an out= slice of {resized[0] if resized else ''}, so torch "
           "resized it to fit. Make the slice exactly the chunk's rows", PIPELINE_HINT)
    waited = [c for kind, c, _ in log if kind == "wait"]
    for c in range(len(bounds)):
        expect(c in waited, f"{case}: chunk {c} was never waited for, so its rows never "
               "arrived (they are NaN in the check)", PIPELINE_HINT)
    for i, (kind, c, _) in enumerate(log):
        expect(kind != "mm" or ("wait", c, 0) in log[:i], f"{case}: chunk {c} was multiplied "
               "before its works[c].wait(): on a GPU its rows would still be in flight",
               PIPELINE_HINT)
    for c in range(len(bounds) - 1):
        before_next = log[:log.index(("wait", c + 1, 0))]
        expect(any(kind == "mm" and d == c for kind, d, _ in before_next),
               f"{case}: you waited for chunk {c + 1} before multiplying chunk {c}. The values "
               "are right, but every wait comes before the matmuls it could hide: nothing "
               "overlaps. Multiply each chunk right after its own wait", PIPELINE_HINT)
    rows = [sum(r for kind, d, r in log if kind == "mm" and d == c) for c in range(len(bounds))]
    for c, (start, stop) in enumerate(bounds):
        expect(rows[c] <= (n - 1) * (stop - start), f"{case}: chunk {c}: you multiplied "
               f"{rows[c]} rows, the peers' rows of it are {(n - 1) * (stop - start)}: this rank's "
               "own rows are in out already (skip peer == rank), and each row once",
               PIPELINE_HINT)
    compare(out, expected, what=case, atol=1e-5, rtol=1e-5, hint=PIPELINE_HINT)


@exercise("distributed.pipeline", title="Multiply each gathered chunk as soon as it lands",
          stub=PIPELINE_STUB, answers=("multiply_arrived",),
          section="Overlapping communication with compute", intro="""
`pipelined` launches every chunk's all-gather at once and multiplies this rank's own rows;
write the loop that follows, `multiply_arrived(out, gathered, works, b_shard, rank)`: for each
chunk in order, wait for it, then multiply every peer's rows of it into the right rows of
`out`. The check runs your function in this process on fresh random shards (2 to 4 ranks,
simulated; chunks of ragged sizes): each chunk's rows land only when its handle is waited on,
and it records the order of your waits and matmuls, since waiting for every chunk first gives
the right numbers with nothing overlapped.""")
def check_pipeline(multiply_arrived, report) -> None:
    expect(callable(multiply_arrived), f"multiply_arrived expected a function, got "
           f"{type(multiply_arrived).__name__}", "keep def multiply_arrived(out, gathered, "
           "works, b_shard, rank)")
    g = torch.Generator().manual_seed(random.randrange(1 << 30))
    for n, rank, m, chunks in PIPELINE_CASES:
        _pipeline_case(multiply_arrived, n, rank, m, chunks, g)
    report.line(f"{len(PIPELINE_CASES)} simulated ranks (2 to 4 ranks, ragged last chunks, one "
                "chunk): every peer row right, each chunk multiplied right after its own wait "
                "and before the next, this rank's rows not recomputed")
