"""A tensor-parallel matmul whose all-gather hides behind its own multiplications.

Each of ``n`` ranks holds a block of rows of ``A`` (sequence parallelism: ``a_shard`` is
``(M/n, K)``, rank ``r`` holding rows ``r·M/n …``) and a block of columns of ``B`` (``b_shard``
is ``(K, N/n)``). Every rank needs the whole ``A`` times its columns: ``(M, N/n)``. Three ways:

* :func:`gather_then_multiply`, the unfused sequence: all-gather ``A``, then one matmul. While
  the gather runs the SMs have nothing to multiply: its time is added to the matmul's.
* :func:`pipelined`: the gather split into ``chunks`` all-gathers of a few rows each, all
  launched at once (``async_op=True``: on a GPU they run in order on NCCL's own stream), the
  rank's own rows multiplied first (they need nothing from the peers), then each chunk's peer
  rows multiplied as soon as that chunk has arrived (:func:`multiply_arrived`), into the right
  rows of the output. ``work.wait()`` blocks no host thread on a GPU: it makes the compute
  stream wait for NCCL's, so chunk ``c + 1`` travels while chunk ``c`` is multiplied.
* :func:`fused`: PyTorch's own ``torch.ops.symm_mem.fused_all_gather_matmul`` (symmetric
  memory: the peers' shards copied by the copy engines, chunk by chunk, each multiplied once it
  lands); CUDA only.

All three return the same ``(M, N/n)`` block, rows in rank order, as :func:`shard_rows` and
:func:`shard_columns` cut a whole ``A`` and ``B``. :func:`check` (a rank's work) compares them
with one process's ``A @ B``, :func:`timed` measures them and the gather alone, and
:func:`timeline` records which kernels ran on which stream when.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

from course_utils import timing
from kernels.distributed import launch, profile
from kernels.distributed.collectives import all_gather

METHODS = ("gather_then_multiply", "pipelined", "fused")
CHUNKS = 4


# -- cutting the operands ------------------------------------------------------------------------


def shard_rows(a: torch.Tensor, n: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s block of rows of ``a`` (M, K): rows ``rank·M/n`` up to the next block.
    An all-gather joins blocks of one size, so M must be a multiple of ``n``."""
    _rank_in(n, rank)
    if a.dim() != 2 or a.shape[0] % n:
        raise ValueError(f"a expected a matrix whose rows are a multiple of the {n} ranks (each "
                         f"rank holds M/{n} of them), got shape {tuple(a.shape)}")
    return a.chunk(n)[rank].contiguous()


def shard_columns(b: torch.Tensor, n: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s block of columns of ``b`` (K, N); N must be a multiple of ``n``."""
    _rank_in(n, rank)
    if b.dim() != 2 or b.shape[1] % n:
        raise ValueError(f"b expected a matrix whose columns are a multiple of the {n} ranks, "
                         f"got shape {tuple(b.shape)}")
    return b.chunk(n, dim=1)[rank].contiguous()


def _rank_in(n: int, rank: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n expected a positive int (ranks), got {n!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < n:
        raise ValueError(f"rank expected an int in 0..{n - 1}, got {rank!r}")


def chunk_bounds(rows: int, chunks: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of each chunk of a rank's ``rows`` rows, as ``torch.chunk`` cuts them:
    ``ceil(rows / chunks)`` rows each, the last one shorter when they do not divide (7 rows in
    3 chunks: 3, 3, 1; and in 5 chunks: 2, 2, 2, 1, one fewer than asked)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= max(rows, 1):
        raise ValueError(f"chunks expected an int from 1 to the {rows} rows each rank holds "
                         f"(a chunk is at least one row), got {chunks!r}")
    size = -(-rows // chunks)
    return [(start, min(start + size, rows)) for start in range(0, rows, size)]


def _check(a_shard: torch.Tensor, b_shard: torch.Tensor) -> None:
    if a_shard.dim() != 2 or a_shard.shape[0] == 0:
        raise ValueError(f"a_shard expected this rank's (M/n, K) rows of A, at least one, got "
                         f"shape {tuple(a_shard.shape)}")
    if b_shard.dim() != 2 or b_shard.shape[0] != a_shard.shape[1]:
        raise ValueError(f"b_shard expected ({a_shard.shape[1]}, N/n) (its rows = a_shard's "
                         f"columns), got shape {tuple(b_shard.shape)}")
    if a_shard.dtype != b_shard.dtype or a_shard.device != b_shard.device:
        raise ValueError(f"b_shard expected a_shard's dtype and device ({a_shard.dtype}, "
                         f"{a_shard.device}), got {b_shard.dtype}, {b_shard.device}")


# -- the three ways ------------------------------------------------------------------------------


def gather_then_multiply(a_shard: torch.Tensor, b_shard: torch.Tensor) -> torch.Tensor:
    """(A rank's work.) All-gather A, then multiply: the gather's time, then the matmul's."""
    _check(a_shard, b_shard)
    n = dist.get_world_size()
    a = a_shard.new_empty(n * a_shard.shape[0], a_shard.shape[1])
    all_gather(a, a_shard.contiguous())
    return a @ b_shard


def pipelined(a_shard: torch.Tensor, b_shard: torch.Tensor, chunks: int = CHUNKS
              ) -> torch.Tensor:
    """(A rank's work.) The gather in ``chunks`` pieces, each multiplied as soon as it lands."""
    _check(a_shard, b_shard)
    n, rank, rows = dist.get_world_size(), dist.get_rank(), a_shard.shape[0]
    a_shard = a_shard.contiguous()
    out = a_shard.new_empty(n * rows, b_shard.shape[1])
    gathered, works = [], []
    for start, stop in chunk_bounds(rows, chunks):  # every gather launched now, in order
        buffer = a_shard.new_empty(n, stop - start, a_shard.shape[1])
        works.append(all_gather(buffer.view(-1, a_shard.shape[1]), a_shard[start:stop],
                                async_op=True))
        gathered.append(buffer)
    # this rank's own rows need nothing from the peers: they keep the SMs busy meanwhile
    torch.mm(a_shard, b_shard, out=out[rank * rows:(rank + 1) * rows])
    multiply_arrived(out, gathered, works, b_shard, rank)
    return out


def multiply_arrived(out: torch.Tensor, gathered: list[torch.Tensor], works: list,
                     b_shard: torch.Tensor, rank: int) -> None:
    """Write every peer's rows of each chunk, times ``b_shard``, into ``out`` (n·m, N/n),
    chunk after chunk: ``gathered[c]`` (n, rows of chunk c, K) holds rows ``start … start +
    rows`` of every rank's shard once ``works[c].wait()`` has returned. Waiting for chunk c
    just before its matmul (not for all of them first) is what lets chunk c + 1 travel while
    chunk c is multiplied; rank ``rank``'s own rows are in ``out`` already."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n  # rows per rank
    start = 0
    for chunk, work in zip(gathered, works, strict=True):
        work.wait()
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows


def fused_unavailable(a_shard: torch.Tensor | None = None) -> str | None:
    """Why :func:`fused` cannot run here (in words), or None."""
    try:
        import torch.distributed._symmetric_memory  # noqa: F401  (defines torch.ops.symm_mem)
    except ImportError as why:
        return f"this torch ({torch.__version__}) has no symmetric memory: {why}"
    if not hasattr(torch.ops.symm_mem, "fused_all_gather_matmul"):
        return f"this torch ({torch.__version__}) has no torch.ops.symm_mem.fused_all_gather_matmul"
    if a_shard is not None and a_shard.device.type != "cuda":
        return (f"fused_all_gather_matmul needs CUDA tensors (symmetric memory is GPU memory "
                f"every rank maps); this rank's are on {a_shard.device.type} "
                f"({dist.get_backend()})")
    return None


def fused(a_shard: torch.Tensor, b_shard: torch.Tensor) -> torch.Tensor:
    """(A rank's work.) PyTorch's ``fused_all_gather_matmul`` (torch 2.5 up; CUDA only)."""
    _check(a_shard, b_shard)
    if why := fused_unavailable(a_shard):
        raise RuntimeError(why)
    from torch.distributed import _symmetric_memory as symm_mem

    group = dist.group.WORLD.group_name
    if not symm_mem.is_symm_mem_enabled_for_group(group):
        # needed up to about torch 2.10, deprecated (and done for you) since
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            symm_mem.enable_symm_mem_for_group(group)
    # return_A=True: its multicast path (which needs return_A=False) can never be chosen, and
    # multicast is off on the machines here
    _, (out,) = torch.ops.symm_mem.fused_all_gather_matmul(a_shard.contiguous(), [b_shard], 0,
                                                           group, return_A=True)
    return out


def _run(method: str, a_shard, b_shard, chunks: int):
    if method == "gather_then_multiply":
        return gather_then_multiply(a_shard, b_shard)
    if method == "pipelined":
        return pipelined(a_shard, b_shard, chunks)
    if method == "fused":
        return fused(a_shard, b_shard)
    raise ValueError(f"method expected one of {', '.join(METHODS)}, got {method!r}")


# -- a rank's work: check, time, trace -----------------------------------------------------------


def operands(m: int, k: int, n_cols: int, dtype=torch.float32, seed: int = 0
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Inside a rank.) The whole A (m, k) and B (k, n_cols), the same on every rank (one
    seed), and this rank's shards of them, on this rank's device."""
    n, rank, device = dist.get_world_size(), dist.get_rank(), launch.device()
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(device, dtype)
    b = (torch.randn(k, n_cols, generator=g) / k ** 0.5).to(device, dtype)
    return a, b, shard_rows(a, n, rank), shard_columns(b, n, rank)


def check(m: int, k: int, n_cols: int, chunks: int = CHUNKS, dtype=torch.float32,
          seed: int = 0) -> dict[str, float | str]:
    """(A rank's work.) Each method's largest difference from one process's ``A @ B_shard``
    on this rank (or why it does not run here)."""
    a, b, a_shard, b_shard = operands(m, k, n_cols, dtype, seed)
    expected = (a.float() @ shard_columns(b, dist.get_world_size(), dist.get_rank()).float())
    found: dict[str, float | str] = {}
    for method in METHODS:
        if method == "fused" and (why := fused_unavailable(a_shard)):
            found[method] = why
            continue
        got = _run(method, a_shard, b_shard, chunks)
        if got.shape != expected.shape:
            raise AssertionError(f"{method}: shape {tuple(got.shape)}, expected "
                                 f"{tuple(expected.shape)}")
        found[method] = float((got.float() - expected).abs().max())
    return found


def timed(m: int, k: int, n_cols: int, chunk_counts: tuple[int, ...] = (CHUNKS,),
          dtype=torch.bfloat16, reps: int = 20) -> dict[str, float | str]:
    """(A rank's work.) Median ms of each method and of the unfused sequence's two parts alone
    (``gather``, the all-gather of A; ``matmul``, A @ B_shard); the pipelined one once per
    chunk count (``"pipelined chunks=4"``). Each is timed after a barrier by the course's
    :func:`~course_utils.timing.benchmark` (CUDA events on a GPU), the slowest rank's median
    kept (a collective is done when its last rank is). ``share`` is the gather's part of the
    unfused time. A method that cannot run here gets its reason instead of a time."""
    device = launch.device()
    a, b, a_shard, b_shard = operands(m, k, n_cols, dtype)
    del b
    a_full = torch.empty_like(a)
    calls = {"gather": lambda: all_gather(a_full, a_shard), "matmul": lambda: a @ b_shard,
             "gather_then_multiply": lambda: gather_then_multiply(a_shard, b_shard)}
    for chunks in chunk_counts:
        calls[f"pipelined chunks={chunks}"] = (
            lambda chunks=chunks: pipelined(a_shard, b_shard, chunks))
    calls["fused"] = lambda: fused(a_shard, b_shard)
    found: dict[str, float | str] = {}
    for name, call in calls.items():
        if name == "fused" and (why := fused_unavailable(a_shard)):
            found[name] = why
            continue
        dist.barrier()
        # fixed reps: every rank must make the same calls, or one would wait forever
        ms = timing.benchmark(call, warmup=3, reps=reps, device=device.type, name=name).median
        slowest = torch.tensor([ms], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        found[name] = float(slowest)
    found["share"] = found["gather"] / found["gather_then_multiply"]
    return found


def timeline(m: int, k: int, n_cols: int, chunks: int = CHUNKS, dtype=torch.bfloat16
             ) -> list[dict]:
    """(A rank's work, on GPUs.) The kernels of one :func:`pipelined` call as the profiler saw
    them on this rank: ``{"name", "stream", "start_us", "dur_us"}``, start from the first."""
    a, b, a_shard, b_shard = operands(m, k, n_cols, dtype)
    for _ in range(3):  # warm-up: NCCL's communicators and cuBLAS's handles are made once
        pipelined(a_shard, b_shard, chunks)
    torch.cuda.synchronize()
    dist.barrier()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        pipelined(a_shard, b_shard, chunks)
        torch.cuda.synchronize()
    return profile.kernel_events(prof)


def timeline_figure(events: list[dict], title: str):
    """One row per CUDA stream, a bar per kernel (NCCL's in one colour, matmuls in another):
    where the bars of two rows overlap, communication ran during compute."""
    from course_utils import plots

    fig, ax = plots.figure(title, "µs from the first kernel", "", figsize=(10, 2.6))
    streams = sorted({e["stream"] for e in events})
    for row, stream in enumerate(streams):
        for e in (e for e in events if e["stream"] == stream):
            nccl = "nccl" in e["name"].lower()
            ax.barh(row, e["dur_us"], left=e["start_us"], height=0.6,
                    color="tab:orange" if nccl else "tab:blue", edgecolor="black", lw=0.4)
    ax.set_yticks(range(len(streams)),
                  [f"stream {s}" + (" (NCCL)" if any("nccl" in e["name"].lower() for e in events
                                                      if e["stream"] == s) else "")
                   for s in streams])
    ax.barh([], [], color="tab:orange", label="NCCL all-gather")
    ax.barh([], [], color="tab:blue", label="matmul and copies")
    ax.legend(fontsize=8, loc="upper right")
    plots.stamp(fig)
    return fig
