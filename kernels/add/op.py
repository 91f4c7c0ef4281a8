"""The add op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate_args(a, b) -> None:
    expect_tensor("add", "a", a)
    expect_tensor("add", "b", b)
    if a.shape != b.shape:
        raise ValueError(f"add: b expected the shape of a {tuple(a.shape)}, got {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"add: b expected the dtype of a ({a.dtype}), got {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"add: b expected the device of a ({a.device}), got {b.device}")


def _pair(*shape):
    return lambda dtype, device: tuple(torch.randn(*shape, device=device).to(dtype)
                                       for _ in range(2))


def _non_contiguous(dtype, device):
    a = torch.randn(40, 66, device=device).to(dtype)
    return a[:, ::2], torch.randn(40, 33, device=device).to(dtype)


define_op(
    "add",
    arg_names=("a", "b"),
    validate=validate_args,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("1M", _pair(1 << 20)),
        Case("odd 1001", _pair(1001)),
        Case("empty", _pair(0)),
        Case("non-contiguous", _non_contiguous),
    ),
    tolerance={torch.float16: (0, 0), torch.bfloat16: (0, 0), torch.float32: (0, 0)},
    description="a + b, elementwise",
)


@register("add", "eager", dtypes=DTYPES)
def add_eager(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b: the reference."""
    return a + b
