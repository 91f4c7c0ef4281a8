"""The GeLU op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import torch
import torch.nn.functional as F

from kernels.registry import Case, define_op, expect_tensor, register

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _validate(x) -> None:
    expect_tensor("gelu", "x", x, floating=True)


def _randn(*shape):
    return lambda dtype, device: (torch.randn(*shape, device=device).to(dtype),)


def _non_contiguous(dtype, device):
    return (torch.randn(64, 130, device=device).to(dtype)[:, ::2],)


def _large(dtype, device):
    # |x| up to 1e4: a naive tanh form overflows exp() and returns NaN here
    x = torch.linspace(-1e4, 1e4, 4099, device=device)
    return (torch.cat([x, torch.tensor([-60.0, -20.0, 20.0, 60.0], device=device)]).to(dtype),)


define_op(
    "gelu",
    arg_names=("x",),
    validate=_validate,
    reference="eager",
    dtypes=FLOAT_DTYPES,
    cases=(
        Case("1M", _randn(1 << 20)),
        Case("odd 1027", _randn(1027)),
        Case("2-D 33x77", _randn(33, 77)),
        Case("empty", _randn(0)),
        Case("one element", _randn(1)),
        Case("non-contiguous", _non_contiguous),
        Case("large |x|", _large),
    ),
    description="GeLU with the tanh approximation, elementwise",
)


@register("gelu", "eager", dtypes=FLOAT_DTYPES)
def gelu_eager(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's F.gelu(approximate="tanh"): the reference."""
    return F.gelu(x, approximate="tanh")
