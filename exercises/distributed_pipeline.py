"""Exercise distributed.pipeline of lesson 20.

The loop of :func:`kernels.distributed.tensor_parallel.pipelined` that
  waits for each chunk of the all-gather and multiplies its peer rows into the right rows of
  the output. The check simulates 1 to 4 ranks in this process: a chunk's rows land (NaN
  before) only when its handle is waited on, and a dispatch mode follows each chunk's data
  (views, indexing, copies) into the products that use it, however they are written. So it
  sees a chunk read before its wait, a wait for chunk c + 1 before every peer row of chunk c
  was multiplied (or, for products written without a matmul, stood in ``out``), and this
  rank's own rows recomputed.
"""

from __future__ import annotations

import random
import weakref

import torch

from exercises import Mismatch, compare, exercise, expect

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
# (ranks, this rank, rows per rank, chunks, dtype): one rank (nothing to multiply), 2 to 4 ranks,
# this rank first, inside and last; chunks that divide the rows, one row over and one under
# (a short last chunk), one chunk, one row a chunk; bf16 and fp16 as well as fp32; the last
# case a second call on the shapes of an earlier one, on new data
PIPELINE_CASES = ((1, 0, 5, 2, torch.float32), (2, 0, 8, 4, torch.float32),
                  (2, 1, 9, 4, torch.float32), (3, 1, 7, 4, torch.bfloat16),
                  (4, 3, 9, 5, torch.float32), (3, 2, 6, 1, torch.float16),
                  (4, 0, 5, 5, torch.float32), (4, 2, 10, 3, torch.bfloat16),
                  (3, 1, 7, 4, torch.bfloat16))
PRODUCTS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "dot", "vdot", "mv", "addmv", "einsum",
            "tensordot", "linear", "inner", "outer", "_addmm_activation"}
# operations that take a tensor for its shape and dtype only: they read none of its values
SHAPE_ONLY = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
              "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full"}


class _Arrives:
    """An all-gather's handle: its chunk lands in ``buffer`` (NaN until then) on ``wait()``.
    The first wait is written in the log with a copy of ``out`` as it stands then (which of
    its rows are written already)."""

    def __init__(self, buffer: torch.Tensor, result: torch.Tensor, index: int, log: list,
                 out: torch.Tensor):
        self.buffer, self.result, self.index, self.log, self.out = buffer, result, index, log, out
        self.waited = False

    def wait(self, *args, **kwargs) -> bool:
        if not self.waited:
            self.log.append(("wait", self.index, self.out.detach().clone()))
            self.buffer.copy_(self.result)
            self.waited = True
        return True

    def is_completed(self) -> bool:
        return self.waited


def _provenance(gathered: list[torch.Tensor], protected: list[torch.Tensor], k: int,
                log: list):
    """A dispatch mode that follows the data of each gathered chunk: a tensor made from
    chunk c (a view, an index, a copy, ... of it) is chunk c's too. It writes in ``log``
    ``("read", c, op)`` for an operation that reads chunk c's values, ``("mm", c, rows)`` for a
    matrix product one of whose operands is chunk c's (rows: that operand's K-long rows), and
    ``("resized", ...)`` for an ``out=`` that torch had to resize."""
    import torch.utils._pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode

    roots = {g.untyped_storage().data_ptr(): c for c, g in enumerate(gathered)}
    fixed = set(roots) | {t.untyped_storage().data_ptr() for t in protected}
    # storage address -> (its chunks, weak references to the tensors seen on it): an entry whose
    # tensors are all gone is stale (the memory may now hold another tensor, made from a list
    # without an operation this mode sees)
    owner: dict[int, tuple[frozenset, list]] = {p: (frozenset({c}), []) for p, c in roots.items()}

    def live(ptr: int) -> frozenset | None:
        entry = owner.get(ptr)
        if entry is None or not (ptr in roots or any(r() is not None for r in entry[1])):
            return None
        return entry[0]

    def chunks_of(t) -> frozenset:
        if not isinstance(t, torch.Tensor):
            return frozenset()
        return live(t.untyped_storage().data_ptr()) or frozenset()

    class Provenance(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            schema = func._schema.arguments
            written = set()
            for i, a in enumerate(schema):
                value = args[i] if i < len(args) else kwargs.get(a.name)
                if a.alias_info is not None and a.alias_info.is_write:
                    written |= {id(t) for t in pytree.tree_leaves(value)
                                if isinstance(t, torch.Tensor)}
            inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            name = func.overloadpacket.__name__
            read = [t for t in inputs if id(t) not in written and name not in SHAPE_ONLY]
            sources = frozenset().union(*map(chunks_of, read))
            if not func.is_view:
                for c in sorted(sources):
                    log.append(("read", c, name))
            if name in PRODUCTS:
                for t in read:
                    for c in chunks_of(t):
                        log.append(("mm", c, t.numel() // k))
            out = kwargs.get("out")
            before = tuple(out.shape) if isinstance(out, torch.Tensor) else None
            result = func(*args, **kwargs)
            if before is not None and tuple(out.shape) != before:
                log.append(("resized", -1, f"{before[0]} rows received a product of "
                            f"{out.shape[0]}"))
            made = [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]
            for t in made + [t for t in inputs if id(t) in written]:
                ptr = t.untyped_storage().data_ptr()
                if ptr in fixed:
                    continue
                # a fresh output holds its inputs' chunks; one that shares a live storage (a
                # view, or a tensor written in place) adds them to that storage's
                before = live(ptr)
                refs = owner[ptr][1] if before is not None else []
                owner[ptr] = ((before or frozenset()) | sources, [*refs, weakref.ref(t)])
            return result

    return Provenance()


def _pipeline_case(multiply_arrived, n: int, rank: int, m: int, chunks: int,
                   dtype: torch.dtype, g: torch.Generator) -> None:
    from kernels.distributed.tensor_parallel import chunk_bounds

    k, cols = (int(torch.randint(3, 17, (), generator=g)) for _ in range(2))
    shards = [torch.randn(m, k, generator=g).to(dtype) for _ in range(n)]
    b = torch.randn(k, cols, generator=g).to(dtype)
    bounds = chunk_bounds(m, chunks)
    a = torch.cat(shards).double()
    exact = a @ b.double()
    expected = exact.to(dtype)
    # fp32 accumulation, one rounding: a few steps of eps times the sum of magnitudes
    atol = torch.finfo(dtype).eps * (2 * (a.abs() @ b.double().abs()) + exact.abs()) + 1e-6
    out = torch.full((n * m, cols), float("nan"), dtype=dtype)
    out[rank * m:(rank + 1) * m] = expected[rank * m:(rank + 1) * m]
    log: list = []
    gathered, works = [], []
    for c, (start, stop) in enumerate(bounds):
        buffer = torch.full((n, stop - start, k), float("nan"), dtype=dtype)  # not there yet
        gathered.append(buffer)
        works.append(_Arrives(buffer, torch.stack([s[start:stop] for s in shards]), c, log,
                              out))
    dtype_name = str(dtype).removeprefix("torch.")
    case = (f"{n} rank{'s' if n > 1 else ''}, rank {rank}, {dtype_name}, {m} rows per rank in "
            f"chunks of {', '.join(str(stop - start) for start, stop in bounds)} rows")
    with _provenance(gathered, [out, b], k, log):
        multiply_arrived(out, gathered, works, b, rank)
    resized = [what for kind, _, what in log if kind == "resized"]
    # an out= slice with the wrong row count still gets the right rows here: torch resizes the
    # view (its storage is all of out) and writes from its start; the slice is wrong all the same
    expect(not resized, f"{case}: an out= slice of {resized[0] if resized else ''}, so torch "
           "resized it to fit. Make the slice exactly the chunk's rows", PIPELINE_HINT)
    waits = {c: i for i, (kind, c, _) in reversed(list(enumerate(log))) if kind == "wait"}
    for c in range(len(bounds)):
        expect(c in waits, f"{case}: chunk {c} was never waited for, so its rows never "
               "arrived (they are NaN in the check)", PIPELINE_HINT)
    for i, (kind, c, what) in enumerate(log):
        expect(kind not in ("read", "mm") or waits[c] < i, f"{case}: chunk {c} was read (by "
               f"torch.{what if kind == 'read' else 'mm'}) before works[{c}].wait(): on a GPU "
               "its rows would still be in flight (here they are NaN until then)",
               PIPELINE_HINT)
    peer_rows = [(n - 1) * (stop - start) for start, stop in bounds]
    for c in range(len(bounds) - 1):
        # by the next wait, every peer's rows of chunk c are multiplied: products that read
        # them, or (a product written another way) rows of out that hold them already
        multiplied = sum(r for kind, d, r in log[:waits[c + 1]] if kind == "mm" and d == c)
        start, stop = bounds[c]
        then = log[waits[c + 1]][2]  # out when chunk c + 1 was waited for
        filled = [p for p in range(n) if p != rank
                  and bool(then[p * m + start:p * m + stop].isfinite().all())]
        if multiplied >= peer_rows[c] or len(filled) == n - 1:
            continue
        expect(multiplied or filled, f"{case}: you waited for chunk {c + 1} before "
               f"multiplying chunk {c}. The values are right, but every wait comes before the "
               "matmuls it could hide: nothing overlaps. Multiply each chunk right after its "
               "own wait", PIPELINE_HINT)
        raise Mismatch(f"{case}: you waited for chunk {c + 1} when only {multiplied} of the "
                       f"{peer_rows[c]} peer rows of chunk {c} were multiplied: the rest of "
                       f"chunk {c}'s products no longer hide chunk {c + 1}'s transfer. "
                       "Multiply every peer's rows of a chunk before waiting for the next",
                       PIPELINE_HINT)
    rows = [sum(r for kind, d, r in log if kind == "mm" and d == c) for c in range(len(bounds))]
    for c in range(len(bounds)):
        expect(rows[c] <= peer_rows[c], f"{case}: chunk {c}: you multiplied {rows[c]} rows, "
               f"the peers' rows of it are {peer_rows[c]}: this rank's own rows are in out "
               "already (skip peer == rank), and each row once", PIPELINE_HINT)
    compare(out, expected, what=case, atol=atol, rtol=0, hint=PIPELINE_HINT)
@exercise("distributed.pipeline", title="Multiply each gathered chunk as soon as it lands",
          stub=PIPELINE_STUB, answers=("multiply_arrived",),
          section="Overlapping communication with compute", intro="""
`pipelined` launches every chunk's all-gather at once and multiplies this rank's own rows;
write the loop that follows, `multiply_arrived(out, gathered, works, b_shard, rank)`: for each
chunk in order, wait for it, then multiply every peer's rows of it into the right rows of
`out`. The check runs your function in this process on fresh random shards (1 to 4 ranks,
simulated; float32, bfloat16 and float16; chunks of ragged sizes): each chunk's rows land only
when its handle is waited on, and it follows each chunk's data into your products, since
waiting for every chunk first gives the right numbers with nothing overlapped.""")
def check_pipeline(multiply_arrived, report) -> None:
    expect(callable(multiply_arrived), f"multiply_arrived expected a function, got "
           f"{type(multiply_arrived).__name__}", "keep def multiply_arrived(out, gathered, "
           "works, b_shard, rank)")
    g = torch.Generator().manual_seed(random.randrange(1 << 30))
    for n, rank, m, chunks, dtype in PIPELINE_CASES:
        _pipeline_case(multiply_arrived, n, rank, m, chunks, dtype, g)
    report.line(f"{len(PIPELINE_CASES)} simulated ranks (1 to 4 ranks, float32, bfloat16 and "
                "float16, ragged last chunks, one chunk, a second call on new data): every "
                "peer row right; each chunk read only after its own wait, and all its peer "
                "rows multiplied before the next wait; this rank's rows not recomputed")
