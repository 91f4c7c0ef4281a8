"""RMSNorm written with PyTorch operations, ``torch.compile``'d.

The eager reference (``kernels/rmsnorm/__init__.py``) is six ATen ops in float32: square, mean
over the row, add eps, rsqrt, multiply by that, multiply by the weight; nine in bfloat16, with
the casts of x and the weight to float32 and of y back (``count_kernels`` counts them). Each is a
kernel and a trip to DRAM. ``torch.compile`` fuses the forward into one generated kernel that
keeps a row on chip, and AOT autograd compiles the backward as well: the generated peer of the
hand-written Triton kernels.
"""

import torch

from kernels.compiled import compile_on_first_call
from kernels.registry import register
from kernels.rmsnorm.op import EPS, FLOAT_DTYPES, rmsnorm_eager

_compiled = compile_on_first_call(rmsnorm_eager)  # (why lazily: see the function)


@register("rmsnorm", "compile", dtypes=FLOAT_DTYPES, needs=("compile",))
def rmsnorm_compiled(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """torch.compile of the eager version: one fused kernel forward."""
    return _compiled(x, weight, eps)
