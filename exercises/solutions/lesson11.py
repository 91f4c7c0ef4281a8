"""Solutions (and known-wrong answers) of lesson 11's exercises."""

_HALVES = '''
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    n = dist.get_world_size()
    chunk = torch.empty(x.numel() // n, dtype=x.dtype)
    reduce_scatter(chunk, x)
    out = torch.empty_like(x)
    all_gather(out, chunk, async_op=True).wait()
    return out / n
'''

_PIPELINE = '''
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    start = 0
    for chunk, work in zip(gathered, works):
        work.wait()
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows
'''

SOLUTIONS = {"11.halves": _HALVES, "11.pipeline": _PIPELINE}


def _edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"{old!r} is not in the solution")
    return source.replace(old, new)


WRONG = {
    "11.halves": {
        # the sum, not the mean: gradients not divided by the rank count
        "not divided by n": _edit(_HALVES, "return out / n", "return out"),
        # the wrong averaging factor
        "divided by n - 1": _edit(_HALVES, "return out / n", "return out / (n - 1)"),
        # the handle dropped: the gathered values have not landed when out is read
        "no wait": _edit(_HALVES, "all_gather(out, chunk, async_op=True).wait()",
                         "all_gather(out, chunk, async_op=True)"),
        # the all-gather of this rank's own input chunk, not of the reduced one
        "gathers the input": _edit(_HALVES, "all_gather(out, chunk, async_op=True)",
                                   "all_gather(out, x.chunk(n)[dist.get_rank()].contiguous(), "
                                   "async_op=True)"),
        # an all-reduce by another name
        "all_reduce": _edit(_HALVES, "    reduce_scatter(chunk, x)\n    out = torch.empty_like(x)"
                            "\n    all_gather(out, chunk, async_op=True).wait()\n",
                            "    out = x.clone()\n    dist.all_reduce(out)\n"),
        # divides the input in place: the caller's tensor changed
        "input divided in place": _edit(_HALVES, "    reduce_scatter(chunk, x)\n",
                                        "    x /= n\n    reduce_scatter(chunk, x)\n")
        .replace("return out / n", "return out"),
        # a second, spare all-gather
        "gathered twice": _edit(_HALVES, "    return out / n", "    all_gather(out, chunk)\n"
                                "    return out / n"),
    },
    "11.pipeline": {
        # the chunk's offset inside a shard forgotten: every chunk lands on the shard's first rows
        "no start offset": _edit(_PIPELINE, "out=out[peer * m + start:peer * m + start + rows]",
                                 "out=out[peer * m:peer * m + rows]"),
        # the rank's offset forgotten: the peers' rows written over rank 0's
        "no peer offset": _edit(_PIPELINE, "out=out[peer * m + start:peer * m + start + rows]",
                                "out=out[start:start + rows]"),
        # every chunk awaited before the first matmul: right values, nothing overlapped
        "waits for all first": _edit(_PIPELINE, "    for chunk, work in zip(gathered, works):\n"
                                     "        work.wait()\n",
                                     "    for work in works:\n        work.wait()\n"
                                     "    for chunk in gathered:\n"),
        # the offset from this chunk's size: right for the even chunks, off on the ragged last
        "ragged last chunk": _edit(_PIPELINE, "    start = 0\n    for chunk, work in zip(gathered, "
                                   "works):\n", "    for c, (chunk, work) in enumerate(zip("
                                   "gathered, works)):\n        start = c * chunk.shape[1]\n")
        .replace("        start += rows\n", ""),
        # multiplied before it arrived: the wait after the matmuls
        "wait after the matmul": _edit(_PIPELINE, "        work.wait()\n", "")
        .replace("        start += rows\n", "        start += rows\n        work.wait()\n"),
        # this rank's own rows multiplied again (right values, a chunk of redundant work)
        "own rows again": _edit(_PIPELINE, "            if peer != rank:\n                torch.mm",
                                "            if True:\n                torch.mm"),
        # the rows per rank taken as the chunk's, not the shard's
        "m from the chunk": _edit(_PIPELINE, "    m = out.shape[0] // n\n",
                                  "    m = gathered[0].shape[1]\n"),
    },
}
