"""The strided copy beyond the matrix test: validation, the reference's meaning, the sector
model, what the kernel compiles to, and its stride limit."""

import pytest
import torch

import kernels
from course_utils import requirements
from kernels.strided_copy import bench
from kernels.strided_copy import nvrtc as strided_nvrtc


@pytest.mark.parametrize(("x", "stride", "says"), [
    (torch.randn(12), 0, "stride expected an int >= 1, got 0"),
    (torch.randn(12), True, "stride expected an int >= 1, got True"),
    (torch.randn(12), 5, "x expected a length divisible by stride=5, got 12"),
    (torch.randn(3, 4), 2, "x expected a 1-D tensor"),
])
def test_malformed_problems_name_the_argument(x, stride, says):
    with pytest.raises(ValueError, match=says):
        kernels.get_kernel("strided_copy", "eager")(x, stride)


def test_output_element_i_reads_input_element_i_mod_m_times_stride_plus_i_div_m():
    x, stride = torch.arange(24.0), 4
    m = x.numel() // stride
    y = kernels.get_kernel("strided_copy", "eager")(x, stride)
    assert y.tolist() == [x[(i % m) * stride + i // m].item() for i in range(24)]


def test_stride_one_is_a_copy_not_an_alias():
    x = torch.randn(8)
    y = kernels.get_kernel("strided_copy", "eager")(x, 1)
    assert torch.equal(x, y) and y.data_ptr() != x.data_ptr()


def test_sector_model():
    assert bench.sector_model(1) == 1.0
    assert bench.sector_model(2) == pytest.approx(2 / 3)
    assert bench.sector_model(8) == bench.sector_model(64) == pytest.approx(2 / 9)
    assert bench.sector_model(8, element_size=2) == pytest.approx(2 / 9)
    with pytest.raises(ValueError, match="stride and element_size expected >= 1"):
        bench.sector_model(0)


def test_the_kernel_reads_and_writes_global_memory_only():
    from course_utils import sass

    if reason := requirements.unmet("nvrtc", "disasm"):
        pytest.skip("; ".join(reason))
    report = sass.report(strided_nvrtc.compile_strided_copy(arch="sm_90", verbose=False))
    assert report.count("LDG") == 1 and report.count("STG") == 1
    assert report.count("LDS", "STS", "BAR", "LDL", "STL") == 0


def test_a_stride_past_the_grid_limit_is_a_reason():
    kernel = kernels.get_kernel("strided_copy", "nvrtc")
    stride = strided_nvrtc.MAX_STRIDE + 1
    assert "at most 65535" in strided_nvrtc._check(torch.empty(stride), stride)
    assert kernel.supports(torch.empty(stride), stride)  # (no GPU here: that reason first)


@pytest.mark.gpu
def test_every_stride_of_the_sweep_on_the_gpu():
    kernel = kernels.get_kernel("strided_copy", "nvrtc")
    for stride in bench.STRIDES:
        kernels.verify(kernel, torch.randn(4099 * stride, device="cuda"), stride)
