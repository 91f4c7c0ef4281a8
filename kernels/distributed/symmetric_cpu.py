"""The symmetric-memory all-reduces without GPUs: their steps in PyTorch, and the real kernels in
Triton's interpreter on CPU processes that share memory.

* :func:`simulate` takes every rank's buffer in one process and does what each rank's kernel
  does, step by step, with PyTorch ops: the algorithm, readable, on any machine.
* :class:`SharedBuffers` is symmetric memory made of CPU shared memory: each rank of a gloo
  group creates a file in ``/dev/shm`` and maps every peer's, so that, as on GPUs, a rank holds
  the address of every peer's buffer and signal pad in its own address space.
  :func:`interpreted_all_reduce` (a rank's work, started by :func:`run`) then runs the kernels
  of :mod:`kernels.distributed.symmetric` in Triton's interpreter on those addresses: the same
  loads of peer pointers, the same spinning compare-and-swap barriers between real processes;
  :func:`run_many` (and :func:`run_cases`, its methods × dtypes) runs several in one group of
  ranks.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
import uuid

import torch
import torch.distributed as dist

from kernels.distributed import launch as ranks
from kernels.distributed import symmetric


def chunks(numel: int, world_size: int) -> list[range]:
    """The two-shot's chunks: ``world_size`` ranges of ``ceil(numel / world_size)`` elements
    rounded up to a multiple of ``symmetric.ALIGN``, the last ones short or empty (as the
    kernel cuts them)."""
    size = symmetric.chunk_for(numel, world_size)
    return [range(min(r * size, numel), min((r + 1) * size, numel)) for r in range(world_size)]


def simulate(buffers: list[torch.Tensor], method: str = "one_shot") -> list[torch.Tensor]:
    """What every rank's kernel leaves in its output, given ``buffers[r]``, rank ``r``'s input in
    its symmetric buffer (1-D, same length and dtype on every rank). The two-shots also rewrite
    ``buffers`` in place, as the kernels do: each rank's own chunk (``two_shot``), or chunk ``r``
    of every buffer by rank ``r`` (``two_shot_push``: every buffer then holds the whole sum)."""
    if not buffers or any(not isinstance(b, torch.Tensor) for b in buffers):
        raise ValueError(f"buffers expected a non-empty list of tensors, got {buffers!r:.80}")
    for b in buffers:
        symmetric.check_input(b, method)
        if b.shape != buffers[0].shape or b.dtype != buffers[0].dtype or b.dim() != 1:
            raise ValueError(f"buffers expected 1-D tensors of one shape and dtype, got "
                             f"{[(tuple(x.shape), x.dtype) for x in buffers]}")
    n = len(buffers)
    if method == "one_shot":
        # each rank reads every buffer (its own included), sums in fp32, rounds once
        total = sum(b.float() for b in buffers)
        return [total.to(buffers[0].dtype) for _ in range(n)]
    parts = chunks(buffers[0].numel(), n)
    for r, part in enumerate(parts):  # reduce-scatter: rank r reduces chunk r into its buffer
        sl = slice(part.start, part.stop)
        total = sum(b[sl].float() for b in buffers).to(buffers[r].dtype)
        # (the push version writes it into chunk r of every rank's buffer)
        for b in buffers if method == "two_shot_push" else [buffers[r]]:
            b[sl] = total
    if method == "two_shot_push":  # (barrier) then each rank's own buffer is the answer
        return [b.clone() for b in buffers]
    # (barrier) then all-gather: every rank copies chunk p from rank p's buffer
    gathered = torch.cat([buffers[p][part.start:part.stop] for p, part in enumerate(parts)])
    return [gathered.clone() for _ in range(n)]


class SharedBuffers:
    """(Inside a gloo rank.) ``nbytes`` of CPU memory per rank plus a signal pad, mapped into
    every rank of the group: ``buffer_ptrs[p]`` and ``signal_pad_ptrs[p]`` are addresses of
    rank ``p``'s in *this* process, as ``rendezvous`` gives them on GPUs. A collective."""

    def __init__(self, nbytes: int, pad_bytes: int | None = None):
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.nbytes = -(-nbytes // 16) * 16  # the pad after it, and every base, 16-byte aligned
        pad_bytes = pad_bytes or symmetric.MAX_BLOCKS * self.world_size * symmetric.SIGNAL_BYTES
        name = f"/dev/shm/course-symm-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        with open(name, "wb") as f:  # zeros: empty buffers, every signal slot 0
            f.truncate(self.nbytes + pad_bytes)
        names = [None] * self.world_size
        dist.all_gather_object(names, name)
        # shared=True maps the file itself: a store by one rank is a store into every rank's
        # view of it (the mappings outlive the file, removed once every rank holds it)
        self._storages = [torch.UntypedStorage.from_file(n, shared=True,
                                                         nbytes=self.nbytes + pad_bytes)
                          for n in names]
        dist.barrier()
        os.unlink(name)
        bases = [s.data_ptr() for s in self._storages]
        self.buffer_ptrs = torch.tensor(bases, dtype=torch.int64)
        self.signal_pad_ptrs = torch.tensor([b + self.nbytes for b in bases], dtype=torch.int64)

    def view(self, numel: int, dtype: torch.dtype, rank: int | None = None) -> torch.Tensor:
        """The first ``numel`` elements of rank ``rank``'s buffer (this rank's by default)."""
        size = torch.tensor([], dtype=dtype).element_size()
        if numel * size > self.nbytes:
            raise ValueError(f"numel expected at most {self.nbytes // size} elements, got "
                             f"{numel}")
        t = torch.empty(0, dtype=torch.uint8)
        t.set_(self._storages[self.rank if rank is None else rank], 0, (numel * size,))
        return t.view(dtype)

    def signal_pad(self, rank: int | None = None) -> torch.Tensor:
        """Rank ``rank``'s signal pad (int32), this rank's by default."""
        storage = self._storages[self.rank if rank is None else rank]
        t = torch.empty(0, dtype=torch.uint8)
        t.set_(storage, self.nbytes, (storage.nbytes() - self.nbytes,))
        return t.view(torch.int32)


def interpreted_all_reduce(numels: list[int], dtype: torch.dtype = torch.float32,
                           method: str = "one_shot", seed: int = 0, calls: int = 2,
                           max_blocks: int = symmetric.MAX_BLOCKS, late: int | None = None,
                           kernels: str = "kernels.distributed.symmetric",
                           in_place: bool = False) -> list[dict]:
    """(A rank's work, in Triton's interpreter: start it with :func:`run`.) For each length in
    ``numels``, ``calls`` all-reduces in a row by the kernel ``method`` on random inputs, every
    rank's buffer the same shared memory, at most ``max_blocks`` blocks a launch (fewer than
    the tiles: each block loops). Returns per length this rank's inputs, its outputs, and
    whether its signal pad was all zeros after (every signal sent was taken).

    ``late``: a rank that runs behind, as one GPU may: it waits before copying each input into
    its buffer, and before each of its loads. Its peers then race ahead wherever a barrier is
    missing: they read its buffer before its input has landed or before its chunk is reduced,
    or return and overwrite their own buffer while it still reads it; either way a wrong sum.
    ``kernels``: the module whose ``launch`` runs them (a test's altered copy). ``in_place``
    (``two_shot_push``): the kernel's output is the rank's own buffer, copied out after."""
    if not _interpreted():
        raise RuntimeError("interpreted_all_reduce runs the kernels in Triton's interpreter: "
                           "start it with symmetric_cpu.run (TRITON_INTERPRET=1 in the ranks)")
    size = torch.tensor([], dtype=dtype).element_size()
    shared = SharedBuffers(max(numels) * size)
    g = torch.Generator().manual_seed(seed * 1000 + shared.rank)
    launch = importlib.import_module(kernels).launch
    behind = shared.rank == late
    rows = []
    with _slow_loads(LATE_S if behind else 0.0):
        for numel in numels:
            inputs, outputs = [], []
            for _ in range(calls):
                x = torch.randn(numel, generator=g).to(dtype)
                if behind:
                    time.sleep(LATE_S)
                # the caller's copy into the symmetric buffer: a rank may only do it once no
                # peer reads the buffer any more, which the last call's final barrier guaranteed
                shared.view(numel, dtype).copy_(x)
                out = torch.full((numel,), float("nan"), dtype=dtype)  # a tile skipped: NaN
                target = shared.view(numel, dtype) if in_place else out
                launch(shared.buffer_ptrs, shared.signal_pad_ptrs, target, numel, shared.rank,
                       shared.world_size, method, max_blocks, in_place)
                if in_place:  # before the next call's input is copied over it
                    out.copy_(target)
                inputs.append(x)
                outputs.append(out)
            dist.barrier()  # every rank is done with this length: no signal may be in flight
            clear = not shared.signal_pad().any().item()
            dist.barrier()  # (else a fast peer's next call may already have signalled)
            rows.append({"numel": numel, "inputs": inputs, "outputs": outputs,
                         "pad_clear": clear})
    return rows


LATE_S = 0.02  # how far behind a late rank runs, before each copy and each load


@contextlib.contextmanager
def _slow_loads(seconds: float):
    """Every load of Triton's interpreter waits ``seconds`` first (none when 0)."""
    if not seconds:
        yield
        return
    from triton.runtime.interpreter import InterpreterBuilder

    load = InterpreterBuilder.create_masked_load

    def slow(self, *args, **kwargs):
        time.sleep(seconds)
        return load(self, *args, **kwargs)

    InterpreterBuilder.create_masked_load = slow
    try:
        yield
    finally:
        InterpreterBuilder.create_masked_load = load


def _interpreted() -> bool:
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(symmetric.one_shot_kernel, InterpretedFunction)


def run(numels: list[int], dtype: torch.dtype = torch.float32, method: str = "one_shot",
        world_size: int = 2, seed: int = 0, timeout_s: float = 120.0,
        max_blocks: int = symmetric.MAX_BLOCKS, late: int | None = None,
        kernels: str = "kernels.distributed.symmetric",
        in_place: bool = False) -> list[list[dict]]:
    """:func:`interpreted_all_reduce` on ``world_size`` CPU processes (gloo), with
    ``TRITON_INTERPRET=1`` in their environment (on any machine, a GPU one too). Each rank's
    list of rows, rank 0 first; a barrier that never completes ends as a WorkerError."""
    with _interpreter_in_children():
        return ranks.run(interpreted_all_reduce, world_size, numels, dtype, method, seed, 2,
                         max_blocks, late, kernels, in_place, device="cpu",
                         timeout_s=timeout_s)


def interpreted_runs(runs: list[dict]) -> list[list[dict]]:
    """(A rank's work: start it with :func:`run_many`.) :func:`interpreted_all_reduce` for each
    of ``runs`` (its keyword arguments) in turn, in the same group of ranks."""
    return [interpreted_all_reduce(**run) for run in runs]


def run_many(runs: list[dict], world_size: int = 2, timeout_s: float = 600.0
             ) -> list[list[list[dict]]]:
    """What :func:`run` returns for each of ``runs`` (a dict of :func:`interpreted_all_reduce`'s
    keyword arguments: ``numels`` and any of ``dtype``, ``method``, ``seed``, ``max_blocks``,
    ``late``, ``in_place``), the same rows, from one group of ``world_size`` CPU processes for
    all of them: starting the ranks (a Python, torch and Triton each, seconds) costs more than
    a small run. Each run's rows per rank, rank 0 first, in the order of ``runs``. (A kernel
    that may hang, such as a test's broken copy, is better run alone with :func:`run`: one
    hang ends the whole group.)"""
    runs = list(runs)
    with _interpreter_in_children():
        per_rank = ranks.run(interpreted_runs, world_size, runs, device="cpu",
                             timeout_s=timeout_s)
    return [[rank[i] for rank in per_rank] for i in range(len(runs))]


def run_cases(numels: list[int], cases: list[tuple[str, torch.dtype]], world_size: int = 2,
              seed: int = 0, timeout_s: float = 120.0
              ) -> dict[tuple[str, torch.dtype], list[list[dict]]]:
    """What :func:`run` returns for each ``(method, dtype)`` of ``cases``, the same rows, from
    one group of ``world_size`` CPU processes for all of them (:func:`run_many`).
    ``{case: each rank's rows, rank 0 first}``, in the order of ``cases``."""
    cases = list(cases)
    rows = run_many([{"numels": numels, "dtype": dtype, "method": method, "seed": seed}
                     for method, dtype in cases], world_size, timeout_s)
    return dict(zip(cases, rows, strict=True))


@contextlib.contextmanager
def _interpreter_in_children():
    """``TRITON_INTERPRET=1`` while ranks start: they inherit it, before Triton loads."""
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved


def expected(rows: list[list[dict]]) -> list[list[torch.Tensor]]:
    """Per length and call, the sum of every rank's input in fp32, rounded to their dtype."""
    found = []
    for i in range(len(rows[0])):
        found.append([sum(rank[i]["inputs"][c].float() for rank in rows).to(
            rows[0][i]["inputs"][c].dtype) for c in range(len(rows[0][i]["inputs"]))])
    return found
