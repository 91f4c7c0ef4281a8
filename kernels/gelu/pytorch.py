"""GeLU written with PyTorch operations: by hand (one kernel per operation) and torch.compile'd.

The hand-written version is the formula as you would type it: every ``*``, ``+`` and ``tanh``
is its own kernel, reading its inputs from and writing its result to DRAM. ``torch.compile``
traces the same function and fuses it into one generated kernel (Triton on a GPU, C++ on a CPU).
"""

import torch

from kernels.compiled import compile_on_first_call
from kernels.gelu.op import FLOAT_DTYPES
from kernels.registry import register

SQRT_2_OVER_PI = 0.7978845608028654
CUBIC = 0.044715


def _gelu_float32(x: torch.Tensor) -> torch.Tensor:
    # tanh saturates at +-1, and x*x*x overflowing to +-inf only drives it there: no NaN.
    inner = SQRT_2_OVER_PI * (x + CUBIC * (x * x * x))
    return 0.5 * x * (1.0 + torch.tanh(inner))


@register("gelu", "manual", dtypes=FLOAT_DTYPES)
def gelu_manual(x: torch.Tensor) -> torch.Tensor:
    """PyTorch ops by hand: one kernel per multiply, add and tanh."""
    if x.dtype == torch.float32:
        return _gelu_float32(x)
    # float16/bfloat16 in float32 (two more kernels), as the fused kernels do in registers
    return _gelu_float32(x.float()).to(x.dtype)


_compiled = compile_on_first_call(gelu_manual)


@register("gelu", "compile", dtypes=FLOAT_DTYPES, needs=("compile",))
def gelu_compiled(x: torch.Tensor) -> torch.Tensor:
    """torch.compile of the hand-written version: one fused kernel."""
    return _compiled(x)
