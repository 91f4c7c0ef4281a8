"""course_utils.clocks: what nvidia-smi's samples become, and a clear refusal without a GPU."""

import pytest
import torch

from course_utils import clocks


def test_samples_parse_and_unreported_fields_are_dropped():
    rows = clocks._parse(["1361, 697.12, 700.00, 1980", "[N/A], 650.0, 700.0, 1980", "",
                          "1400, 690.5, 700.0, 1980"])
    assert rows == [(1361.0, 697.12, 700.0, 1980.0), (1400.0, 690.5, 700.0, 1980.0)]


def test_a_load_says_whether_power_set_the_clock():
    capped = clocks.Load(sm_mhz=1361, max_sm_mhz=1980, watts=697, power_limit_w=700, samples=14)
    free = clocks.Load(sm_mhz=1700, max_sm_mhz=1980, watts=600, power_limit_w=700, samples=14)
    assert capped.at_power_limit and not free.at_power_limit
    assert str(capped) == "SM clock 1361 MHz (max 1980), 697 W of a 700 W limit, 14 samples"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_without_a_gpu_it_refuses_with_the_reason():
    assert clocks.unavailable_reason() == "needs a CUDA GPU"
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        clocks.under_load(lambda: None)


@pytest.mark.gpu
def test_under_load_samples_a_busy_gpu():
    if clocks.unavailable_reason():
        pytest.skip(clocks.unavailable_reason())
    a = torch.randn(2048, 2048, device="cuda")
    load = clocks.under_load(lambda: a @ a, seconds=1.0)
    assert load.samples >= 1 and 0 < load.sm_mhz <= load.max_sm_mhz * 1.01
    assert 0 < load.watts and load.power_limit_w > 0
    with pytest.raises(ValueError, match="seconds"):
        clocks.under_load(lambda: None, seconds=0)
