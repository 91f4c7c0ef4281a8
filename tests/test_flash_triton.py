"""The check of exercise attention_variants.flash_triton beyond tests/test_exercises.py (which runs
the solution, the stub and every wrong answer with the words its verdict must say): correct
answers written differently pass, an answer that does part of the work in PyTorch does not, a
forward written and a backward left is attempted, and the interpreter's program order is
shuffled, not the same every launch.

The alternatives run on three of the check's problems each (ragged, causal, strided and run
twice): the whole check takes about half a minute an answer in the interpreter."""

import pytest
import torch

import exercises
from course_utils import env
from exercises import attention_triton, attention_triton_checks
from exercises.solutions import attention_triton as solutions

ID = "attention_variants.flash_triton"
SOLUTION = solutions.SOLUTIONS[ID]


def _run(source: str, label: str) -> exercises.Result:
    names = exercises.load_cell(source, f"{label}_{ID}")
    return exercises.run_check(ID, names["TritonFlashAttention"])


def _some_problems(device="cpu"):
    every = attention_triton_checks.problems(device)
    picked = [case for case in every if (case.what, case.causal, case.dtype) in {
        ("ragged tiles, more queries than keys", False, torch.float32),
        ("ragged tiles", True, torch.float32),
        ("(B, S, H, D) strides for q, k and v", True, torch.float32)}]
    assert len(picked) == 3
    return picked


@pytest.mark.parametrize("label", sorted(solutions.ALTERNATIVES[ID]))
def test_a_correct_answer_written_differently_passes(label, monkeypatch):
    monkeypatch.setattr(attention_triton, "problems", _some_problems)
    result = _run(solutions.ALTERNATIVES[ID][label], "alternative")
    assert result.passed, str(result)


_SCORES_IN_PYTORCH = SOLUTION.replace(
    "        ctx.save_for_backward(q, k, v, out, lse)\n",
    "        s = q.float() @ k.float().mT / math.sqrt(d)  # the output in PyTorch after all\n"
    "        out = (torch.softmax(s, -1) @ v.float()).to(q.dtype)\n"
    "        ctx.save_for_backward(q, k, v, out, lse)\n")


def test_work_done_in_pytorch_beside_a_kernel_fails():
    assert _SCORES_IN_PYTORCH != SOLUTION
    result = _run(_SCORES_IN_PYTORCH, "gamed")
    assert result.status == "not yet" and "in PyTorch, outside your kernels" in str(result), \
        str(result)


def test_a_forward_written_and_a_backward_left_is_attempted():
    stub = exercises.get(ID).stub
    forward_only = stub.replace("        ...\n\n", "        return q\n\n", 1)
    assert forward_only != stub
    result = _run(forward_only, "half")
    assert result.status == "not yet", str(result)


@pytest.mark.skipif(not env.TRITON_INTERPRET, reason="compiled, a GPU picks its own order")
def test_the_interpreter_runs_each_launch_in_a_shuffled_order():
    import triton
    import triton.language as tl

    from exercises.attention_tiles_problems import watcher
    from exercises.attention_triton_watch import watched_launches

    @triton.jit
    def first_to_run(out_ptr, order_ptr):
        # each program takes the next ticket: the tickets are the order the programs ran in
        ticket = tl.atomic_add(order_ptr, 1)
        tl.store(out_ptr + ticket, tl.program_id(0))

    orders = []
    for seed in (1, 2):
        out, ticket = torch.zeros(16, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
        with watched_launches(watcher(), seed) as seen:
            first_to_run[(16,)](out, ticket)
        assert seen.launches["first_to_run"] == 1 and sorted(out.tolist()) == list(range(16))
        orders.append(out.tolist())
    assert orders[0] != list(range(16)) and orders[0] != orders[1]
