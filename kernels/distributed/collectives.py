"""The four collectives, what each moves, and their times from a few KiB up.

Sizes follow nccl-tests' convention: ``size`` is the bytes of the *whole* buffer (an all-reduce's
input on each rank; an all-gather's output; a reduce-scatter's input), so the four are compared
on the same buffers. Over ``n`` ranks joined in a ring, each rank sends (and receives):

=============== ===================== ====================================================
collective      bytes each rank sends  how (ring)
=============== ===================== ====================================================
reduce-scatter  (n−1)/n · size         n−1 steps, each passing one 1/n chunk on, adding
all-gather      (n−1)/n · size         n−1 steps, each passing one finished chunk on
all-reduce      2(n−1)/n · size        a reduce-scatter, then an all-gather
broadcast       size                   the root's buffer passed along (pipelined in chunks)
=============== ===================== ====================================================

**Algorithm bandwidth** is ``size / time``: what a user sees. **Bus bandwidth** multiplies it by
the factor above (:func:`bus_factor`), giving the bytes each link carried per second: comparable
across collectives and rank counts, and against the link's peak. A small message never reaches
that peak: its time is the *latency floor* (launch, handshakes, a few hops), flat in size; a
large one is *bandwidth-bound*, its time growing with size. Where the two meet,
``size ≈ latency · bandwidth / factor``, is where batching messages stops paying.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from course_utils import timing
from kernels.distributed import launch

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
KiB, MiB = 1 << 10, 1 << 20


def bus_factor(op: str, n: int) -> float:
    """Bus bandwidth ÷ algorithm bandwidth of ``op`` over ``n`` ranks (the ring's factors)."""
    if op not in OPS:
        raise ValueError(f"op expected one of {', '.join(OPS)}, got {op!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n expected a positive int (ranks), got {n!r}")
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def bytes_sent(op: str, size: int, n: int) -> float:
    """Bytes each rank sends for ``op`` on a ``size``-byte buffer over ``n`` ranks (a ring)."""
    return bus_factor(op, n) * size


def sizes(low: int = 4 * KiB, high: int = 4 * MiB) -> list[int]:
    """Powers of 4 from ``low`` to ``high`` bytes."""
    found, size = [], low
    while size <= high:
        found.append(size)
        size *= 4
    return found


def _call(op: str, size: int, dtype: torch.dtype):
    """A function doing one ``op`` on buffers of ``size`` bytes on this rank (no allocation
    inside), so that a timed call is the collective alone."""
    n, device = dist.get_world_size(), launch.device()
    count = size // torch.tensor([], dtype=dtype).element_size()
    count -= count % n  # whole chunks: reduce-scatter and all-gather split the buffer n ways
    full = torch.ones(count, dtype=dtype, device=device)
    chunk = torch.empty(count // n, dtype=dtype, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        return lambda: all_gather(full, chunk)
    if op == "reduce_scatter":
        return lambda: reduce_scatter(chunk, full)
    return lambda: dist.broadcast(full, src=0)


# torch 2.14 renamed the single-tensor forms (the old names warn); torch 2.11 has only the old
def reduce_scatter(output: torch.Tensor, input: torch.Tensor, async_op: bool = False):
    """Sum ``input`` over the ranks and keep this rank's 1/n chunk in ``output``."""
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return fn(output, input, async_op=async_op)


def all_gather(output: torch.Tensor, input: torch.Tensor, async_op: bool = False):
    """Every rank's ``input`` side by side, in rank order, in ``output`` on every rank."""
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(output, input, async_op=async_op)


def sweep(sizes_bytes: list[int], ops: tuple[str, ...] = OPS, dtype: torch.dtype = torch.float32,
          reps: int = 10) -> list[dict]:
    """(A rank's work.) Time each op at each size: the median of ``reps`` calls on this rank,
    then the slowest rank's median (a collective is done when its last rank is). Every rank
    returns the same rows: ``op``, ``bytes``, ``ms``, ``algbw_gbs``, ``busbw_gbs``."""
    n = dist.get_world_size()
    device = launch.device()
    rows = []
    for op in ops:
        for size in sizes_bytes:
            call = _call(op, size, dtype)
            dist.barrier()
            # fixed reps: every rank must make the same calls, or one would wait forever
            ms = timing.benchmark(call, warmup=2, reps=reps, device=device.type,
                                  name=f"{op} {size} B").median
            slowest = torch.tensor([ms], dtype=torch.float64, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            ms = float(slowest)
            algbw = size / (ms * 1e-3) / 1e9
            rows.append({"op": op, "bytes": size, "ms": ms, "algbw_gbs": algbw,
                         "busbw_gbs": algbw * bus_factor(op, n)})
    return rows


def floor_and_ceiling(rows: list[dict], op: str, n: int) -> dict:
    """What a sweep shows of ``op``: its latency floor (the smallest time measured), its
    bandwidth ceiling (the largest bus bandwidth) and the size where the two models cross,
    ``latency · ceiling / factor`` (below it a message costs its latency, above it its bytes)."""
    mine = [r for r in rows if r["op"] == op]
    if not mine:
        raise ValueError(f"rows expected measurements of {op!r}, got ops "
                         f"{sorted({r['op'] for r in rows})}")
    floor_ms = min(r["ms"] for r in mine)
    ceiling = max(r["busbw_gbs"] for r in mine)
    return {"floor_ms": floor_ms, "ceiling_gbs": ceiling,
            "crossover_bytes": floor_ms * 1e-3 * ceiling * 1e9 / bus_factor(op, n)}


def figure(rows: list[dict], n: int, title: str):
    """Latency (left) and bus bandwidth (right) against size, one line per collective, each
    with its latency floor and bandwidth ceiling dashed."""
    from course_utils import plots

    fig, (left, right) = plots.figure(title, ncols=2, figsize=(11, 4))
    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op]
        x = [r["bytes"] for r in mine]
        line, = left.plot(x, [r["ms"] * 1e3 for r in mine], "o-", label=op)
        right.plot(x, [r["busbw_gbs"] for r in mine], "o-", color=line.get_color(), label=op)
        seen = floor_and_ceiling(rows, op, n)
        left.axhline(seen["floor_ms"] * 1e3, ls=":", lw=0.8, color=line.get_color())
        right.axhline(seen["ceiling_gbs"], ls=":", lw=0.8, color=line.get_color())
    for ax, label in ((left, "µs per call (slowest rank)"), (right, "bus bandwidth, GB/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("buffer size, bytes")
        ax.set_ylabel(label)
    left.set_title("latency: flat = the floor", fontsize=9)
    right.set_title("bus bandwidth: flat = the ceiling", fontsize=9)
    right.legend(fontsize=8)
    plots.stamp(fig)
    return fig


def table(rows: list[dict]) -> str:
    """The sweep as text: one line per op and size."""
    lines = [f"{'collective':<15}{'size':>10}{'µs':>10}{'algbw GB/s':>12}{'busbw GB/s':>12}"]
    for r in rows:
        size = f"{r['bytes'] // MiB} MiB" if r["bytes"] >= MiB else f"{r['bytes'] // KiB} KiB"
        lines.append(f"{r['op']:<15}{size:>10}{r['ms'] * 1e3:>10.1f}{r['algbw_gbs']:>12.3f}"
                     f"{r['busbw_gbs']:>12.3f}")
    return "\n".join(lines)
