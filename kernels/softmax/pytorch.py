"""Softmax written with PyTorch operations: by hand (several passes) and torch.compile'd.

The hand-written version reads the input three times and writes/reads two intermediates:
max over the row, subtract, exp, sum over the row, divide: five kernels, each a trip to DRAM.
``torch.compile`` fuses them into one generated kernel that keeps a row on chip.
"""

import torch

from kernels.compiled import compile_on_first_call
from kernels.registry import register
from kernels.softmax.op import FLOAT_DTYPES


@register("softmax", "manual", dtypes=FLOAT_DTYPES)
def softmax_manual(x: torch.Tensor) -> torch.Tensor:
    """PyTorch ops by hand: max, subtract, exp, sum, divide (five kernels)."""
    if x.shape[-1] == 0:  # amax has nothing to reduce over; softmax of no columns is empty
        return torch.empty_like(x)
    row_max = x.amax(dim=-1, keepdim=True)  # pass 1: read x
    shifted = torch.exp(x - row_max)  # passes 2-3: read x, write and read the difference
    return shifted / shifted.sum(dim=-1, keepdim=True)  # passes 4-5: read exp twice


_compiled = compile_on_first_call(softmax_manual)  # (why lazily: see the function)


@register("softmax", "compile", dtypes=FLOAT_DTYPES, needs=("compile",))
def softmax_compiled(x: torch.Tensor) -> torch.Tensor:
    """torch.compile of the hand-written version: one fused kernel."""
    return _compiled(x)
