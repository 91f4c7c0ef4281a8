"""The matmul op itself, apart from its kernels: its arguments and their checks, the cases
every registered kernel is tested on, the tolerance, and the reference (``torch.matmul``).
Every provider imports from here, and the package re-exports it."""


import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# float64 for lesson 11's FP64 GEMMs, which the matrix test checks against the reference
DTYPES += (torch.float64,)


def _is_fp8(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and dtype.itemsize == 1


def validate_args(a, b) -> None:
    expect_tensor("matmul", "a", a, ndim=2)
    expect_tensor("matmul", "b", b, ndim=2)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: b expected {a.shape[1]} rows to match a's columns, "
                         f"got b of shape {tuple(b.shape)} for a of shape {tuple(a.shape)}")
    if a.dtype != b.dtype and not (_is_fp8(a.dtype) and _is_fp8(b.dtype)):
        # the one mixed case tensor cores support: fp8 e4m3 x e5m2 (lesson 07)
        raise ValueError(f"matmul: b expected the dtype of a ({a.dtype}), got {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"matmul: b expected the device of a ({a.device}), got {b.device}")


def _pair(m, n, k):
    # scaled so that the sum of k products stays O(1) in every dtype
    return lambda dtype, device: (
        (torch.randn(m, k, device=device) / k**0.25).to(dtype),
        (torch.randn(k, n, device=device) / k**0.25).to(dtype))


def _pair_bt(m, n, k):
    # b column-major ([K, N] with b.t() contiguous, K-major): the layout lesson 07's kernels take
    return lambda dtype, device: (
        (torch.randn(m, k, device=device) / k**0.25).to(dtype),
        (torch.randn(n, k, device=device) / k**0.25).to(dtype).t())


def _transposed(dtype, device):
    a, b = _pair(48, 80, 64)(dtype, device)
    return a.t().contiguous().t(), b.t().contiguous().t()


define_op(
    "matmul",
    arg_names=("a", "b"),
    validate=validate_args,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("128x128x128", _pair(128, 128, 128)),
        Case("odd 33x65x17", _pair(33, 65, 17)),
        Case("tall 1000x8x24", _pair(1000, 8, 24)),
        Case("empty k=0", _pair(16, 16, 0)),
        Case("column-major inputs", _transposed),
        Case("b column-major 128x96x64", _pair_bt(128, 96, 64)),
        Case("b column-major odd 33x65x40", _pair_bt(33, 65, 40)),
        Case("b column-major tiny 1x1x16", _pair_bt(1, 1, 16)),
    ),
    # low-precision kernels may accumulate in a different order (or in fp32 vs fp16)
    tolerance={torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2),
               torch.bfloat16: (5e-2, 5e-2)},
    description="2-D matrix multiply",
)


@register("matmul", "eager", dtypes=DTYPES)
def matmul_eager(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul: the reference (cuBLAS on a GPU)."""
    return a @ b
