"""The softmax op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import torch

from kernels.registry import Case, define_op, expect_tensor, register

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _validate(x) -> None:
    expect_tensor("softmax", "x", x, ndim=2, floating=True)


def _randn(rows, cols, scale=1.0):
    return lambda dtype, device: ((scale * torch.randn(rows, cols, device=device)).to(dtype),)


def _non_contiguous(dtype, device):
    return (torch.randn(130, 96, device=device).to(dtype).t(),)


define_op(
    "softmax",
    arg_names=("x",),
    validate=_validate,
    reference="eager",
    dtypes=FLOAT_DTYPES,
    cases=(
        Case("256x1024", _randn(256, 1024)),
        Case("odd 37x781", _randn(37, 781)),
        Case("one column", _randn(5, 1)),
        Case("empty rows", _randn(0, 64)),
        Case("non-contiguous", _non_contiguous),
        Case("large values", _randn(16, 300, scale=1e3)),
        Case("long rows 3x5000", _randn(3, 5000)),
    ),
    tolerance={torch.float32: (1e-6, 1e-5), torch.float16: (1e-3, 1e-2),
               torch.bfloat16: (4e-3, 2e-2)},
    description="row softmax of a 2-D tensor",
)


@register("softmax", "eager", dtypes=FLOAT_DTYPES)
def softmax_eager(x: torch.Tensor) -> torch.Tensor:
    """torch.softmax(x, dim=-1): the reference."""
    return torch.softmax(x, dim=-1)
