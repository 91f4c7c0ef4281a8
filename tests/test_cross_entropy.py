"""The cross_entropy op's Triton kernel beyond tests/test_kernel_matrix.py (the gradient, every
row ignored, the memory it makes, malformed problems) and the check of exercise
model.cross_entropy beyond tests/test_exercises.py (correct answers written differently pass)."""

import pytest
import torch
import torch.nn.functional as F

import exercises
import kernels
from course_utils import env
from exercises.model_cross_entropy_problems import watched
from exercises.solutions import cross_entropy as answers
from kernels.cross_entropy import bench, triton_cross_entropy

ID = "model.cross_entropy"
DEVICE = env.DEFAULT_DEVICE
needs_triton = pytest.mark.skipif(
    kernels.get_kernel("cross_entropy", "triton").unavailable() is not None,
    reason="the Triton cross-entropy cannot run here")


@pytest.mark.parametrize("label", sorted(answers.ALTERNATIVES[ID]))
def test_a_correct_answer_written_differently_passes(label):
    names = exercises.load_cell(answers.ALTERNATIVES[ID][label], f"alternative_{ID}")
    result = exercises.run_check(ID, names["cross_entropy"])
    assert result.passed, str(result)


def _logits(shape, dtype, layout):
    if layout == "transposed":
        return torch.randn(shape[::-1], device=DEVICE).to(dtype).t()
    if layout == "sliced":
        return torch.randn(shape[0], shape[1] + 11, device=DEVICE).to(dtype)[:, 3:3 + shape[1]]
    return torch.randn(shape, device=DEVICE).to(dtype)


@needs_triton
@pytest.mark.parametrize(("v", "dtype", "layout"), [
    (triton_cross_entropy.MAX_BLOCK + 1, torch.float32, "contiguous"),  # two chunks, one ragged
    (300, torch.bfloat16, "transposed"),
    (777, torch.float16, "sliced"),
])
def test_the_gradient_matches_float64_with_grad_out_not_one(v, dtype, layout):
    logits = _logits((5, v), dtype, layout).requires_grad_()
    targets = torch.tensor([0, v - 1, -100, 3, -100], device=DEVICE)
    loss = triton_cross_entropy.cross_entropy_triton(logits, targets)
    (grad,) = torch.autograd.grad(loss, logits, torch.tensor(0.3, device=DEVICE))
    exact = logits.detach().double().requires_grad_()
    want = F.cross_entropy(exact, targets)
    (want_grad,) = torch.autograd.grad(want, exact, torch.tensor(0.3, dtype=torch.float64,
                                                                 device=DEVICE))
    assert grad.dtype == dtype and grad.shape == logits.shape
    assert abs(loss.item() - want.item()) < 1e-5 * (1 + abs(want.item()))
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(grad.double(), want_grad, atol=2 * eps * 0.3 / 3, rtol=2 * eps)
    assert not grad[2].any() and not grad[4].any()  # the ignored rows


@needs_triton
def test_every_row_ignored_gives_nan_as_pytorch_and_a_zero_gradient():
    logits = torch.randn(3, 50, device=DEVICE, requires_grad=True)
    targets = torch.full((3,), -100, device=DEVICE)
    loss = triton_cross_entropy.cross_entropy_triton(logits, targets)
    assert loss.isnan() and F.cross_entropy(logits, targets).isnan()
    (grad,) = torch.autograd.grad(loss, logits)
    assert torch.equal(grad, torch.zeros_like(grad))


@needs_triton
def test_the_kernel_makes_no_n_by_v_tensor_but_the_gradient():
    logits = torch.randn(16, 700, device=DEVICE).to(torch.bfloat16).requires_grad_()
    targets = torch.randint(0, 700, (16,), device=DEVICE)
    with watched(logits.numel()) as watch:
        loss = triton_cross_entropy.cross_entropy_triton(logits, targets)
        torch.autograd.grad(loss, logits)
    assert [dtype for _, _, dtype in watch.made] == [torch.bfloat16], watch.made
    # the eager reference, for contrast: float32 (N, V) tensors of its own
    with watched(logits.numel()) as eager:
        torch.autograd.grad(kernels.reference("cross_entropy")(logits, targets), logits)
    assert sum(dtype == torch.float32 for _, _, dtype in eager.made) >= 2, eager.made


@pytest.mark.parametrize(("args", "says"), [
    ((torch.randn(8), torch.zeros(8, dtype=torch.long)), "logits expected a 2-D tensor"),
    ((torch.randn(4, 5), torch.zeros(4)), "targets expected int64 or int32"),
    ((torch.randn(4, 5), torch.zeros(3, dtype=torch.long)), "targets expected 4 entries"),
    ((torch.randn(4, 0), torch.zeros(4, dtype=torch.long)), "at least one column"),
    ((torch.randn(4, 5), torch.zeros(4, dtype=torch.long), "-100"), "ignore_index expected"),
])
def test_a_malformed_problem_raises_value_error_naming_the_argument(args, says):
    with pytest.raises(ValueError, match=says):
        kernels.get_kernel("cross_entropy", "triton").supports(*args)


def test_the_bench_says_in_one_line_that_it_needs_a_gpu(capsys):
    if env.HAS_CUDA:
        pytest.skip("a GPU is here: the bench measures (make bench)")
    assert bench.run(quick=True) == []
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and "GPU" in said[0], said
