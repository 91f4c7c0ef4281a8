"""Solution (and known-wrong answers) of lesson 20's exercise distributed.fsdp_backward: kept
apart from :mod:`exercises.solutions.distributed` so each file stays one exercise's story."""

_FSDP = '''
import torch
import torch.distributed as dist
import torch.nn.functional as F

from kernels.distributed.collectives import reduce_scatter


def shard_gradients(unit, grads):
    n = dist.get_world_size()
    unit.full = None
    pieces = [F.pad(g.float().flatten(), (0, s * n - k)).view(n, s)
              for g, k, s in zip(grads, unit.numels, unit.sizes)]
    full = torch.cat(pieces, dim=1).flatten()
    mine = torch.empty(full.numel() // n)
    reduce_scatter(mine, full)
    return list((mine / n).split(unit.sizes))
'''

SOLUTIONS = {"distributed.fsdp_backward": _FSDP}


def _edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"{old!r} is not in the solution")
    return source.replace(old, new)


WRONG = {
    "distributed.fsdp_backward": {
        # the sum over the ranks: a step n times too large
        "not divided by n": _edit(_FSDP, "(mine / n)", "mine"),
        # the mean over n - 1 ranks
        "divided by n - 1": _edit(_FSDP, "(mine / n)", "(mine / max(n - 1, 1))"),
        # the gathered parameters kept: the whole unit stays in memory after its backward
        "not freed": _edit(_FSDP, "    unit.full = None\n", ""),
        # freed by deleting the attribute: FSDP reads unit.full afterwards
        "deleted, not set to None": _edit(_FSDP, "    unit.full = None\n", "    del unit.full\n"),
        # the pieces side by side parameter-major: right on one rank only
        "parameter-major layout": _edit(_FSDP, "dim=1", "dim=0"),
        # summed in the compute dtype (bf16 loses the small ranks' gradients), widened after
        "summed in bf16": _edit(_edit(_FSDP, "g.float().flatten()", "g.flatten()"),
                                "torch.empty(full.numel() // n)",
                                "torch.empty(full.numel() // n, dtype=full.dtype)")
        .replace("(mine / n)", "(mine.float() / n)"),
        # returned in the compute dtype, not the shards' float32
        "returned in the compute dtype": _edit(_FSDP, "return list((mine / n).split(unit.sizes))",
                                               "return [p.to(grads[0].dtype) for p in "
                                               "(mine / n).split(unit.sizes)]"),
        # the padding at the front: every piece shifted
        "padded at the front": _edit(_FSDP, "(0, s * n - k)", "(s * n - k, 0)"),
        # split by the parameters' sizes, not the shards'
        "split by numels": _edit(_FSDP, "split(unit.sizes)", "split(unit.numels)"),
        # the padding filled with ones, not zeros
        "padded with ones": _edit(_FSDP, "(0, s * n - k))", "(0, s * n - k), value=1.0)"),
        # an all-reduce of the whole unit, then this rank's slice: right values, twice the
        # traffic, and every rank holds every gradient for a moment
        "all-reduce and slice": _edit(_FSDP, "    mine = torch.empty(full.numel() // n)\n"
                                      "    reduce_scatter(mine, full)\n",
                                      "    dist.all_reduce(full)\n"
                                      "    mine = full.view(n, -1)[dist.get_rank()]\n"),
        # one reduce-scatter per parameter: right values, one latency floor each
        "one reduce-scatter per parameter": _edit(
            _FSDP, "    full = torch.cat(pieces, dim=1).flatten()\n"
            "    mine = torch.empty(full.numel() // n)\n    reduce_scatter(mine, full)\n",
            "    parts = []\n    for p in pieces:\n        part = torch.empty(p.shape[1])\n"
            "        reduce_scatter(part, p.flatten())\n        parts.append(part)\n"
            "    mine = torch.cat(parts)\n"),
        # the gradients divided in place before the sum: autograd's tensors changed
        "grads divided in place": _edit(_FSDP, "    unit.full = None\n",
                                        "    unit.full = None\n    for g in grads:\n"
                                        "        g.div_(n)\n").replace("(mine / n)", "mine"),
        # the output kept between calls: the next micro-batch overwrites the last one's .grad
        "output buffer cached": _edit(_edit(
            _FSDP, "def shard_gradients(unit, grads):\n",
            "_KEPT = {}\n\n\ndef shard_gradients(unit, grads):\n"),
            "    mine = torch.empty(full.numel() // n)\n",
            "    mine = _KEPT.setdefault((id(unit), n), torch.empty(full.numel() // n))\n")
        .replace("return list((mine / n).split(unit.sizes))",
                 "return list(mine.div_(n).split(unit.sizes))"),
    },
}
