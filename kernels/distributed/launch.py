"""Start N processes, one per rank, from a notebook cell, and bring their results back.

    results = launch.run(collectives.sweep, world_size=2, sizes=[4096, 65536])
    results[0]                # what rank 0's call returned

Each rank is a fresh Python (``torch.multiprocessing``'s *spawn*: no fork of a notebook kernel
that may hold CUDA or Triton state) that imports ``fn`` by its module and name, so ``fn`` must
live in a module (a notebook cell's function cannot be imported by a child: :func:`run` says so
before starting anything). The ranks meet through a ``TCPStore`` that the *parent* opens on port
0: the operating system picks a free port and the parent holds it open for as long as the ranks
run, so no other program can take it between choosing and using (choosing a port by binding and
closing a socket leaves that window open).

The backend is gloo on CPU processes and NCCL when there is one GPU per rank (rank ``r`` uses
``cuda:r``). Every rank's environment keeps NVLink multicast off (:data:`NO_MULTICAST`): the GPU
machines here cannot run it, and a process that tried would fail or hang.

Nothing a rank does can hang the notebook: collectives time out after ``timeout_s`` (the process
group's timeout), the parent waits at most ``timeout_s`` for all ranks, and then ends them and
raises :class:`WorkerError` with what each rank printed of its exception.
"""

from __future__ import annotations

import datetime
import os
import pickle
import queue as queue_module
import time
import traceback
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# NVLink multicast (NVLS) is off on the GPU machines here: NCCL, PyTorch's symmetric memory and
# NVSHMEM are each told not to use it, in every process started
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
HOST = "127.0.0.1"
TIMEOUT_S = 120.0


class WorkerError(RuntimeError):
    """A rank failed, or the ranks did not finish in time: the message says which and why."""


def backend_for(world_size: int, device: str | None = None) -> tuple[str, str]:
    """``(backend, device type)``: NCCL on GPUs when this machine has one per rank (or
    ``device="cuda"`` is asked for), else gloo on CPUs."""
    if device not in (None, "cpu", "cuda"):
        raise ValueError(f"device expected 'cpu', 'cuda' or None, got {device!r}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "cuda" and gpus < world_size:
        raise ValueError(f"device='cuda' needs one GPU per rank: world_size={world_size}, "
                         f"this machine has {gpus}")
    if device == "cuda" or (device is None and gpus >= world_size):
        return "nccl", "cuda"
    return "gloo", "cpu"


# what a failed first connection of gloo's ranks says (then run() starts the ranks once more)
RENDEZVOUS_FAILURES = ("connectFullMesh",)


def _check_importable(fn: Callable) -> None:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not callable(fn) or module in (None, "__main__") or "<" in qualname:
        raise ValueError(f"fn expected a function defined at the top of a module (a rank "
                         f"imports it by name), got {fn!r} from {module!r}: move it to a .py file")


def run(fn: Callable, world_size: int = 2, *args, device: str | None = None,
        timeout_s: float = TIMEOUT_S, threads: int = 1, **kwargs) -> list:
    """Call ``fn(*args, **kwargs)`` in ``world_size`` new processes, each in a process group
    (``torch.distributed`` initialised, rank and device set), and return their results, rank 0
    first. ``threads``: torch's CPU threads per rank (one each keeps 2 ranks off each other on
    a 2-core machine)."""
    _check_importable(fn)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size expected a positive int, got {world_size!r}")
    if not (isinstance(timeout_s, int | float) and timeout_s > 0):
        raise ValueError(f"timeout_s expected a positive number, got {timeout_s!r}")
    backend, device_type = backend_for(world_size, device)
    for attempt in range(2):
        try:
            return _run_once(fn, world_size, backend, device_type, timeout_s, threads, args,
                             kwargs)
        except WorkerError as err:
            # gloo's first connection between the ranks failed ("Connection closed by peer",
            # seen once on a 2-core machine busy with other tests): it happens inside
            # init_process_group, before fn runs, so starting again loses nothing
            if attempt or not any(s in str(err) for s in RENDEZVOUS_FAILURES):
                raise
    raise AssertionError("unreachable")


def _run_once(fn: Callable, world_size: int, backend: str, device_type: str, timeout_s: float,
              threads: int, args: tuple, kwargs: dict) -> list:
    timeout = datetime.timedelta(seconds=timeout_s)
    # the parent holds the rendezvous: port 0 lets the OS choose, and it stays bound until the
    # ranks are done (wait_for_workers=False: ranks connect as they start)
    store = dist.TCPStore(HOST, 0, world_size + 1, is_master=True, timeout=timeout,
                          wait_for_workers=False)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    saved = {k: os.environ.get(k) for k in NO_MULTICAST}
    os.environ.update(NO_MULTICAST)  # a spawned child inherits the parent's environment
    try:
        procs = [ctx.Process(target=_rank_main, daemon=True,
                             args=(fn, rank, world_size, backend, device_type, store.port,
                                   timeout_s, threads, args, kwargs, results))
                 for rank in range(world_size)]
        for p in procs:
            p.start()
        return _collect(procs, results, world_size, timeout_s, fn)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        del store


def _collect(procs, results, world_size: int, timeout_s: float, fn) -> list:
    found: dict[int, object] = {}
    errors: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    clean = False
    try:
        while len(found) + len(errors) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(world_size)) - set(found) - set(errors))
                raise WorkerError(f"{fn.__name__}: rank(s) {missing} did not finish within "
                                  f"{timeout_s:g} s (a collective that not every rank "
                                  f"called waits forever); the ranks were stopped"
                                  + _describe(errors))
            try:
                rank, ok, value = results.get(timeout=min(left, 0.5))
            except queue_module.Empty:
                dead = [r for r, p in enumerate(procs)
                        if not p.is_alive() and p.exitcode not in (0, None)
                        and r not in found and r not in errors]
                for r in dead:  # killed before it could report (out of memory, a signal)
                    errors[r] = f"exited with code {procs[r].exitcode} without a result"
                continue
            (found if ok else errors)[rank] = pickle.loads(value) if ok else value
            if errors:  # one rank failed: the others would wait for it in a collective
                break
        if errors:
            raise WorkerError(f"{fn.__name__} failed" + _describe(errors))
        clean = True
        return [found[r] for r in range(world_size)]
    finally:
        for p in procs:  # a clean rank is leaving its group: give it a moment
            p.join(timeout=5 if clean else 0)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


def _describe(errors: dict[int, str]) -> str:
    return "".join(f"\n--- rank {r} ---\n{text.rstrip()}" for r, text in sorted(errors.items()))


def _rank_main(fn, rank, world_size, backend, device_type, port, timeout_s, threads, args,
               kwargs, results) -> None:
    """A rank's life: join the group, call ``fn``, report, leave the group."""
    try:
        os.environ.update(NO_MULTICAST)
        torch.set_num_threads(threads)
        if device_type == "cuda":
            torch.cuda.set_device(rank)
        store = dist.TCPStore(HOST, port, world_size + 1, is_master=False,
                              timeout=datetime.timedelta(seconds=timeout_s))
        kw = {"device_id": torch.device("cuda", rank)} if device_type == "cuda" else {}
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s), **kw)
        try:
            value = fn(*args, **kwargs)
        finally:
            dist.destroy_process_group()
        # pickled to bytes here: tensors then travel by value, not as shared memory that
        # this process owns and takes with it when it exits
        results.put((rank, True, pickle.dumps(value)))
    except BaseException:  # noqa: BLE001  (whatever it was, the parent must hear of it)
        results.put((rank, False, traceback.format_exc()))


def device() -> torch.device:
    """This rank's device (inside a rank): ``cuda:rank`` under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
