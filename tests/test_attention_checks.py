"""What lesson 09's checks add to the interpreter: float32 tl.dot rounded to tf32 unless the code
asks for "ieee" (as a GPU's tensor cores do), and the running sums a student's function returns
watched for a dtype that leaves float32 (which compiled Triton refuses in a loop)."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from course_utils import env
from exercises import triton_precision

pytestmark = pytest.mark.skipif(not env.TRITON_INTERPRET,
                                reason="the interpreter's additions (TRITON_INTERPRET=1)")


def test_tf32_keeps_ten_mantissa_bits_rounding_to_nearest_even():
    one = 1.0
    ulp = 2.0 ** -10  # tf32's spacing at 1
    x = np.array([one, one + ulp, one + ulp / 4, one + 3 * ulp / 4, one + ulp / 2,
                  one + 3 * ulp / 2, -(one + 3 * ulp / 4)], dtype=np.float32)
    got = triton_precision.tf32(x)
    want = [one, one + ulp, one, one + ulp, one, one + 2 * ulp, -(one + ulp)]
    assert got.tolist() == want


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, IEEE: tl.constexpr):
    i = tl.arange(0, 16)
    a = tl.load(a_ptr + i[:, None] * 16 + i[None, :])
    b = tl.load(b_ptr + i[:, None] * 16 + i[None, :])
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + i[:, None] * 16 + i[None, :], c)


@pytest.mark.parametrize("ieee", [True, False])
def test_float32_dot_is_tf32_unless_ieee(ieee):
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    c = torch.empty(16, 16)
    with triton_precision.tensor_core_precision():
        _dot_kernel[(1,)](a, b, c, IEEE=ieee)
    exact = a.double() @ b.double()
    tf32 = (torch.from_numpy(triton_precision.tf32(a.numpy())).double()
            @ torch.from_numpy(triton_precision.tf32(b.numpy())).double())
    want = exact if ieee else tf32
    assert (c.double() - want).abs().max() < 1e-5
    assert ieee or (c.double() - exact).abs().max() > 1e-4  # tf32 is visibly not float32
    _dot_kernel[(1,)](a, b, c, IEEE=False)  # outside the checks: the interpreter as it is
    assert (c.double() - exact).abs().max() < 1e-5


@triton.jit
def _narrowing_step(acc, x):
    return (acc + x).to(tl.float16), acc + x


@triton.jit
def _accumulate_kernel(x_ptr, out_ptr):
    i = tl.arange(0, 16)
    acc = tl.zeros((16,), tl.float32)
    total = tl.zeros((16,), tl.float32)
    for _ in range(3):
        acc, total = _narrowing_step(acc, tl.load(x_ptr + i))
    tl.store(out_ptr + i, acc.to(tl.float32) + total)


def test_a_running_sum_that_leaves_float32_is_seen():
    seen: list[str] = []
    watched = triton_precision.watched(_narrowing_step, ("acc", "total"), seen)
    _accumulate_kernel.fn.__globals__["_narrowing_step"] = watched
    try:
        _accumulate_kernel[(1,)](torch.randn(16), torch.empty(16))
    finally:
        _accumulate_kernel.fn.__globals__["_narrowing_step"] = _narrowing_step
    assert seen and seen[0] == "acc as fp16" and not any(s.startswith("total") for s in seen)
