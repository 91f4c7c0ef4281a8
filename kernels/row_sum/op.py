"""The row sum op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _validate(x) -> None:
    expect_tensor("row_sum", "x", x, ndim=2, floating=True)


def _randn(rows, cols, scale=1.0):
    return lambda dtype, device: ((scale * torch.randn(rows, cols, device=device)).to(dtype),)


def _transposed(dtype, device):
    return (torch.randn(130, 96, device=device).to(dtype).t(),)


define_op(
    "row_sum",
    arg_names=("x",),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("256x1024", _randn(256, 1024)),
        Case("odd 37x781", _randn(37, 781)),
        Case("one column 5x1", _randn(5, 1)),
        Case("rows not a multiple of 8: 13x33", _randn(13, 33)),
        Case("empty rows 0x64", _randn(0, 64)),
        Case("empty columns 4x0", _randn(4, 0)),
        Case("transposed", _transposed),
        Case("long rows 3x70001", _randn(3, 70001)),
        Case("large values", _randn(16, 300, scale=1e3)),
    ),
    # the same float32 sums in another order: a few ulps of the row's magnitude apart
    tolerance={dtype: (1e-3, 1e-4) for dtype in DTYPES},
    description="row sums of a 2-D tensor, in float32",
)


@register("row_sum", "eager", dtypes=DTYPES)
def row_sum_eager(x: torch.Tensor) -> torch.Tensor:
    """torch.sum(x, -1) accumulated in float32: the reference."""
    return torch.sum(x, dim=-1, dtype=torch.float32)
