"""Occupancy worked out by hand: how many blocks of a kernel one SM holds at once.

A block is resident on an SM only if the SM has room for all of it: its warps, its registers
and its shared memory, and a slot (an SM holds a fixed number of blocks). The fewest blocks any
of the four allows is the answer; the rest of the SM stays idle. The rules are those of CUDA's
own calculator (``cuda_occupancy.h``, which ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``
follows), with the default cache configuration (all of the SM's shared memory available):

* **warps**: ``floor(max warps per SM / warps per block)``, warps per block rounded up;
* **registers**: allocated per warp, ``registers per thread × 32`` rounded up to 256, and the
  register file is split into 4 sub-partitions of which a warp lives in one:
  ``4 × floor((registers per SM / 4) / registers per warp)`` warps fit, divided by the warps
  per block (more than 256 registers a thread, or more than a block may have: none);
* **shared memory**: each block takes its shared memory plus 1 KiB the driver reserves, rounded
  up to 128 bytes, out of the SM's total;
* **blocks**: at most 32 per SM.

``tests/test_occupancy.py`` compares :func:`blocks_per_sm` with ``cuda_occupancy.h`` itself,
compiled on the machine, over thousands of launches.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one SM of a GPU holds (the device properties the calculator reads)."""

    name: str
    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks per SM
    registers: int  # 32-bit registers per SM
    registers_per_block: int  # the most one block may use
    max_registers_per_thread: int  # the calculator's 256 (ptxas gives at most 255)
    register_unit: int  # registers are allocated per warp in multiples of this
    sub_partitions: int  # the register file is split into these, one warp in one
    shared: int  # bytes of shared memory per SM (all of it: the default carveout)
    shared_per_block: int  # the most one block may have (opting in)
    shared_reserved: int  # bytes the driver keeps per block
    shared_unit: int  # shared memory is allocated in multiples of this


SM90 = Limits(name="sm_90 (H100, H200)", max_warps=64, max_blocks=32, registers=65536,
              registers_per_block=65536, max_registers_per_thread=256, register_unit=256,
              sub_partitions=4, shared=233472, shared_per_block=232448, shared_reserved=1024,
              shared_unit=128)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def limits_of(threads: int, registers: int, shared: int, limits: Limits = SM90) -> dict[str, int]:
    """Blocks per SM that each resource allows: ``{"warps", "registers", "shared memory",
    "blocks"}`` for blocks of ``threads`` threads using ``registers`` registers a thread and
    ``shared`` bytes of shared memory (static + dynamic)."""
    if threads < 1 or registers < 0 or shared < 0:
        raise ValueError(f"expected threads >= 1, registers >= 0 and shared >= 0, got threads="
                         f"{threads}, registers={registers}, shared={shared}")
    warps = -(-threads // 32)
    per_warp = _round_up(registers * 32, limits.register_unit)
    assumed = per_warp * _round_up(warps, limits.sub_partitions)  # the hardware's own check
    if registers > limits.max_registers_per_thread or max(assumed, per_warp * warps) > \
            limits.registers_per_block:
        by_registers = 0
    elif per_warp == 0:
        by_registers = limits.max_blocks
    else:
        per_partition = limits.registers // limits.sub_partitions // per_warp
        by_registers = per_partition * limits.sub_partitions // warps
    block_shared = _round_up(shared + limits.shared_reserved, limits.shared_unit)
    if shared > limits.shared_per_block:
        by_shared = 0
    elif block_shared == 0:  # no shared memory and nothing reserved (not on an H100: 1 KiB is)
        by_shared = limits.max_blocks
    else:
        by_shared = limits.shared // block_shared
    return {"warps": limits.max_warps // warps, "registers": by_registers,
            "shared memory": by_shared, "blocks": limits.max_blocks}


def blocks_per_sm(threads: int, registers: int, shared: int, limits: Limits = SM90) -> int:
    """Resident blocks per SM: the fewest any resource of :func:`limits_of` allows."""
    return min(limits_of(threads, registers, shared, limits).values())
