"""exercises.triton_child: a Triton answer's text, gathered to be imported by a GPU child (where
compute-sanitizer watches the compiled kernel). Here, on any machine: the text it gathers is
the answer's, whole, and the module it makes computes what the answer computes."""

import pytest
import torch

from exercises import triton_child
from exercises.solutions import mma_matmul as solutions


def _answer():
    # as from a notebook
    module = triton_child.imported(solutions.SOLUTIONS["mma_matmul.triton_dot"])
    return module.matmul_kernel, module.matmul


def test_the_source_holds_the_launcher_the_kernel_and_the_constants_they_name():
    kernel, matmul = _answer()
    source = triton_child.answer_source(matmul, kernel)
    assert "BLOCK_M = 32" in source and "@triton.jit\ndef matmul_kernel(" in source
    assert source.count("def matmul(") == 1 and source.count("def matmul_kernel(") == 1
    assert "import triton.language as tl" in source


def test_the_gathered_answer_runs_as_the_answer_does():
    kernel, matmul = _answer()
    again = triton_child.imported(triton_child.answer_source(matmul, kernel))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a, b = torch.randn(33, 40, device=device), torch.randn(40, 17, device=device)
    torch.testing.assert_close(again.matmul(a, b), matmul(a, b))


@pytest.mark.parametrize("why", [
    "RuntimeError(\"Cannot call @triton.jit'd outside of the scope of a kernel\")",
    "TypeError('only 0-dimensional arrays can be converted to Python scalars')"])
def test_a_copy_this_triton_cannot_interpret_is_said_not_blamed_on_the_answer(monkeypatch, why):
    """On a GPU with Triton 3.6 (and NumPy >= 2.4) an interpreted copy of a compiled answer fails
    inside Triton: the check says the addresses were not verified and goes on (the puzzles and
    A3 then run the compiled kernel under compute-sanitizer); under TRITON_INTERPRET=1 the same
    error is the answer's."""
    from triton.runtime.errors import InterpreterError

    from course_utils import env
    from exercises import Mismatch, triton_checks

    def run():
        try:
            raise InterpreterError(why)
        except InterpreterError as err:
            raise Mismatch("your code raised InterpreterError", "") from err

    monkeypatch.setattr(env, "TRITON_INTERPRET", False)
    assert triton_checks.expect_in_bounds(run, "x").startswith("not verified on this machine")
    monkeypatch.setattr(env, "TRITON_INTERPRET", True)
    with pytest.raises(Mismatch):
        triton_checks.expect_in_bounds(run, "x")


def test_sanitized_sends_the_gathered_answer_to_the_child_and_names_the_cases(monkeypatch):
    from exercises import kernel_checks

    sent = {}

    def sanitize(id, source, tools):
        sent.update(id=id, source=source, tools=tools)
        return ["compute-sanitizer --tool memcheck: ERROR SUMMARY: 0 errors"]

    monkeypatch.setattr(kernel_checks, "sanitize", sanitize)
    kernel, matmul = _answer()
    lines = triton_child.sanitized("mma_matmul.triton_dot", matmul, kernel, cases="5x7x3",
                                   prefix="PUZZLE = 'x'\n")
    assert sent["id"] == "mma_matmul.triton_dot" and sent["tools"] == ("memcheck",)
    assert sent["source"].startswith("PUZZLE = 'x'\nimport torch") and \
        "def matmul_kernel(" in sent["source"]
    assert lines == ["compute-sanitizer --tool memcheck: ERROR SUMMARY: 0 errors (the compiled "
                     "kernel on 5x7x3, each tensor its own allocation: no access outside them)"]
