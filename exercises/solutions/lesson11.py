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

SOLUTIONS = {"11.halves": _HALVES}


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
}
