"""The check of exercise nvrtc.tiled_matmul beyond tests/test_exercises.py: correct answers
written differently pass, a wrong C is read against the mistake that makes it, and the problems
refuse sizes that are not matrices."""

import pytest
import torch

import exercises
from exercises import Mismatch
from exercises.solutions import tiled_matmul
from exercises.tiled_matmul_problems import GARBAGE, Problem, diagnose

ID = "nvrtc.tiled_matmul"


def _run(source: str, label: str) -> exercises.Result:
    names = exercises.load_cell(source, f"{label}_{ID}")
    return exercises.run_check(ID, names["MATMUL_SOURCE"])


@pytest.mark.parametrize("label", sorted(tiled_matmul.ALTERNATIVES[ID]))
def test_a_correct_answer_written_differently_passes(label):
    result = _run(tiled_matmul.ALTERNATIVES[ID][label], "alternative")
    assert result.passed, str(result)


def test_the_stub_is_not_attempted():
    names = exercises.load_cell(exercises.get(ID).stub, f"stub_{ID}")
    assert exercises.run_check(ID, names["MATMUL_SOURCE"]).status == "not attempted"


def test_pytorch_in_place_of_a_kernel_is_not_yet():
    result = exercises.run_check(ID, "C = A @ B")
    assert result.status == "not yet" and "no __global__ function" in str(result), str(result)


PROBLEM = Problem(70, 33, 21, "a test")


def _ab():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(PROBLEM.m, PROBLEM.k, generator=g),
            torch.randn(PROBLEM.k, PROBLEM.n, generator=g))


@pytest.mark.parametrize(("wrong", "says"), [
    pytest.param(lambda a, b: a @ b + GARBAGE, "adds into C", id="accumulated"),
    pytest.param(lambda a, b: a[:, :16] @ b[:16], "the last partial step of K", id="k-tail"),
    pytest.param(lambda a, b: (a @ b).t().reshape(PROBLEM.m, PROBLEM.n), "swapped", id="swapped"),
    pytest.param(lambda a, b: torch.where(torch.arange(PROBLEM.n) < 32, a @ b, GARBAGE),
                 "never written", id="last-column-unwritten"),
    pytest.param(lambda a, b: a @ b * 1.01, "elements differ", id="off"),
])
def test_a_wrong_c_is_named(wrong, says):
    a, b = _ab()
    with pytest.raises(Mismatch) as raised:
        diagnose(PROBLEM, wrong(a, b).contiguous(), a, b)
    assert says in raised.value.message, raised.value.message


def test_a_right_c_passes_in_float32():
    a, b = _ab()
    diagnose(PROBLEM, a @ b, a, b)  # float32 rounding is within the bound


@pytest.mark.parametrize(("sizes", "names"), [((-1, 2, 3), "m"), ((2, 2.5, 3), "n"),
                                              ((1, 1, -4), "k")])
def test_a_problem_refuses_what_is_not_a_size(sizes, names):
    with pytest.raises(ValueError, match=f"^{names} expected"):
        Problem(*sizes, "bad")
