"""A launch prepared once per problem, looked up on every later call: what makes a registered
Hopper call cost the host about what ``torch.mm`` costs it (lesson 11's overhead table).

A registered call in a loop repeats one problem: the same operands (addresses, shapes,
strides), a fresh output each time. Everything but the output is prepared on the first call
(the loaded kernel, A's and B's TMA descriptors, the launch shape, every argument packed: a
:class:`course_utils.nvrtc.Prepared`); a later call allocates the output, puts its address
(and, with a TMA store, its descriptor, itself remembered by address) into the packed
arguments and launches: a dictionary lookup and one cuLaunchKernel, as torch.mm's own path.
The key holds the addresses because a descriptor does; one plan per thread, because a
prepared launch's arguments are shared. A split-K plan also holds its workspace, allocated
once: each launch leaves the arrival counters at zero for the next, so calls on one stream
(a loop's) reuse it as it is; two streams must not run one plan at the same time.

Used by :func:`kernels.matmul.hopper.wgmma.plan` (the steps) and
:func:`kernels.matmul.hopper.scaled.run_blocks` (the block-scaled kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_utils import nvrtc
from kernels.matmul.hopper import tma


@dataclass
class Plan:
    """A launch prepared for one problem: ``plan(out)`` writes the product into ``out``."""

    prepared: nvrtc.Prepared
    out_index: int  # the output's address among the arguments
    store_box: int | None  # the output's TMA descriptor: its index, or None (plain stores)
    # the step and variant, kept alive: the key holds their ids. The operands are not kept: a
    # tensor allocated later at the same address, shape and strides gets the same descriptors
    keep: tuple
    stored_to: int = 0  # the output address the packed descriptor describes
    split_workspace: tuple | None = None  # split-K's partials and counters (wgmma.workspace)

    def __call__(self, out: torch.Tensor) -> None:
        address = out.data_ptr()
        self.prepared.set_address(self.out_index, address)
        # the allocator mostly hands back the last output's block: then its descriptor stands
        if self.store_box is not None and address != self.stored_to:
            self.prepared.set_value(self.store_box, tma.encode(out, 64, "out"))
            self.stored_to = address
        self.prepared()


_plans: dict[tuple, Plan] = {}
PLANS = 64  # problems remembered (descriptors and packed arguments are a few hundred bytes)


def tensor_key(t: torch.Tensor) -> tuple:
    """What a plan's key holds of an operand: its address, shape and strides."""
    return t.data_ptr(), t.shape, t.stride()


def remembered(key: tuple, make) -> Plan:
    """The plan under ``key`` (which names the thread), made by ``make()`` the first time;
    at most :data:`PLANS` are kept (the lot is dropped when full: a loop needs one)."""
    if (found := _plans.get(key)) is None:
        found = make()
        if len(_plans) >= PLANS:
            _plans.clear()
        _plans[key] = found
    return found
