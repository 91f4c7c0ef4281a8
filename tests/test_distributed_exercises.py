"""The checks of lesson 20's exercises (exercises/distributed.py, exercises/distributed_one_shot.py)
against answers that are right but written differently from the solution, and against the wrong
answers they once passed: each must be told which input broke it."""

import linecache
import textwrap

import pytest
import torch

import exercises
from exercises import distributed
from exercises.solutions import distributed as solutions


def _check(id: str, source: str, label: str) -> exercises.Result:
    names = exercises.load_cell(textwrap.dedent(source), f"{label}_{id}")
    return exercises.run_check(id, *(names[n] for n in exercises.get(id).answers))


# -- distributed.pipeline: right answers that are not the solution's loop ---------------------

PIPELINE_RIGHT = {
    # one product per chunk over the peers' rows, picked by index (a copy of gathered[c])
    "gathered by index": '''
        import torch


        def multiply_arrived(out, gathered, works, b_shard, rank):
            n = gathered[0].shape[0]
            m = out.shape[0] // n
            peers = torch.tensor([p for p in range(n) if p != rank], dtype=torch.long)
            start = 0
            for chunk, work in zip(gathered, works):
                work.wait()
                rows = chunk.shape[1]
                if len(peers):
                    product = chunk[peers].reshape(-1, chunk.shape[2]) @ b_shard
                    for i, peer in enumerate(peers.tolist()):
                        out[peer * m + start:peer * m + start + rows] = \\
                            product[i * rows:(i + 1) * rows]
                start += rows
        ''',
    # one batched product (einsum) over the peers' rows, then one copy per peer
    "einsum over the peers": '''
        import torch


        def multiply_arrived(out, gathered, works, b_shard, rank):
            n = gathered[0].shape[0]
            m = out.shape[0] // n
            peers = [p for p in range(n) if p != rank]
            start = 0
            for chunk, work in zip(gathered, works):
                work.wait()
                rows = chunk.shape[1]
                if peers:
                    product = torch.einsum("prk,kc->prc", chunk[peers], b_shard)
                    for i, peer in enumerate(peers):
                        out[peer * m + start:peer * m + start + rows].copy_(product[i])
                start += rows
        ''',
    # the product without a matrix multiply: broadcast and sum
    "broadcast and sum": '''
        def multiply_arrived(out, gathered, works, b_shard, rank):
            n = gathered[0].shape[0]
            m = out.shape[0] // n
            start = 0
            for chunk, work in zip(gathered, works):
                work.wait()
                rows = chunk.shape[1]
                for peer in range(n):
                    if peer != rank:
                        out[peer * m + start:peer * m + start + rows] = (
                            chunk[peer][:, :, None].float() * b_shard[None].float()
                        ).sum(1).to(out.dtype)
                start += rows
        ''',
    # the peers' rows copied into a staging buffer (made before the wait, like the chunk), one
    # product of the whole buffer
    "staging buffer": '''
        import torch


        def multiply_arrived(out, gathered, works, b_shard, rank):
            n = gathered[0].shape[0]
            m = out.shape[0] // n
            start = 0
            for chunk, work in zip(gathered, works):
                rows = chunk.shape[1]
                staging = torch.empty_like(chunk[:n - 1]) if n > 1 else None
                work.wait()
                if staging is None:
                    continue
                peers = [p for p in range(n) if p != rank]
                for i, peer in enumerate(peers):
                    staging[i].copy_(chunk[peer])
                product = staging.view(-1, chunk.shape[2]) @ b_shard
                for i, peer in enumerate(peers):
                    out[peer * m + start:peer * m + start + rows] = \\
                        product[i * rows:(i + 1) * rows]
                start += rows
        ''',
    # every chunk's products kept, written into out once the last chunk is multiplied
    "written at the end": '''
        import torch


        def multiply_arrived(out, gathered, works, b_shard, rank):
            n = gathered[0].shape[0]
            m = out.shape[0] // n
            done = []
            start = 0
            for chunk, work in zip(gathered, works):
                work.wait()
                rows = chunk.shape[1]
                done += [(peer, start, rows, chunk[peer] @ b_shard)
                         for peer in range(n) if peer != rank]
                start += rows
            for peer, start, rows, product in done:
                out[peer * m + start:peer * m + start + rows] = product
        ''',
}


@pytest.mark.parametrize("label", PIPELINE_RIGHT)
def test_pipeline_passes_a_right_answer_written_another_way(label):
    result = _check("distributed.pipeline", PIPELINE_RIGHT[label], label.replace(" ", "_"))
    assert result.status == "passed", str(result)


@pytest.mark.parametrize(("label", "says"), [
    ("waits for the next after one peer", "3 ranks, rank 1, bfloat16, 7 rows per rank in chunks "
     "of 2, 2, 2, 1 rows: you waited for chunk 1 when only 2 of the 4 peer rows of chunk 0"),
    ("waits for all first", "before multiplying chunk 0"),
    ("wait after the matmul", "chunk 0 was read (by torch.mm) before works[0].wait()"),
    ("own rows again", "this rank's own rows are in out already"),
])
def test_pipeline_names_the_case_and_the_order_that_broke_it(label, says):
    result = _check("distributed.pipeline", solutions.WRONG["distributed.pipeline"][label],
                    "wrong")
    assert result.status == "not yet" and says in str(result), str(result)


# -- distributed.one_shot -------------------------------------------------------------------------

@pytest.mark.parametrize(("label", "says"), [
    ("own summation order", "3 ranks, 97 float32 elements, 3 programs: rank 0's out and rank 1's "
     "differ at element"),
    ("stride for 2 programs", "3 ranks, 97 float32 elements, 3 programs, rank 0: 32 elements of "
     "out were stored more than once"),
    ("rounded after every peer", "were rounded more than once"),
])
def test_one_shot_names_the_case_that_broke_it(label, says):
    result = _check("distributed.one_shot", solutions.WRONG["distributed.one_shot"][label],
                    "wrong")
    assert result.status == "not yet" and says in str(result), str(result)
    if label == "rounded after every peer":  # bf16 on 3 or 4 ranks: 2 ranks round once anyway
        assert " ranks, " in str(result) and "bfloat16" in str(result), str(result)
        assert not str(result).splitlines()[1].startswith("2 ranks"), str(result)


# -- distributed.halves: what the ranks receive of the cell ------------------------------------

HALVES_BY_NAME = '''
    import torch
    from torch.distributed import get_world_size

    from kernels.distributed.collectives import all_gather, reduce_scatter


    def mean_all_reduce(x):
        n = get_world_size()
        chunk = torch.empty(x.numel() // n, dtype=x.dtype)
        reduce_scatter(chunk, x)
        out = torch.empty_like(x)
        all_gather(out, chunk, async_op=True).wait()
        return out / n
    '''


def test_halves_passes_get_world_size_imported_by_name_and_reuses_its_ranks():
    result = _check("distributed.halves", HALVES_BY_NAME, "by_name")
    assert result.status == "passed", str(result)
    pool = distributed.RANKS.pool
    # an answer that raises on a rank ends the ranks; the next check starts new ones
    wrong = _check("distributed.halves", solutions.WRONG["distributed.halves"]["all_reduce"],
                   "wrong")
    assert wrong.status == "not yet" and "world size 1" in str(wrong), str(wrong)
    assert distributed.RANKS.pool is None
    again = _check("distributed.halves", HALVES_BY_NAME, "by_name")
    assert again.status == "passed", str(again)
    assert pool is not None and distributed.RANKS.pool is not pool
    then = distributed.RANKS.pool
    assert _check("distributed.halves", solutions.SOLUTIONS["distributed.halves"],
                  "solution").status == "passed"
    assert distributed.RANKS.pool is then  # (the same ranks: no new processes for this check)


def _shipped_globals(fn) -> dict:
    """The names ``fn``'s copy sees in a rank: the shipped text run as a module."""
    space: dict = {}
    exec(compile(distributed.shipped_source(fn), "<shipped>", "exec"), space)
    return space


SHIPPED_FORMS = '''
    import torch
    import torch.distributed as d
    from torch.distributed import get_world_size as world_size
    from kernels.distributed.collectives import all_gather as gather
    from kernels.distributed import collectives
    from math import isclose

    CHUNKS = (1, 2)
    SCALE = 0.5


    def _chunk(x, n):
        return torch.empty(x.numel() // n, dtype=x.dtype)


    def mean_all_reduce(x):
        n = [world_size() for _ in CHUNKS][0]  # a name used only inside a comprehension
        assert d.get_rank() >= 0 and isclose(SCALE, 0.5)
        chunk = _chunk(x, n)
        collectives.reduce_scatter(chunk, x)
        out = torch.empty_like(x)
        gather(out, chunk, async_op=True).wait()
        return out / n
    '''


def test_shipped_source_binds_every_form_of_import_constant_and_helper():
    fn = exercises.load_cell(textwrap.dedent(SHIPPED_FORMS), "forms")["mean_all_reduce"]
    space = _shipped_globals(fn)
    for name in ("d", "world_size", "gather", "collectives", "isclose", "CHUNKS", "SCALE",
                 "torch"):
        assert space[name] is fn.__globals__[name] or space[name] == fn.__globals__[name], name
    assert "def _chunk(" in distributed.shipped_source(fn)
    assert "from torch.distributed import get_world_size as world_size" in \
        distributed.shipped_source(fn)


def test_shipped_source_finds_what_another_cell_imported():
    """In a notebook the import may sit in an earlier cell: the function's globals hold the
    name, its own cell does not say where from (IPython keeps each cell in linecache)."""
    import torch.distributed as dist

    from kernels.distributed.collectives import all_gather, reduce_scatter

    cell = textwrap.dedent('''
        def mean_all_reduce(x):
            n = get_world_size()
            chunk = empty(x.numel() // n, dtype=x.dtype)
            reduce_scatter(chunk, x)
            out = empty_like(x)
            gather(out, chunk, async_op=True).wait()
            return out / n
        ''')
    filename = "<ipython-input-7-0123456789ab>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    namespace = {"get_world_size": dist.get_world_size, "empty": torch.empty,
                 "empty_like": torch.empty_like, "reduce_scatter": reduce_scatter,
                 "gather": all_gather}
    try:
        exec(compile(cell, filename, "exec"), namespace)
        source = distributed.shipped_source(namespace["mean_all_reduce"])
    finally:
        del linecache.cache[filename]
    assert "from torch.distributed import get_world_size" in source, source
    assert "from kernels.distributed.collectives import all_gather as gather" in source, source
    space: dict = {}
    exec(compile(source, "<shipped>", "exec"), space)
    for name, value in namespace.items():
        if name != "__builtins__" and name != "mean_all_reduce":
            assert space[name] is value, name
