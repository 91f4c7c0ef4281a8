"""Exercise hopper_backward.quantize in Triton's interpreter: the solution passes, and each
hand-written wrong answer gets "not yet" with the hint that names its mistake (in
tests/test_exercises.py, with the hints in exercises/solutions/hopper_backward.py's SAYS)."""

import pytest
import torch

import exercises
from course_utils import env
from exercises import hopper_backward
from exercises import hopper_backward_quantize_wide as wide
from exercises.solutions.hopper_backward import SOLUTIONS

pytestmark = pytest.mark.skipif(not env.TRITON_INTERPRET,
                                reason="the check in Triton's interpreter (TRITON_INTERPRET=1)")

ID = "hopper_backward.quantize"


def _check(source: str):
    names = exercises.load_cell(source, "test_13_quantize")
    return exercises.run_check(ID, names["quantize_kernel"])


def test_the_solution_passes_bit_for_bit_in_the_interpreter():
    result = _check(SOLUTIONS[ID])
    assert result.status == "passed", str(result)
    total = sum(x.numel() for _, x, _ in hopper_backward._cases("cpu"))
    assert f"{total} of {total} values equal to the reference bit for bit" in str(result)


def test_a_masked_load_without_other_is_named_as_padding():
    """Compiled, the masked-off lanes happen to read 0; the check's interpreter reads NaN."""
    source = SOLUTIONS[ID].replace("mask=ok,\n                other=0.0)", "mask=ok)")
    assert source != SOLUTIONS[ID]
    result = _check(source)
    assert result.status == "not yet" and hopper_backward.PADDING in str(result), str(result)


def test_the_clamp_is_a_guard_the_values_never_need():
    """x / (amax / 448) rounds at most one float32 step past 448, which e4m3's rounding takes
    back to 448 (test_x_over_scale_rounds_past_448_and_e4m3_takes_it_back): a kernel without the
    clamp passes (the guide says so; it is not among the wrong answers)."""
    source = SOLUTIONS[ID].replace("tl.clamp(tl.math.div_rn(x, scale), -E4M3_MAX, E4M3_MAX)",
                                   "tl.math.div_rn(x, scale)")
    assert source != SOLUTIONS[ID]
    assert _check(source).status == "passed"


def test_x_over_scale_rounds_past_448_and_e4m3_takes_it_back():
    """Why the blind answer without the clamp passes (exercises/solutions/blind): for about one
    block maximum in ten, fl(amax / fl(amax / 448)) is 448.00003, one float32 step past 448
    (9.717428 is one); e4m3 rounds it to 448 (e4m3_grid in the interpreter, and on a GPU the
    cast, which PTX makes .satfinite), so its x8 is the reference's bit for bit and no check of
    the values can tell. The clamp guards the cast; it changes no value stored."""
    from kernels.scaled_attention.quantize import quantize_blocks_torch

    amax = torch.tensor(9.717428)
    assert (amax / (amax / torch.tensor(448.0))).item() > 448.0
    x = 0.1 * torch.randn(1, 2, 256, 64, generator=torch.Generator().manual_seed(0))
    x[0, 0, 5, 7], x[0, 1, 130, 3] = amax, -amax  # overshooting blocks, either sign
    want8, want = quantize_blocks_torch(x)
    unclamped = SOLUTIONS[ID].replace("tl.clamp(tl.math.div_rn(x, scale), -E4M3_MAX, E4M3_MAX)",
                                      "tl.math.div_rn(x, scale)")
    blind = exercises.solutions.blind_answers()[ID]["x / scale not clamped to ±448 before the "
                                                    "cast"]
    for source in (SOLUTIONS[ID], unclamped, blind):
        kernel = exercises.load_cell(source, "test_13_quantize_448")["quantize_kernel"]
        x8, scale = hopper_backward._run(kernel, x, False, True)
        assert torch.equal(x8.view(torch.uint8), want8.view(torch.uint8))
        assert torch.equal(scale, want) and x8.float().abs().max() == 448.0


def test_the_quantiser_in_pytorch_is_not_the_kernel():
    # "half of it in PyTorch": the reference's own operations, handed in as the answer
    from kernels.scaled_attention.quantize import quantize_blocks_torch

    result = exercises.run_check(ID, quantize_blocks_torch)
    assert result.status == "not yet" and "expected a @triton.jit kernel" in str(result)


def test_the_wide_offsets_are_addresses_only():
    """The 2^31-element problems touch no memory (their strides reach 2 GiB past a tensor of
    a few KiB): every load and store lane is recorded and switched off."""
    from kernels.scaled_attention import quantize as q
    from kernels.scaled_matmul import E4M3

    names = exercises.load_cell(SOLUTIONS[ID], "test_13_quantize_wide")
    assert "2^31" in wide.expect_wide_offsets(names["quantize_kernel"], hopper_backward.INT64,
                                             hopper_backward.STRIDES)
    x, x8, scale = torch.arange(8.0), torch.zeros(8, dtype=E4M3), torch.full((1,), -1.0)
    with wide.addresses_only() as seen:
        q.quantize_kernel[(1, 1)](x, x8, scale, 8, 1, 1, 1, 8, 8, 1, 1, 8, 8, 1, 1,
                                  SCALE_FLOOR=q.SCALE_FLOOR, E4M3_MAX=q.E4M3_MAX,
                                  SCALE_BLOCK=q.SCALE_BLOCK, BLOCK_D=1, INTERPRETED=True)
    kinds = sorted({(kind, size) for kind, _, size, _ in seen})
    assert kinds == [("load", 4), ("store", 1), ("store", 4)], kinds
    assert sum(len(a) for kind, _, _, a in seen if kind == "load") == 8
    assert scale.item() == -1.0 and not x8.float().any()  # nothing written
