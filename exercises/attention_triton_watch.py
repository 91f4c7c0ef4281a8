"""What exercise attention_variants.flash_triton watches while the student's kernels run
(:mod:`exercises.attention_triton`): in Triton's interpreter the programs of every launch run in
a shuffled order, two programs storing to the same element are a race, and the widest
``tl.arange`` is kept; everywhere the Triton launches are counted, and the ATen ops run outside
them are the ones the dispatch-mode watcher of :mod:`exercises.attention_tiles_problems` sees.

The interpreter runs a launch's programs one after another from program 0, always in the same
order, where a GPU runs them at once and in any order. Three mistakes hide behind that order: a
sum over programs done with a load, an add and a plain store (right in sequence, a lost update
on a GPU), a program that reads what another program of the same launch writes, and a sum whose
rounding depends on which program adds first (``tl.atomic_add``). Shuffling catches the second,
the race record the first, a second run in another order the third.
"""

from __future__ import annotations

import collections
import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import torch

from course_utils import env
from exercises import triton_launchers
from exercises.triton_checks import as_array


@dataclass
class Seen:
    """What one pass (the forward, or the backward) did."""

    launches: collections.Counter = field(default_factory=collections.Counter)
    widest: tuple[int, str] = (0, "")  # the longest tl.arange, and the kernel that made it
    race: str = ""  # the first element two programs of one launch stored, in words


def _tensor_at(address: int, args) -> str:
    """'element i of <name>' for the launch argument whose bytes hold ``address``."""
    for name, arg in args:
        t = getattr(arg, "base", arg)
        if isinstance(t, torch.Tensor) and t.numel():
            span = sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride(), strict=True)) + 1
            start = t.data_ptr()
            if start <= address < start + span * t.element_size():
                return f"element {(address - start) // t.element_size()} of {name}"
    return f"address {address:#x}"


def _first_race(stores: list[tuple[int, np.ndarray]], grid, kernel: str, args) -> str:
    """The first address that two programs of one launch both stored to, in words; ""."""
    if len(stores) < 2:
        return ""
    addresses = np.concatenate([a for _, a in stores])
    programs = np.concatenate([np.full(len(a), p, dtype=np.uint64) for p, a in stores])
    pairs = np.unique(np.stack([addresses, programs]), axis=1)  # each (address, program) once
    shared, counts = np.unique(pairs[0], return_counts=True)
    if not (counts > 1).any():
        return ""
    address = int(shared[counts > 1][0])
    _, ny, nz = grid
    who = [int(p) for p in pairs[1][pairs[0] == address][:2]]
    named = [f"({p // (ny * nz)}, {p // nz % ny})" for p in who]
    return (f"programs {named[0]} and {named[1]} of {kernel} both stored "
            f"{_tensor_at(address, args)} with tl.store")


@contextlib.contextmanager
def watched_launches(watch, seed: int, reverse: bool = False) -> Iterator[Seen]:
    """Inside the block: each Triton launch counted (``watch``, the dispatch-mode watcher,
    paused while it runs); in the interpreter, each launch's programs in an order shuffled by
    ``seed`` (``reverse``: the same orders backwards, so that a second run of the same launches
    takes every two programs the other way round), the stores of each launch read for races,
    the widest tl.arange kept."""
    seen = Seen()
    rng = random.Random(seed)

    def counting(original):
        def run(self, *args, **kwargs):
            if not kwargs.get("warmup"):
                seen.launches[getattr(getattr(self, "fn", self), "__name__", "?")] += 1
            watch.paused += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                watch.paused -= 1

        return run

    with contextlib.ExitStack() as stack:
        for cls in triton_launchers():
            stack.enter_context(mock.patch.object(cls, "run", counting(cls.__dict__["run"])))
        if env.TRITON_INTERPRET:
            stack.enter_context(_interpreter_watched(seen, rng, reverse))
        yield seen


@contextlib.contextmanager
def _interpreter_watched(seen: Seen, rng: random.Random, reverse: bool) -> Iterator[None]:
    from triton.runtime import interpreter

    builder, grid_executor = interpreter.InterpreterBuilder, interpreter.GridExecutor
    set_grid_idx, store = builder.set_grid_idx, builder.create_masked_store
    make_range, init_args = builder.create_make_range, grid_executor._init_args_hst
    launch: dict = {"order": [], "stores": [], "kernel": "", "args": [], "grid": (1, 1, 1)}

    def finish() -> None:
        if not seen.race:
            seen.race = _first_race(launch["stores"], launch["grid"], launch["kernel"],
                                    launch["args"])
        launch["stores"] = []

    def starting(self, args_dev, kwargs):
        finish()
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        launch.update(order=[], kernel=self.fn.__name__,
                      args=[*zip(self.arg_names, args_hst, strict=False), *kwargs_hst.items()])
        return args_hst, kwargs_hst

    def shuffled(self, x, y, z):
        nx, ny, nz = self.grid_dim
        if len(launch["order"]) != nx * ny * nz:  # the launch's first program: a new order
            launch["order"] = list(range(nx * ny * nz))
            rng.shuffle(launch["order"])
            if reverse:
                launch["order"].reverse()
            launch["grid"] = (nx, ny, nz)
        flat = launch["order"][(x * ny + y) * nz + z]
        set_grid_idx(self, flat // (ny * nz), flat // nz % ny, flat % nz)

    def recorded(self, ptrs, value, mask, *rest, **options):
        addresses = as_array(ptrs).astype(np.uint64)
        active = np.broadcast_to(as_array(mask).astype(bool), addresses.shape)
        x, y, z = (int(i) for i in self.grid_idx)
        _, ny, nz = self.grid_dim
        launch["stores"].append(((x * ny + y) * nz + z, addresses[active]))
        return store(self, ptrs, value, mask, *rest, **options)

    def ranged(self, ret_ty, start, stop):
        if stop - start > seen.widest[0]:
            seen.widest = (stop - start, launch["kernel"])
        return make_range(self, ret_ty, start, stop)

    with mock.patch.object(grid_executor, "_init_args_hst", starting), \
            mock.patch.object(builder, "set_grid_idx", shuffled), \
            mock.patch.object(builder, "create_masked_store", recorded), \
            mock.patch.object(builder, "create_make_range", ranged):
        try:
            yield
        finally:
            finish()
