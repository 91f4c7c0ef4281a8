"""Lesson 05's steps to a fast matmul (kernels/matmul/steps/): what each compiles to on any
machine, layout checks, and (on a GPU) values against a float64 reference."""

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.matmul import steps

NO_NVRTC = nvrtc.unavailable_reason()
NO_DISASM = sass.unavailable_reason()
needs_nvrtc = pytest.mark.skipif(NO_NVRTC is not None, reason=f"NVRTC: {NO_NVRTC}")
needs_disasm = pytest.mark.skipif(NO_DISASM is not None, reason=str(NO_DISASM))

COMPILES = [(variant, dtype, arch) for variant, step in steps.STEPS.items()
            for dtype in step.dtypes for arch in ("sm_80", "sm_90")]


def _ids(params):
    return [f"{v}-{str(d)[6:]}-{a}" for v, d, a in params]


def _operands(m, n, k, dtype, device="cpu"):
    a = torch.randn(m, k, device=device).div(k**0.25).to(dtype)
    b = torch.randn(n, k, device=device).div(k**0.25).to(dtype).t()  # [K, N] column-major
    return a, b


# -- what each step compiles to (no GPU) ------------------------------------------------------


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize(("variant", "dtype", "arch"), COMPILES, ids=_ids(COMPILES))
def test_each_step_compiles_to_the_instructions_it_teaches(variant, dtype, arch):
    report = sass.report(steps.compile_step(variant, dtype, arch=arch, verbose=False))
    res = report.resources
    assert res.spill_store_bytes == res.spill_load_bytes == 0, f"{variant} spills on {arch}"
    if variant == "3_mma_simple":
        # SASS names the input type only when it is not fp16 (the default): .F32 is the
        # accumulator. 2 x 4 mma tiles per warp, two k16 steps per BK=32 slice: 16 HMMAs.
        spelling = "HMMA.16816.F32.BF16" if dtype == torch.bfloat16 else "HMMA.16816.F32"
        assert sass.variants(report.sass, "HMMA") == {spelling: 16}
        assert report.census["LDSM"] == 12  # 2 A fragments (x4) + 4 B fragments (x2), twice
        assert report.census["FFMA"] == 0
    else:
        assert report.count(*sass.GROUPS["tensor core"]) == 0
        assert report.census["FFMA"] > 0
    if variant == "2_smem_tiled":
        assert report.census["FFMA"] == 32 * 4 * 4  # BK x TM x TN, fully unrolled
        assert report.census["BAR"] == 2 and res.shared_bytes >= 2 * 32 * 65 * 4


@needs_nvrtc
@needs_disasm
def test_the_tile_config_reaches_the_machine_code():
    compiled = steps.compile_step("3_mma_simple", torch.float16, arch="sm_80", verbose=False,
                                  config={"WM": 64, "WN": 64})
    assert sass.report(compiled).census["HMMA"] == 4 * 8 * 2  # (64/16) x (64/8) x two k16


# -- layouts and bad input (no GPU) -----------------------------------------------------------


@pytest.mark.parametrize("variant", list(steps.STEPS))
def test_row_major_b_is_refused_with_a_reason(variant):
    a, b = _operands(16, 24, 32, torch.float16)
    assert steps.layout_reason(variant, a, b) is None
    reason = steps.layout_reason(variant, a, b.contiguous())
    assert "column-major b" in reason and "b.t().contiguous().t()" in reason
    reason = steps.layout_reason(variant, a.t().contiguous().t(), b)
    assert "row-major" in reason


def test_mma_step_needs_k_a_multiple_of_8():
    a, b = _operands(16, 16, 20, torch.bfloat16)
    assert "multiple of 8" in steps.layout_reason("3_mma_simple", a, b)
    assert steps.layout_reason("2_smem_tiled", a, b) is None


def test_registered_with_their_layout_check():
    found = kernels.get_kernels("matmul", where=lambda k: k.provider == "steps")
    assert [k.variant for k in found] == list(steps.STEPS)
    mma = kernels.get_kernel("matmul", "steps", "3_mma_simple")
    assert mma.min_capability == (8, 0) and torch.float32 not in mma.dtypes
    a, b = _operands(16, 16, 16, torch.bfloat16)
    assert mma.check(a, b.contiguous()).startswith("needs a column-major b")
    assert isinstance(mma.supports(a, b), str)  # on a CPU tensor: a reason, never an exception


def test_bad_arguments_raise_value_errors_naming_them():
    with pytest.raises(ValueError, match="variant expected"):
        steps.compile_step("4_magic")
    with pytest.raises(ValueError, match="dtype expected"):
        steps.compile_step("3_mma_simple", torch.float32)
    with pytest.raises(ValueError, match="config expected keys"):
        steps.compile_step("1_naive", config={"BM": 64})
    with pytest.raises(ValueError, match="WM in 16..64"):
        steps.compile_step("3_mma_simple", config={"WM": 24})
    with pytest.raises(ValueError, match="at most 1024 threads"):
        steps.compile_step("2_smem_tiled", config={"TM": 1, "TN": 1})
    a, b = _operands(8, 8, 16, torch.float16)
    with pytest.raises(ValueError, match="a expected a CUDA tensor"):
        steps.matmul_step("1_naive", a, b)
    with pytest.raises(ValueError, match="b expected the dtype of a"):
        steps.matmul_step("1_naive", a, b.float())


# -- values on the GPU --------------------------------------------------------------------------

SHAPES = [(1, 1, 16), (33, 65, 40), (128, 96, 64), (200, 136, 1000), (64, 8, 8), (7, 300, 24)]
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1e-2}  # ~ output rounding
GPU_CASES = [(v, d, s) for v, step in steps.STEPS.items() for d in step.dtypes for s in SHAPES]


@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "dtype", "shape"), GPU_CASES,
                         ids=[f"{v}-{str(d)[6:]}-{'x'.join(map(str, s))}"
                              for v, d, s in GPU_CASES])
def test_values_match_float64(variant, dtype, shape):
    m, n, k = shape
    a, b = _operands(m, n, k, dtype, "cuda")
    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")  # a no-op kernel fails
    got = steps.matmul_step(variant, a, b, out=out)
    torch.cuda.synchronize()
    expected = a.double() @ b.double()
    torch.testing.assert_close(got.double(), expected, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(steps.STEPS))
def test_registry_call_and_k_zero(variant):
    kernel = kernels.get_kernel("matmul", "steps", variant)
    a, b = _operands(16, 24, 0, torch.float16, "cuda")
    assert kernel.supports(a, b) is None
    assert torch.equal(kernel(a, b), torch.zeros(16, 24, dtype=torch.float16, device="cuda"))
    a, b = _operands(16, 24, 16, torch.float16, "cuda")
    with pytest.raises(kernels.KernelNotSupported, match="column-major b"):
        kernel(a, b.contiguous())  # row-major b: refused, never a wrong answer
    with pytest.raises(ValueError, match="column-major b"):
        steps.matmul_step(variant, a, b.contiguous())
    with pytest.raises(ValueError, match="out expected"):
        steps.matmul_step(variant, a, b, out=torch.empty(24, 16, dtype=a.dtype, device="cuda"))
