"""kernels/matmul/triton_dot.py: lesson 07's Triton ``tl.dot`` matmul. It registers with its
metadata, refuses in plain words what it cannot run here (bf16 under the interpreter), and
matches a float64 reference on awkward shapes and strides: on a CPU through Triton's
interpreter (fp16, fp32), on a GPU autotuned in every dtype."""

import pytest
import torch

import kernels
from course_utils import env
from kernels.matmul import triton_dot

DEVICE = env.DEFAULT_DEVICE
# a small tile gives the test shapes many tiles in both directions: 5 tile rows with GROUP_M=2
# leave a short last group, where a wrong grouped order skips or repeats tiles
SMALL = triton_dot.Tile(16, 16, 16, num_stages=2, num_warps=4, group_m=2)
SHAPES = [(1, 1, 1), (33, 65, 17), (80, 40, 40), (17, 5, 0), (0, 7, 3)]


def _dtypes():
    return [torch.float32, torch.float16] + ([] if env.TRITON_INTERPRET else [torch.bfloat16])


def _check(a, b, tile=None):
    got = triton_dot.matmul(a, b, tile=tile)
    expected = a.double() @ b.double()
    tol = {torch.float32: 2e-2 if a.is_cuda else 1e-5, torch.float16: 1e-2,
           torch.bfloat16: 3e-2}[a.dtype]  # fp32 runs as tf32 on a GPU
    assert got.dtype == a.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.double(), expected, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
@pytest.mark.parametrize(("m", "n", "k"), SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_matches_float64_on_awkward_shapes(dtype, m, n, k):
    a = (torch.randn(m, k, device=DEVICE) / max(k, 1) ** 0.25).to(dtype)
    b = (torch.randn(k, n, device=DEVICE) / max(k, 1) ** 0.25).to(dtype)
    _check(a, b, tile=SMALL)


@pytest.mark.parametrize("layout", ["a column-major", "b column-major", "sliced views"])
def test_any_strides(layout):
    a = torch.randn(48, 40, device=DEVICE).half()
    b = torch.randn(40, 24, device=DEVICE).half()
    if layout == "a column-major":
        a = a.t().contiguous().t()
    elif layout == "b column-major":
        b = b.t().contiguous().t()
    else:  # every other row and column: strides 2 and 2 * row length
        a = torch.randn(96, 80, device=DEVICE).half()[::2, ::2]
        b = torch.randn(80, 48, device=DEVICE).half()[::2, ::2]
    _check(a, b, tile=SMALL)


def test_registered_with_its_metadata():
    kernel = kernels.get_kernel("matmul", "triton_dot")
    assert kernel is triton_dot.KERNEL
    assert kernel.dtypes == triton_dot.DTYPES and kernel.needs == ("triton",)
    assert kernel.meta["accumulator"] == "float32"
    assert torch.float32 in kernel.meta["tolerance"]  # tf32 on a GPU
    a, b = torch.randn(8, 16, device=DEVICE), torch.randn(16, 4, device=DEVICE)
    assert kernel in kernels.get_kernels("matmul", a, b)
    _check(a, b)  # the default configuration: the interpreter's tile, or the autotuner's


@pytest.mark.skipif(not env.TRITON_INTERPRET, reason="the interpreter's limits")
def test_interpreter_refuses_bf16_and_gpu_tensors_with_reasons():
    a = torch.randn(8, 16).bfloat16()
    reason = triton_dot.KERNEL.supports(a, a.t())
    assert "interpreter" in reason and "bf16" in reason and "fp16" in reason
    with pytest.raises(ValueError, match="triton_dot: Triton's interpreter computes bf16"):
        triton_dot.matmul(a, a.t())


def test_malformed_problems_name_the_operand():
    a = torch.randn(4, 8, device=DEVICE)
    with pytest.raises(ValueError, match="b expected 8 rows"):
        triton_dot.matmul(a, torch.randn(7, 3, device=DEVICE))
    with pytest.raises(ValueError, match="a expected one of float32"):
        triton_dot.matmul(a.double(), a.double().t())
    with pytest.raises(ValueError, match="tile expected a triton_dot.Tile"):
        triton_dot.matmul(a, a.t(), tile=(16, 16, 16))


def test_autotune_has_several_tiles_and_the_interpreter_one():
    assert len(triton_dot.GPU_TILES) >= 3
    assert len({t.short for t in triton_dot.GPU_TILES}) == len(triton_dot.GPU_TILES)
    if env.TRITON_INTERPRET:
        assert "fixed" in triton_dot.chosen_tile(8, 8, 8, torch.float16)


@pytest.mark.gpu
def test_gpu_autotunes_and_measures_against_cublas():
    a = torch.randn(512, 384, device="cuda").half()
    b = torch.randn(384, 256, device="cuda").half()
    _check(a, b)
    assert triton_dot.chosen_tile(512, 256, 384, torch.float16) != "not tuned yet"
    (point,) = triton_dot.measure(sizes=(1024,), dtypes=("fp16",))
    assert point.rate > 0 and point.cublas > 0 and "x" in point.tile
