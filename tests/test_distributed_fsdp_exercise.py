"""Exercise distributed.fsdp_backward (exercises/distributed_fsdp.py) against answers that are
right but written differently from the solution: torch's AVG reduce-scatter, a zeroed buffer
filled column block by column block, no collective at all on one rank, the unit freed last.
Each must pass: a check that refuses a right answer teaches a rule that is not there. Its
wrong answers run in tests/test_exercises.py and in the mutation harness."""

import textwrap

import pytest

import exercises

_HEAD = '''
import torch
import torch.distributed as dist
import torch.nn.functional as F
'''

RIGHT = {
    # torch's own collective, averaging as it reduces (gloo has AVG for reduce-scatter)
    "AVG reduce-scatter": _HEAD + '''

def shard_gradients(unit, grads):
    n = dist.get_world_size()
    rows = []
    for g, k, s in zip(grads, unit.numels, unit.sizes):
        padded = torch.zeros(n * s)
        padded[:k] = g.reshape(-1).to(torch.float32)
        rows.append(padded.view(n, s))
    full = torch.cat(rows, dim=1).reshape(-1)
    out = torch.empty(sum(unit.sizes), dtype=torch.float32)
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    scatter(out, full, op=dist.ReduceOp.AVG)
    unit.full = None
    return [piece.clone() for piece in out.split(unit.sizes)]
''',
    # one zeroed (n, total) buffer, each parameter's columns written in place; freed last
    "one buffer, columns filled": _HEAD + '''
from kernels.distributed.collectives import reduce_scatter


def shard_gradients(unit, grads):
    n = dist.get_world_size()
    total = sum(unit.sizes)
    full = torch.zeros(n, total)
    start = 0
    for g, k, s in zip(grads, unit.numels, unit.sizes):
        column = torch.zeros(n * s)
        column[:k] = g.flatten()
        full[:, start:start + s] = column.view(n, s)
        start += s
    mine = torch.empty(total)
    reduce_scatter(mine, full.flatten())
    mine.div_(n)
    result = list(mine.split(unit.sizes))
    unit.full = None
    return result
''',
    # one rank: nothing to reduce, so no collective
    "no collective on one rank": _HEAD + '''
from kernels.distributed.collectives import reduce_scatter


def shard_gradients(unit, grads):
    n = dist.get_world_size()
    unit.full = None
    pieces = [F.pad(g.float().flatten(), (0, s * n - k)).view(n, s)
              for g, k, s in zip(grads, unit.numels, unit.sizes)]
    full = torch.cat(pieces, dim=1).flatten()
    if n == 1:
        return list(full.clone().split(unit.sizes))
    mine = torch.empty(full.numel() // n)
    reduce_scatter(mine, full)
    return list((mine / n).split(unit.sizes))
''',
}


@pytest.mark.parametrize("label", sorted(RIGHT))
def test_a_right_answer_written_otherwise_passes(label):
    names = exercises.load_cell(textwrap.dedent(RIGHT[label]), f"right_{label.replace(' ', '_')}")
    result = exercises.run_check("distributed.fsdp_backward", names["shard_gradients"])
    if result.status == "cannot check here":
        pytest.skip(str(result))
    assert result.passed, str(result)
