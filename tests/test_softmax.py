"""Softmax kernels beyond the matrix test: rows sum to one, the Triton kernel's limits,
kernel counts on a GPU."""

import pytest
import torch

import kernels
from course_utils import env
from kernels.softmax import triton_softmax


def test_rows_sum_to_one_and_are_non_negative():
    x = 30 * torch.randn(7, 2049, device=env.DEFAULT_DEVICE)
    for kernel in kernels.get_kernels("softmax", x):
        y = kernel(x)
        assert (y >= 0).all(), kernel.name
        torch.testing.assert_close(y.sum(-1), torch.ones(7, device=x.device),
                                   msg=lambda m, k=kernel.name: k + m)


def test_softmax_rejects_a_1d_input_naming_it():
    with pytest.raises(ValueError, match="x expected a 2-D tensor, got shape"):
        kernels.get_kernel("softmax", "triton")(torch.randn(10))


def test_triton_softmax_says_why_a_very_long_row_does_not_fit():
    x = torch.empty(1, triton_softmax.MAX_COLUMNS + 1, device=env.DEFAULT_DEVICE)
    reason = kernels.get_kernel("softmax", "triton").supports(x)
    assert reason is not None and "columns" in reason


def test_num_warps_grow_with_the_row():
    warps = [triton_softmax.num_warps_for(1 << k) for k in range(5, 16)]
    assert warps == sorted(warps) and warps[0] >= 1 and warps[-1] <= 32


@pytest.mark.gpu
@pytest.mark.parametrize("provider", ["triton", "compile", "eager"])
def test_fused_softmax_launches_exactly_one_kernel(provider):
    from course_utils.profiling import count_kernels

    x = torch.randn(512, 4096, device="cuda")
    counts = count_kernels(kernels.get_kernel("softmax", provider), x)
    assert sum(counts.values()) == 1, counts


@pytest.mark.gpu
def test_manual_softmax_makes_several_passes():
    from course_utils.profiling import count_kernels

    x = torch.randn(512, 4096, device="cuda")
    assert sum(count_kernels(kernels.get_kernel("softmax", "manual"), x).values()) >= 4
