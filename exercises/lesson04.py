"""Exercises of lesson 04: NVRTC (a block-size sweep). The traps' exercises (a kernel generic over
dtype under PyTorch's flags, libcu++) moved with their sections to appendix A1
(:mod:`exercises.lessonA1`)."""

from __future__ import annotations

import torch

from course_utils import env
from exercises import (
    bandwidth_verdict,
    exercise,
    expect,
    needs,
)
from exercises.kernel_checks import compile_answer

ADD_CU = env.ROOT / "kernels" / "add" / "add.cu"


# --------------------------------------------------------------------------------------------
SWEEP_STUB = '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE  # kernels/add/add.cu


def add_variants(blocks, arch):
    """{BLOCK: compiled add_kernel of add.cu for float32 with that BLOCK} for each of blocks."""
    ...
'''


@exercise("04.sweep", title="Sweep the block size with NVRTC", stub=SWEEP_STUB,
          answers=("add_variants",), section="The header-generation workflow", intro="""
`kernels/add/add.cu` takes its block size from the generated header (`BLOCK`, also in
`__launch_bounds__(BLOCK)`). Write `add_variants`: one NVRTC compile per block size, for
float32 (`scalar_t`), for `arch`. Each compile takes milliseconds, which is what makes such a
sweep cheap. The check calls it with 64..1024 and reads each variant's PTX (`.maxntid`, the
launch bound); on a GPU it then times every variant and compares the best with the copy
bandwidth.""")
def check_sweep(add_variants, report) -> None:
    from course_utils import nvrtc

    needs("nvrtc")
    blocks = [64, 128, 256, 512, 1024]
    arch = None if env.HAS_CUDA else "sm_90"
    variants = add_variants(blocks, arch)
    expect(isinstance(variants, dict) and sorted(variants) == blocks,
           f"add_variants({blocks}, {arch!r}) returned "
           f"{sorted(variants) if isinstance(variants, dict) else type(variants).__name__}; "
           f"expected a dict with the keys {blocks}", "{b: nvrtc.compile(...) for b in blocks}")
    for block, compiled in variants.items():
        expect(isinstance(compiled, nvrtc.Compiled),
               f"variant {block} is a {type(compiled).__name__}, not what nvrtc.compile returns")
        defines = dict(compiled.defines)
        expect(defines.get("BLOCK") == block,
               f"variant {block} was compiled with BLOCK = {defines.get('BLOCK')!r}",
               "pass defines={'scalar_t': torch.float32, 'BLOCK': block}")
        expect(defines.get("scalar_t") in (torch.float32, "float"),
               f"variant {block} has scalar_t = {defines.get('scalar_t')!r}; expected float32")
    ptx = {b: compile_answer(ADD_CU, "add_kernel", f"BLOCK={b}", output="ptx",
                             defines=dict(c.defines)).ptx
           for b, c in variants.items()}
    bounds = {b: next((ln.split()[1].rstrip(",") for ln in p.splitlines() if ".maxntid" in ln),
                      None) for b, p in ptx.items()}
    expect(all(bounds[b] == str(b) for b in blocks), f"launch bounds in the PTX: {bounds}")
    report.line(f"{len(blocks)} variants; each PTX has .maxntid = its BLOCK")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also times each variant against the copy bandwidth")
        return
    from course_utils import timing

    n = 1 << 28
    a, b, out = (torch.randn(n, device="cuda") for _ in range(3))
    speeds = {}
    for block, compiled in variants.items():
        kernel = nvrtc.load(compiled)
        ms = timing.benchmark(lambda k=kernel, bl=block: k(a, b, out, n, grid=-(-n // bl),
                                                          block=bl), device="cuda").median
        speeds[block] = timing.gbps(3 * n * 4, ms)
    report.line("GB/s by BLOCK: " + ", ".join(f"{k}: {v:,.0f}" for k, v in speeds.items()))
    best = max(speeds, key=speeds.get)
    kernel = nvrtc.load(variants[best])
    bandwidth_verdict(report, lambda: kernel(a, b, out, n, grid=-(-n // best), block=best),
                      (), 3 * n * 4)


# --------------------------------------------------------------------------------------------
OCCUPANCY_STUB = '''
# One SM of an H100 (compute capability 9.0), as CUDA's occupancy calculator sees it
MAX_WARPS = 64              # resident warps per SM
MAX_BLOCKS = 32             # resident blocks per SM
REGISTERS = 65536           # 32-bit registers per SM, in 4 sub-partitions of 16384
SUB_PARTITIONS = 4          # a warp's registers all come from one sub-partition
REGISTER_UNIT = 256         # registers are given to a warp in multiples of 256
SHARED = 233472             # bytes of shared memory per SM (228 KiB)
SHARED_RESERVED = 1024      # bytes the driver keeps per block
SHARED_UNIT = 128           # shared memory is given to a block in multiples of 128 bytes


def blocks_per_sm(threads, registers, shared):
    """Blocks of `threads` threads, `registers` registers a thread and `shared` bytes of shared
    memory that one SM holds at once: the fewest that warps, registers, shared memory and block
    slots each allow."""
    ...
'''
# (threads, registers a thread, shared bytes): each limit binding at least once, the rounding
# of each (threads not a multiple of 32, registers not a multiple of 8, shared memory just past a
# multiple of 128), the sub-partitions (200 registers: 2 warps each, not 10 warps an SM)
OCCUPANCY_CASES = ((256, 32, 0), (1024, 32, 0), (96, 16, 0), (33, 32, 0), (32, 16, 0),
                   (256, 64, 0), (256, 72, 0), (256, 128, 0), (128, 200, 0), (256, 200, 0),
                   (64, 255, 0), (128, 37, 0), (256, 32, 16384), (256, 32, 48 * 1024),
                   (128, 32, 100000), (64, 16, 5000), (64, 16, 7040), (64, 16, 7041),
                   (512, 40, 40000), (640, 48, 0), (1, 0, 0), (128, 0, 232448), (100, 16, 0),
                   (32, 200, 0), (64, 200, 0))


@exercise("04.occupancy", title="Occupancy, worked out by hand", stub=OCCUPANCY_STUB,
          answers=("blocks_per_sm",), section="Occupancy, worked out by hand", intro="""
Write `blocks_per_sm(threads, registers, shared)` for an H100 from the limits in the stub: the
blocks each resource allows, and the fewest of them. **Warps**: a block of 33 threads takes two
warps. **Registers**: a warp takes `registers × 32` rounded up to 256, from one of the 4
sub-partitions of 16384; count the warps one sub-partition holds, times 4. **Shared memory**:
each block takes its bytes plus the 1 KiB the driver keeps, rounded up to 128. **Slots**: 32
blocks. The check compares your function with `course_utils.occupancy` (itself checked against
CUDA's calculator, `cuda_occupancy.h`, by the tests) on 25 launches chosen so that each rule
decides at least one of them.""")
def check_occupancy(blocks_per_sm, report) -> None:
    from course_utils import occupancy

    expect(callable(blocks_per_sm), f"blocks_per_sm is a {type(blocks_per_sm).__name__}, not a "
           "function", "def blocks_per_sm(threads, registers, shared): ...")
    names = set(getattr(getattr(blocks_per_sm, "__code__", None), "co_names", ()))
    expect(not names & {"occupancy", "limits_of", "cudaOccupancyMaxActiveBlocksPerMultiprocessor"},
           "blocks_per_sm calls a calculator instead of applying the rules", "work out each "
           "limit from the constants of the stub: warps, registers, shared memory, block slots")
    for threads, registers, shared in OCCUPANCY_CASES:
        got = blocks_per_sm(threads, registers, shared)
        limits = occupancy.limits_of(threads, registers, shared)
        want = min(limits.values())
        binding = [name for name, blocks in limits.items() if blocks == want]
        expect(got == want, f"{threads} threads, {registers} registers a thread, {shared} bytes "
               f"of shared memory: you say {got} blocks per SM, the calculator {want}",
               f"here {' and '.join(binding)} decide: " + ", ".join(
                   f"{name} allow {blocks}" for name, blocks in limits.items()))
    report.line(f"matches CUDA's occupancy rules on {len(OCCUPANCY_CASES)} launches (warps, "
                "registers by sub-partition, shared memory with the reserved KiB, block slots)")
