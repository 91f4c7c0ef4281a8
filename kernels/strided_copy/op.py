"""The strided copy op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.bfloat16)


def _validate(x, stride) -> None:
    expect_tensor("strided_copy", "x", x, ndim=1)
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"strided_copy: stride expected an int >= 1, got {stride!r}")
    if x.numel() % stride:
        raise ValueError(f"strided_copy: x expected a length divisible by stride={stride}, "
                         f"got {x.numel()}")


def _case(n, stride):
    return lambda dtype, device: (torch.randn(n, device=device).to(dtype), stride)


def _strided_view(dtype, device):
    return (torch.randn(2 * 96, device=device).to(dtype)[::2], 4)


define_op(
    "strided_copy",
    arg_names=("x", "stride"),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("64K stride 1", _case(1 << 16, 1)),
        Case("64K stride 32", _case(1 << 16, 32)),
        Case("odd 3x1001 stride 3", _case(3 * 1001, 3)),
        Case("stride = n", _case(37, 37)),
        Case("empty", _case(0, 8)),
        Case("strided view", _strided_view),
    ),
    tolerance={dtype: (0.0, 0.0) for dtype in DTYPES},  # a copy: bit for bit
    description="y = x.view(-1, stride).t().flatten(): a copy whose reads are stride apart",
)


@register("strided_copy", "eager", dtypes=DTYPES)
def strided_copy_eager(x: torch.Tensor, stride: int) -> torch.Tensor:
    """PyTorch: the transposed view, copied (clone: a copy even when stride is 1)."""
    return x.reshape(-1, stride).t().clone(memory_format=torch.contiguous_format).view(-1)
