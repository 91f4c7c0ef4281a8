"""The histogram op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.int32,)


def _validate(x, bins) -> None:
    expect_tensor("histogram", "x", x, ndim=1)
    if x.dtype != torch.int32:
        raise ValueError(f"histogram: x expected an int32 tensor, got {x.dtype}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"histogram: bins expected an int >= 1, got {bins!r}")


def uniform(n: int, bins: int, device: str) -> torch.Tensor:
    """n values drawn uniformly from [0, bins): every bin about as busy as the others."""
    return torch.randint(0, bins, (n,), device=device, dtype=torch.int32)


def skewed(n: int, bins: int, device: str, share: float = 0.9) -> torch.Tensor:
    """n values of which ``share`` fall in bin 0 and the rest uniformly in [0, bins): one bin
    takes most of the atomics (contention)."""
    x = uniform(n, bins, device)
    x[torch.rand(n, device=device) < share] = 0
    return x


def _case(n, bins, make=uniform):
    return lambda dtype, device: (make(n, bins, device).to(dtype), bins)


def _out_of_range(dtype, device):
    return (torch.randint(-20, 60, (3001,), device=device, dtype=dtype), 37)


def _strided(dtype, device):
    return (uniform(2 * 999, 16, device).to(dtype)[::2], 16)


define_op(
    "histogram",
    arg_names=("x", "bins"),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    typed_args=("x",),
    cases=(
        Case("uniform 1M, 256 bins", _case(1 << 20, 256)),
        Case("skewed 1M, 256 bins", _case(1 << 20, 256, skewed)),
        Case("odd 1001, 7 bins", _case(1001, 7)),
        Case("one element", _case(1, 5)),
        Case("empty", _case(0, 8)),
        Case("one bin", _case(4099, 1)),
        Case("4096 bins", _case(70001, 4096)),
        Case("values outside [0, bins) ignored", _out_of_range),
        Case("strided view", _strided),
    ),
    tolerance={torch.int32: (0, 0)},  # counts: exact
    description="counts of each value of x in [0, bins), int32",
)


@register("histogram", "eager", dtypes=DTYPES)
def histogram_eager(x: torch.Tensor, bins: int) -> torch.Tensor:
    """torch.bincount of the values in [0, bins): the reference."""
    kept = x[(x >= 0) & (x < bins)]
    return torch.bincount(kept.long(), minlength=bins).to(torch.int32)
