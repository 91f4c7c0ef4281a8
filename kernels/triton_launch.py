"""Launching a ``@triton.jit`` kernel at the host cost of the launch itself: a plan per problem.

``kernel[grid](*args, **meta)`` does a lot of Python on every call before the GPU hears of it:
it binds the arguments to the kernel's parameters, *specializes* each one (a pointer's dtype
and whether its address is a multiple of 16; an integer's width, whether it is 1 or a multiple
of 16), turns the lot into a cache key, looks the compiled kernel up, checks the globals it
used, and only then calls the launcher. With a dozen arguments that is a good part of a
tiny kernel's host time (lesson 11 measures it). A training step repeats the same few
problems thousands of times, so almost all of that can be done once per problem:

* the first call of a problem goes through ``kernel[grid](...)``, Triton's own path, which
  compiles if needed and returns the compiled kernel;
* a :class:`Plan` keeps what that call worked out: the grid, the arguments that are the same
  for every call of the problem (sizes, strides, constexprs) and the compiled kernel's
  launcher;
* every later call of the problem passes only its tensors to the launcher: one dictionary
  lookup, the current stream, one call into Triton's C launcher.

What makes it safe is the key. The compiled kernel Triton chose depends on the arguments'
specialization, so a plan is reused only for a call that specializes the same way: the
caller's key covers everything its ``make()`` reads (shapes, strides, dtypes, flags: what the
sizes, strides and constexprs are computed from), and :class:`Launcher` adds, for each tensor,
its dtype and whether its address is 16-byte aligned (a view at an odd offset gets its own
plan, as it would get its own compiled kernel from Triton), and the current device (a compiled
kernel is loaded per GPU).

It uses three attributes of Triton's compiled kernel (``run``, ``function``,
``packed_metadata``) and the JIT function's ``constexprs``, the same in Triton 3.6 and 3.8;
where one is missing (another version, the interpreter, a launch hook such as a profiler's),
every call takes ``kernel[grid](...)`` with the plan's arguments: slower, never wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from triton import knobs
from triton.runtime import driver

PLANS = 256  # problems a launcher remembers; a long sweep must not grow it forever


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for ints. ``triton.cdiv`` is a constexpr function since Triton 3.6:
    called from Python it unwraps its arguments first, about 2 µs a call."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 ≥ n (0 for 0, as Triton's): ``triton.next_power_of_2``
    without its constexpr wrapper (see :func:`cdiv`)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def _hooked() -> bool:
    """Whether a launch hook is installed (a profiler such as Proton's): it wants each launch's
    metadata, which only Triton's own path builds. (Triton 3.6 and 3.8 keep the hooks in chains
    that are empty unless one is added; older versions keep a function or None.)"""
    for hook in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return True
    return False


@dataclass
class Plan:
    """One problem's launch: the grid, the arguments after the tensors, the compiled kernel."""

    grid: tuple[int, ...]
    scalars: tuple  # the sizes, strides and other non-tensor arguments, in parameter order
    meta: dict  # constexprs and launch options (num_warps, ...), as kernel[grid] takes them
    tail: tuple = ()  # scalars, then the constexprs' values in parameter order
    run: Callable | None = None  # the compiled kernel's launcher (None: kernel[grid] each call)
    function: object = None
    packed_metadata: object = None


class Launcher:
    """``launcher(key, tensors, make)``: run ``kernel`` on ``tensors`` with the plan of
    ``key``, made by ``make() -> (grid, scalars, meta)`` the first time the key is seen.

    The kernel's parameters must be its tensors first, then ``scalars``, then its constexprs
    (what ``meta`` names besides the launch options); every kernel of the course is written so.
    ``make`` is called only for a new key, so the key must hold everything it reads."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.plans: dict[tuple, Plan] = {}
        # the constexprs' names in parameter order, and whether they all come last (they must,
        # for the launcher's positional arguments to line up); None: not a JIT function
        names = getattr(kernel, "arg_names", None)
        constexprs = getattr(kernel, "constexprs", None)
        self.constexpr_names = None
        if names is not None and constexprs is not None:
            last = list(range(len(names) - len(constexprs), len(names)))
            if sorted(constexprs) == last:
                self.constexpr_names = tuple(names[i] for i in last)

    def __call__(self, key: tuple, tensors: tuple, make: Callable[[], tuple]) -> None:
        # Triton launches on the current GPU (its compiled kernel is loaded per GPU), and reads
        # each tensor's dtype and whether its address is 16-byte aligned
        device = torch.cuda.current_device() if tensors[0].is_cuda else -1
        full = (key, device, *[(t.dtype, t.data_ptr() % 16 == 0) for t in tensors])
        plan = self.plans.get(full)
        if plan is None:
            self._first(full, tensors, make)
        elif plan.run is None or _hooked():
            self.kernel[plan.grid](*tensors, *plan.scalars, **plan.meta)
        else:
            grid = plan.grid
            # the stream current now: a CUDA graph's capture stream while one is captured
            stream = driver.active.get_current_stream(device)
            plan.run(grid[0], grid[1], grid[2], stream, plan.function, plan.packed_metadata,
                     None, None, None, *tensors, *plan.tail)

    def _first(self, full: tuple, tensors: tuple, make: Callable[[], tuple]) -> None:
        """Triton's own path for a new problem (it compiles if needed); keep what it found."""
        grid, scalars, meta = make()
        grid = tuple(grid) + (1,) * (3 - len(grid))
        compiled = self.kernel[grid](*tensors, *scalars, **meta)
        plan = Plan(grid, tuple(scalars), dict(meta))
        handles = [getattr(compiled, name, None) for name in ("run", "function",
                                                              "packed_metadata")]
        if self.constexpr_names is not None and None not in handles:
            plan.run, plan.function, plan.packed_metadata = handles
            plan.tail = (*plan.scalars, *(meta[name] for name in self.constexpr_names))
        if len(self.plans) >= PLANS:
            self.plans.clear()
        self.plans[full] = plan
