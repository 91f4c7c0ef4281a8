"""The ``mma.sync`` instruction ceiling: how many TFLOP/s (TOP/s) one variant's instruction
reaches on this GPU with operands already in registers (``mma_ceiling`` in ``mma.cu``).

This, not the datasheet, is the fair ceiling for an Ampere-style kernel on a Hopper GPU: cuBLAS
there uses ``wgmma``, a different instruction with a higher peak. The benchmark measures it in
the same process as the matmul, so every figure has its ceiling beside it.
"""

from __future__ import annotations

import torch

from course_utils import env, timing
from kernels.matmul import mma

THREADS = 256  # 8 warps per block
BLOCKS_PER_SM = 2  # 16 warps per SM: 4 per scheduler, each with 16 independent chains


def mma_ceiling(v: str | mma.Variant, iterations: int = 256) -> float:
    """Measured TFLOP/s (TOP/s for integers) of the variant's instruction on this GPU.

    Where this GPU runs the instruction natively, the faster of two loops: operands fixed (the
    instruction alone) and operands changed every iteration (a few integer ops beside it).
    Where it is emulated, only the second: with fixed operands the compiler moves the emulation's
    conversions out of the loop, and the rate would be one no matmul can reach.
    """
    v = mma.variant(v)
    if reason := mma.gpu_reason(v, torch.cuda.get_device_capability()):
        raise ValueError(f"mma_ceiling: {reason}")
    loops = [True] if mma.native_sass(v, env.device_info().arch) is None else [True, False]
    blocks = torch.cuda.get_device_properties(0).multi_processor_count * BLOCKS_PER_SM
    out = torch.empty(blocks * THREADS, dtype=torch.int32, device="cuda")
    chains = 16  # CEIL_A x CEIL_B in mma.cu
    flop = blocks * (THREADS // 32) * chains * iterations * v.flop_per_mma
    rates = []
    for vary in loops:
        launch = mma.nvrtc.load(mma.compile_mma(v, name="mma_ceiling", vary_operands=vary))
        t = timing.benchmark(lambda k=launch: k(out, iterations, grid=blocks, block=THREADS),
                             device="cuda", name=f"mma_ceiling[{v.name}]")
        rates.append(timing.tflops(flop, t.median))
    return max(rates)
