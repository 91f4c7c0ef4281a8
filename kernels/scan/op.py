"""The scan op itself: an inclusive prefix sum along the last dimension of a 1-D or 2-D
contiguous tensor, ``y[..., i] = x[..., 0] + ... + x[..., i]``, in float32 or int32 (the dtype
of ``x``, which is also y's: an int32 scan wraps around as C's does, no widening to int64).

Its definition in the registry (arguments, validation, test cases, tolerances) and the eager
reference, ``torch.cumsum``; the providers beside it import what they share from here.
"""

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.int32)


def _validate(x) -> None:
    expect_tensor("scan", "x", x)
    if x.dim() not in (1, 2):
        raise ValueError(f"scan: x expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise ValueError(f"scan: x expected float32 or int32, got {str(x.dtype)[6:]}")


def _values(shape, dtype, device, scale=1.0, shift=0.0):
    """Random values of ``dtype``: normal floats, or small integers (their sums are exact in
    any order, so an int32 scan must match bit for bit)."""
    if dtype.is_floating_point:
        return (shift + scale * torch.randn(*shape, device=device)).to(dtype)
    return torch.randint(-8, 9, shape, device=device, dtype=dtype)


def _case(*shape, scale=1.0, shift=0.0):
    return lambda dtype, device: (_values(shape, dtype, device, scale, shift),)


def _rows_of_a_wider_matrix(dtype, device):
    """Rows whose stride is not their length (a column slice): not contiguous, so the kernels
    that index one row-major block refuse it with a reason (``contiguous=True``)."""
    return (_values((6, 300), dtype, device)[:, :257],)


define_op(
    "scan",
    arg_names=("x",),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("one element", _case(1)),
        Case("31", _case(31)),
        Case("1024 (a power of two)", _case(1024)),
        Case("4097 (one past a tile)", _case(4097)),
        Case("several tiles and a ragged tail: 50001", _case(50001)),
        Case("empty", _case(0)),
        Case("rows 7x1000", _case(7, 1000)),
        Case("one column 5x1", _case(5, 1)),
        Case("empty rows 0x64", _case(0, 64)),
        Case("rows of 4095 and 4097: 3x4097", _case(3, 4097)),
        Case("negative values (shifted by -200)", _case(3000, shift=-200.0)),
        Case("a column slice (not contiguous)", _rows_of_a_wider_matrix),
    ),
    # float32 sums in another order: the error of a running sum grows with its length and its
    # magnitude (a scan of 50001 normal values ends near +-220, of shifted ones near -6e5)
    tolerance={torch.float32: (2e-2, 1e-5), torch.int32: (0, 0)},
    description="inclusive prefix sum along the last dim, float32 or int32",
)


@register("scan", "eager", dtypes=DTYPES)
def scan_eager(x: torch.Tensor) -> torch.Tensor:
    """torch.cumsum(x, -1) in x's own dtype (int32 stays int32): the reference."""
    return torch.cumsum(x, dim=-1, dtype=x.dtype)
