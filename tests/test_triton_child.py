"""exercises.triton_child: a Triton answer's text, gathered to be imported by a GPU child (where
compute-sanitizer watches the compiled kernel). Here, on any machine: the text it gathers is
the answer's, whole, and the module it makes computes what the answer computes."""

import torch

from exercises import triton_child
from exercises.solutions import lesson05 as solutions


def _answer():
    module = triton_child.imported(solutions.SOLUTIONS["05.triton_dot"])  # as from a notebook
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
