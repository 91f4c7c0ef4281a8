"""The rmsnorm op itself: its definition in the registry (arguments, validation, test cases,
tolerances) and its reference; the providers beside it import what they share from here, and
the package imports them after it (see the package's docstring)."""

import math

import torch

from kernels.registry import Case, define_op, expect_tensor, register

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # what the matrix test tries
# float64 too for the reference and the Triton kernels: gradcheck needs double precision
KERNEL_DTYPES = (*FLOAT_DTYPES, torch.float64)
EPS = 1e-6  # Llama's


def _validate(x, weight, eps=EPS) -> None:
    expect_tensor("rmsnorm", "x", x, ndim=2, floating=True)
    expect_tensor("rmsnorm", "weight", weight, ndim=1, floating=True)
    if weight.shape[0] != x.shape[1]:
        raise ValueError(f"rmsnorm: weight expected length {x.shape[1]} (x's last dim), "
                         f"got length {weight.shape[0]}")
    if weight.dtype != x.dtype:
        raise ValueError(f"rmsnorm: weight expected x's dtype {str(x.dtype)[6:]}, "
                         f"got {str(weight.dtype)[6:]}")
    if weight.device != x.device:
        raise ValueError(f"rmsnorm: weight expected x's device {x.device}, got {weight.device}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps < math.inf:
        raise ValueError(f"rmsnorm: eps expected a finite number >= 0, got {eps!r}")


# -- the op's test problems: fresh random (x, weight) in a dtype on a device --------------------


def _randn(rows, cols, scale=1.0):
    def make(dtype, device):
        x = (scale * torch.randn(rows, cols, device=device)).to(dtype)
        return x, torch.randn(cols, device=device).to(dtype)

    return make


def _non_contiguous_x(dtype, device):
    # a transposed view: the row stride is 1 and the column stride 96
    x = torch.randn(130, 96, device=device).to(dtype).t()
    return x, torch.randn(130, device=device).to(dtype)


def _strided_weight(dtype, device):
    # every other element of a longer vector: the weight's stride is 2
    x = torch.randn(9, 37, device=device).to(dtype)
    return x, torch.randn(74, device=device).to(dtype)[::2]


define_op(
    "rmsnorm",
    arg_names=("x", "weight", "eps"),
    validate=_validate,
    reference="eager",
    dtypes=FLOAT_DTYPES,
    cases=(
        Case("256x1024", _randn(256, 1024)),
        Case("odd 37x781", _randn(37, 781)),
        Case("one column", _randn(5, 1)),
        Case("empty rows", _randn(0, 64)),
        Case("non-contiguous x", _non_contiguous_x),
        Case("strided weight", _strided_weight),
        Case("large values", _randn(16, 300, scale=1e3)),
        # mean(x²) ≈ 1e-6 = eps: a kernel that forgets eps, or adds it twice, is off by ~2x
        Case("tiny values", _randn(16, 300, scale=1e-3)),
        Case("long rows 3x5000", _randn(3, 5000)),
    ),
    # y is O(|weight|): one rounding of the output, plus fp32 sums taken in another order
    tolerance={torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 4e-3),
               torch.bfloat16: (1.6e-2, 1.6e-2)},
    description="RMSNorm of each row of a 2-D tensor, times a weight per column",
)


@register("rmsnorm", "eager", dtypes=KERNEL_DTYPES)
def rmsnorm_eager(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """PyTorch ops, statistics in float32 (float64 for float64): the reference."""
    acc = torch.promote_types(x.dtype, torch.float32)  # half types -> float32, float64 stays
    xf = x.to(acc)
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)  # 1 / RMS, one per row
    return (xf * rstd * weight.to(acc)).to(x.dtype)  # rounded once, at the end
