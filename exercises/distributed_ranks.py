"""The rank processes a distributed exercise's check runs in: gloo processes on the CPU (any
machine), started once and kept for the checks that follow (:class:`Ranks`, over a pool of
:data:`WORLD` processes), and what their failures mean for the student (a case named, a
collective that waited too long, a refused call).

A check gives :class:`Ranks` its ``rank_check(source, seed, store, number)``: the work of one
rank on one answer (the answer's text, shipped with what it names:
:mod:`exercises.shipped_code`), which forms the groups it needs among the :data:`WORLD` ranks.
Starting four Pythons that import torch is most of a check's time; a pool kept within
:data:`POOL_IDLE_S` of the last check makes a check cost its collectives.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
import traceback

import torch

from exercises import CannotCheck, Mismatch

WORLD = 4  # rank processes a pool starts: the largest group a check forms among them
RANK_TIMEOUT_S = 60
CHECK_TIMEOUT_S = 90  # one check's answer on every rank, once they have started
START_TIMEOUT_S = 180  # the ranks' start (each imports torch)
POOL_IDLE_S = 20  # a check that comes later than this after the last starts new ranks
RANK_IDLE_S = 60  # a rank with no check for this long leaves (the parent sends none that late)
POOL_LIFE_S = 900  # the launch's own limit (the parent sends no check near it)
CASE = "\u00a7"  # encloses the case in a rank's error, so the parent can name it


def raised_in_answer(why: BaseException, source: str) -> str:
    """What an exception in the answer says, with the line of the answer it came from."""
    said = str(why).strip().splitlines()[0] if str(why).strip() else ""
    said = re.sub(r"^\[rank\d+\]:\[\w+ [\d:.]+ [^\]]*\] ", "", said)  # a C++ log line's head
    text = f"{type(why).__name__}: {said}"
    frames = [f for f in traceback.extract_tb(why.__traceback__) if f.filename == "<your cell>"]
    if frames:
        text += f" (at `{source.splitlines()[frames[-1].lineno - 1].strip()}`)"
    if isinstance(why, NameError):
        text += (". The ranks run a copy of your function with the imports and constants it "
                 "names: import the name in your cell, or make it inside the function")
    return text


def _serve(tasks: list, results, rank_check, setup) -> None:
    """(A rank of the pool.) Each check's answer, from this rank's queue in ``tasks``, run by
    ``rank_check`` (after ``setup``, once, where there is one), its records put in
    ``results``; until told to stop (None), or idle for :data:`RANK_IDLE_S`. An answer that
    raises ends the pool (the launcher stops every rank: the others may be waiting in a
    collective for this one)."""
    import pickle

    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    rank = dist.get_rank()
    assert dist.get_world_size() == WORLD, (dist.get_world_size(), WORLD)
    results.put(("started", rank, os.getpid()))
    if setup is not None:
        setup()
    store = distributed_c10d._get_default_store()
    while True:
        try:
            task = tasks[rank].get(timeout=RANK_IDLE_S)
        except queue.Empty:
            return
        if task is None:
            return
        number, source, seed = task
        torch.set_default_dtype(torch.float32)  # (a cell may have changed it)
        records = rank_check(source, seed, store, number)
        # pickled to bytes here: tensors then travel by value, not as this process's memory
        results.put(("done", rank, number, pickle.dumps(records)))


class _Pool:
    """``WORLD`` rank processes, started once (one :func:`kernels.distributed.launch.run`
    of :func:`_serve`, in a thread) and given the checks that come within
    :data:`POOL_IDLE_S` of the last: a check then costs its collectives, not four processes
    that each import torch."""

    def __init__(self, rank_check, setup):
        self.rank_check, self.setup = rank_check, setup
        self.ranks = WORLD
        ctx = torch.multiprocessing.get_context("spawn")
        self.tasks = [ctx.Queue() for _ in range(self.ranks)]
        for q in self.tasks:
            q.cancel_join_thread()  # (exiting never waits for a rank that is gone)
        self.results = ctx.Queue()
        self.failure: BaseException | None = None
        self.pids: dict[int, int] = {}
        self.number = 0
        self.started = self.used = time.monotonic()
        self.thread = threading.Thread(target=self._launch, daemon=True, name="halves ranks")
        self.thread.start()

    def _launch(self) -> None:
        from kernels.distributed import launch

        try:
            launch.run(_serve, self.ranks, self.tasks, self.results, self.rank_check,
                       self.setup, timeout_s=POOL_LIFE_S, device="cpu")
        except BaseException as why:  # noqa: BLE001  (the check waiting on the pool says it)
            self.failure = why
        finally:
            self.results.put(("ended",))

    def usable(self) -> bool:
        now = time.monotonic()
        return (self.thread.is_alive() and now - self.used < POOL_IDLE_S
                and now - self.started < POOL_LIFE_S - 2 * CHECK_TIMEOUT_S)

    def stop(self) -> None:
        for q in self.tasks:
            q.put(None)

    def kill(self) -> None:
        """End the ranks (by their process ids: they are this process's children)."""
        import signal

        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def run(self, source: str, seed: int) -> list[list[dict]]:
        """Every rank's records of one answer; the launcher's WorkerError where a rank
        raised; TimeoutError (the ranks ended) where they took longer than
        :data:`CHECK_TIMEOUT_S` once started, CannotCheck where they did not start."""
        import pickle

        self.number += 1
        for q in self.tasks:
            q.put((self.number, source, seed))
        found = {}
        started = len(self.pids) == self.ranks
        deadline = time.monotonic() + (CHECK_TIMEOUT_S if started else START_TIMEOUT_S)
        while len(found) < self.ranks:
            try:
                item = self.results.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                self.kill()
                if not started:
                    raise CannotCheck(f"the {self.ranks} rank processes did not start within "
                                      f"{START_TIMEOUT_S} s: this machine is too busy now; "
                                      "run the check again") from None
                raise TimeoutError from None
            if item[0] == "started":
                self.pids[item[1]] = item[2]
                if len(self.pids) == self.ranks and not started:
                    started, deadline = True, time.monotonic() + CHECK_TIMEOUT_S
            elif item[0] == "ended":
                self.thread.join()
                raise self.failure or RuntimeError("the ranks ended before the check did")
            elif item[2] == self.number:
                found[item[1]] = pickle.loads(item[3])
        self.used = time.monotonic()
        return [found[r] for r in range(self.ranks)]




def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit (NaN where NaN)."""
    def bits(t):
        return t.detach().contiguous().view(-1).view(torch.uint8)

    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


class Ranks:
    """A check's rank processes, kept between its checks (a :class:`_Pool`, started where there
    is none or it sat idle), and what their failures mean for the student. ``rank_check`` runs
    one answer on one rank and returns its records (``setup`` runs once in each rank first);
    ``refusals`` maps a text a rank may fail with to what the student is told instead."""

    lock = threading.Lock()  # one check's answer in the rank processes at a time

    def __init__(self, rank_check, hint: str, setup=None, refusals: dict[str, str] | None = None):
        self.rank_check, self.hint, self.setup = rank_check, hint, setup
        self.refusals = refusals or {}
        self.pool: _Pool | None = None

    def run(self, source: str, seed: int) -> list[list[dict]]:
        """Every rank's records, or Mismatch naming the case a rank failed in. A rank that
        fails outside the answer (gloo's first connection between the ranks, seen failing on a
        busy 2-core machine) is the check's trouble: once more on new ranks, then
        CannotCheck."""
        from kernels.distributed import launch

        for _ in range(2):
            with Ranks.lock:
                if self.pool is None or not self.pool.usable():
                    if self.pool is not None:
                        self.pool.stop()
                    self.pool = _Pool(self.rank_check, self.setup)
                try:
                    return self.pool.run(source, seed)
                except TimeoutError:
                    self.pool = None
                    raise Mismatch(f"your function did not return within {CHECK_TIMEOUT_S} s "
                                   f"on {WORLD} ranks: does it end, and does every rank "
                                   "call the same collectives in the same order?",
                                   self.hint) from None
                except launch.WorkerError as why:
                    self.pool = None
                    text = str(why)
                except BaseException:
                    self.pool = None
                    raise
            marked = re.search(f"{CASE}(.*?){CASE}(.*)", text)
            if marked is not None:
                break
        else:
            last = [ln.strip() for ln in text.splitlines() if ln.strip()][-1:]
            raise CannotCheck(f"the check's {WORLD} rank processes failed twice, outside "
                              f"your function ({last[0] if last else text}): run the check "
                              "again")
        rank = re.search(r"--- rank (\d+) ---", text)
        case, said = marked[1], marked[2].strip()
        where = f"{case}, rank {rank[1] if rank else '?'}"
        for refused, told in self.refusals.items():
            if refused in said:
                raise Mismatch(f"{where}: {told}", self.hint) from None
        if re.search(r"[Tt]imed? ?out", said):
            raise Mismatch(f"{where}: a collective waited {RANK_TIMEOUT_S} s for another rank "
                           f"and gave up ({said}): does every rank call the same collectives "
                           "in the same order?", self.hint) from None
        raise Mismatch(f"{where}: your function raised {said}", self.hint) from None
