"""exercises.triton_checks on the newer ways a Triton kernel addresses memory: a tensor
descriptor's loads and stores (``tl.make_tensor_descriptor``) reach the interpreter with keyword
options and a plain-array mask, and the address check must see them like any other (a student
who tries descriptors gets a verdict, not a TypeError from the checker)."""

import pytest
import torch
import triton
import triton.language as tl

from course_utils import env
from exercises import Mismatch, triton_checks

pytestmark = pytest.mark.skipif(
    not env.TRITON_INTERPRET, reason="the interpreter's path: on a GPU the kernels are compiled, "
    "and an older Triton may not interpret a copy (the checks then say so)")


@triton.jit
def _double(x_ptr, z_ptr, M, N, ROWS, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    x = tl.make_tensor_descriptor(x_ptr, shape=[ROWS, N], strides=[N, 1], block_shape=[BM, BN])
    z = tl.make_tensor_descriptor(z_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    z.store([pm * BM, pn * BN], x.load([pm * BM, pn * BN]) * 2)


def _run(rows_declared):
    x, z = triton_checks.fenced(20, 32), triton_checks.fenced(20, 32)
    copy = triton_checks.interpreted(_double)
    said = triton_checks.expect_in_bounds(
        lambda: copy[(2, 2)](x, z, 20, 32, rows_declared, BM=16, BN=16), "the kernel")
    return said, x, z


def test_a_tensor_descriptor_inside_its_tensor_passes():
    said, x, z = _run(20)
    assert said is None and torch.equal(z, 2 * x)


def test_a_tensor_descriptor_one_row_too_long_is_named():
    with pytest.raises(Mismatch, match="loaded element 640 of x_ptr .* a read outside"):
        _run(21)
