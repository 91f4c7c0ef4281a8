"""Lesson 21's kernels and its exercise's check beyond tests/test_exercises.py: the scans agree
with torch.cumsum where the kernel matrix does not look (the CUDA scan on the CPU runner, across
look-back windows; int32 bit for bit), malformed problems are refused by name, the block scan's
problems name each mistake they are built to catch, and correct answers written differently
pass."""

import pytest
import torch

import exercises
from exercises import Mismatch
from exercises import patterns_scan_cases as cases
from exercises.solutions import patterns as solutions
from kernels.registry import get_kernel
from kernels.scan import nvrtc, triton_scan

ID = "patterns.block_scan"


def test_the_cuda_scan_on_the_cpu_runner_matches_cumsum():
    # one element per thread: 70 tiles of 256 in a row, so the look-back walks many tiles;
    # int32, so bit for bit (the notebook runs float32 on the CPU runner, the GPU both)
    x = torch.randint(-8, 9, (2, 70 * 256 + 3), dtype=torch.int32)
    assert torch.equal(nvrtc.scan_on_cpu(x, items=1), torch.cumsum(x, -1, dtype=torch.int32))


def test_the_triton_scan_carries_across_two_levels_of_tiles(monkeypatch):
    # tiles of 16: 773 columns are 49 tiles, whose sums are 4 tiles, whose sums are one
    monkeypatch.setattr(triton_scan, "TILE", 16)
    x = torch.randint(-8, 9, (2, 773), dtype=torch.int32)
    assert torch.equal(triton_scan.scan_rows(x), torch.cumsum(x, -1, dtype=torch.int32))


@pytest.mark.parametrize(("x", "says"), [
    (torch.zeros(2, 3, 4), "1-D or 2-D"),
    (torch.zeros(5, dtype=torch.float64), "float32 or int32"),
    ([1.0, 2.0], "torch.Tensor"),
])
def test_a_malformed_problem_is_refused_by_name(x, says):
    with pytest.raises(ValueError, match=says):
        get_kernel("scan", "eager").supports(x)


def test_items_per_thread_is_checked():
    with pytest.raises(ValueError, match="items expected one of"):
        nvrtc.defines(torch.float32, items=3)


@pytest.mark.parametrize("name", ["exclusive", "per_warp", "whole_array", "own_warp_twice"])
def test_each_known_mistake_is_named(name):
    x = cases.integers(3 * cases.BLOCK + 77, seed=1)
    wrong = {"exclusive": cases._exclusive, "per_warp": cases._per_warp,
             "whole_array": cases._whole_array, "own_warp_twice": cases._own_warp_twice}[name]
    with pytest.raises(Mismatch) as caught:
        cases.judge("n=845", x, wrong(x).float(), exact=True)
    said = {"exclusive": "exclusive scan", "per_warp": "each warp scanned its own",
            "whole_array": "scan of the whole array", "own_warp_twice": "its own total too"}
    assert said[name] in caught.value.message


def test_the_float_case_takes_any_order_and_rejects_fewer_bits():
    label, x, exact = cases.cases()[-1]
    assert not exact
    in_float32 = cases.tiles(x).float().cumsum(1).flatten()[:x.numel()]  # a loop's order
    cases.judge(label, x, in_float32, exact=False)
    with pytest.raises(Mismatch, match="more than any order"):
        cases.judge(label, x, cases.reference(x).half().float(), exact=False)


@pytest.mark.parametrize("label", sorted(solutions.ALTERNATIVES[ID]))
def test_a_correct_answer_written_differently_passes(label):
    names = exercises.load_cell(solutions.ALTERNATIVES[ID][label], f"alternative_{ID}")
    result = exercises.run_check(ID, names["BLOCK_SCAN_SOURCE"])
    assert result.passed, str(result)


def test_on_a_gpu_the_cpu_runner_names_a_lane_that_left_before_a_shuffle():
    # an H100 runs this wrong answer to the right values (seen); the check's pass on the CPU
    # runner, which it makes on a GPU too, must still refuse it
    from exercises import patterns

    wrong = solutions.WRONG[ID]["tail threads leave early"]
    source = exercises.load_cell(wrong, f"wrong_{ID}")["BLOCK_SCAN_SOURCE"]
    with pytest.raises(Mismatch, match="on the CPU runner, n=1.*already exited"):
        patterns._on_the_cpu_runner_too(source, exercises.Report())
