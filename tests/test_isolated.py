"""A check whose compiled answer may fault runs in a child process on a GPU (exercises.isolated).

On this CPU the child runs the interpreter, as the GPU's child compiles: the plumbing (the
answer's source carried over, the result carried back, a dead child reported) is the same.
"""

from __future__ import annotations

import subprocess

import pytest

import exercises
from course_utils import env
from exercises import isolated, solutions

ANSWERS = solutions.answers()
# lesson 09's exercises whose answer addresses q, k, v (or the partial results) inside the
# course's compiled kernel
FAULTING = ("attention.attend_block", "attention.key_range", "attention.backward_dkdv",
            "attention_variants.window_range", "attention_variants.combine_splits")


@pytest.fixture
def in_a_child(monkeypatch):
    monkeypatch.setattr(isolated, "wanted", lambda: True)


def _check(id: str, source: str):
    names = exercises.load_cell(source, f"isolated_{id}")
    return exercises.run_check(id, *(names[n] for n in exercises.get(id).answers))


def test_the_exercises_that_can_fault_are_isolated():
    assert [id for id in FAULTING if not exercises.get(id).isolated] == []


def test_a_child_only_where_a_kernel_is_compiled_and_not_inside_a_child(monkeypatch):
    monkeypatch.delenv(isolated.CHILD, raising=False)
    monkeypatch.setattr(isolated.env, "HAS_CUDA", False)
    assert not isolated.wanted()  # a CPU: the interpreter, nothing faults
    monkeypatch.setattr(isolated.env, "HAS_CUDA", True)
    monkeypatch.setattr(isolated.env, "TRITON_INTERPRET", True)
    assert not isolated.wanted()
    monkeypatch.setattr(isolated.env, "TRITON_INTERPRET", False)
    assert isolated.wanted()
    monkeypatch.setenv(isolated.CHILD, "1")
    assert not isolated.wanted()  # a child checks in its own process


def test_a_child_passes_the_solution_and_rejects_a_wrong_answer(in_a_child):
    solution, wrong = ANSWERS["attention.key_range"]
    passed = _check("attention.key_range", solution)
    assert passed.status == "passed", str(passed)
    label, source = next(iter(wrong.items()))
    rejected = _check("attention.key_range", source)
    assert rejected.status == "not yet", f"{label}: {rejected}"
    assert any(line.startswith("hint:") for line in rejected.lines)


@pytest.mark.skipif(not env.TRITON_INTERPRET, reason="the child compiles here: os.abort() "
                    "is Python the interpreter runs, not Triton (the next test fakes the death)")
def test_a_child_that_dies_is_a_not_yet_naming_the_crash(in_a_child):
    solution, _ = ANSWERS["attention.key_range"]
    # (what a fault does to the child, as the GPU would end it: the process dies mid-check)
    dying = solution.replace("import triton\n", "import os\nimport triton\n", 1).replace(
        "    whole_blocks =", "    os.abort()\n    whole_blocks =", 1)
    assert dying != solution
    result = _check("attention.key_range", dying)
    assert result.status == "not yet"
    assert "crashed the GPU" in result.lines[0] and "this notebook is unharmed" in result.lines[1]
    assert result.lines[-1].startswith("hint:")


def test_a_fault_in_the_child_is_reported_from_its_last_words(in_a_child, monkeypatch):
    """What the parent reads from a child that a GPU fault killed (its stderr's last line)."""
    said = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"

    def died(command, **kwargs):
        assert command[1:] == ["-m", "exercises.isolated_child", "attention.key_range", "key_range"]
        assert "def key_range(" in kwargs["input"]
        assert kwargs["env"][isolated.CHILD] == "1"
        return subprocess.CompletedProcess(command, 1, stdout="", stderr=f"Traceback\n{said}\n")

    monkeypatch.setattr(isolated.subprocess, "run", died)
    result = _check("attention.key_range", ANSWERS["attention.key_range"][0])
    assert (result.status, result.lines[0]) == ("not yet", f"your code crashed the GPU: {said}")
