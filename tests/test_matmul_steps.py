"""Lesson 07's steps to a fast matmul (kernels/matmul/steps/): what each compiles to on any
machine, layout checks, and (on a GPU) values against a float64 reference."""

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.matmul import bench_steps, steps

NO_NVRTC = nvrtc.unavailable_reason()
NO_DISASM = sass.unavailable_reason()
needs_nvrtc = pytest.mark.skipif(NO_NVRTC is not None, reason=f"NVRTC: {NO_NVRTC}")
needs_disasm = pytest.mark.skipif(NO_DISASM is not None, reason=str(NO_DISASM))

# every step in bf16 for sm_90; each file's first step in its other dtypes for sm_80 too (the
# configurations of one file compile the same code: CI compiles ~26 programs, not ~64)
FIRST_OF_FILE = {step.file: variant for variant, step in reversed(steps.STEPS.items())}
COMPILES = ([(variant, torch.bfloat16, "sm_90") for variant in steps.STEPS]
            + [(variant, dtype, "sm_80") for variant in FIRST_OF_FILE.values()
               for dtype in steps.STEPS[variant].dtypes])
# mma.sync steps: (HMMA, LDSM) static counts per K slice of 32: 2 x 4 mma tiles per 32 x 32 warp
# tile, two k16 steps; ldmatrix.x2 for B (4 per k step) until the swizzle step loads B with x4
# (2 per k step); 64 x 64 warp tiles: 4 x 8 tiles, and load_fragments appears three times.
MMA_CENSUS = {"9_mma": (16, 12), "10_mma_cp_async": (16, 12), "11_mma_swizzle": (16, 8),
              "12_mma_warp_tile": (64, 24)}


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
    step = steps.STEPS[variant]
    if step.tensor_cores:
        # SASS names the input type only when it is not fp16 (the default): .F32 is the
        # accumulator.
        hmma, ldsm = MMA_CENSUS[variant]
        spelling = "HMMA.16816.F32.BF16" if dtype == torch.bfloat16 else "HMMA.16816.F32"
        assert sass.variants(report.sass, "HMMA") == {spelling: hmma}
        assert report.census["LDSM"] == ldsm
        assert report.census["FFMA"] == 0
        # the pipeline: cp.async (LDGSTS) from step 10 on, no plain global loads
        assert (report.census["LDGSTS"] > 0) == (variant != "9_mma")
        assert (report.census["LDG"] == 0) == (variant != "9_mma")
    else:
        assert report.count(*sass.GROUPS["tensor core"]) == 0
        assert report.census["FFMA"] > 0
    if step.file == "smem_tiled.cu":
        c = step.config
        assert report.census["FFMA"] == c["BK"] * c["TM"] * c["TN"]  # fully unrolled
        assert report.census["BAR"] == 2
        assert res.shared_bytes >= c["BK"] * (c["BM"] + c["BN"] + 2) * 4


@needs_nvrtc
@needs_disasm
def test_the_tile_config_reaches_the_machine_code():
    compiled = steps.compile_step("9_mma", torch.float16, arch="sm_80", verbose=False,
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
    for variant, step in steps.STEPS.items():
        reason = steps.layout_reason(variant, a, b)
        assert (reason is not None and "multiple of 8" in reason) == step.tensor_cores


def test_registered_with_their_layout_check():
    found = kernels.get_kernels("matmul", where=lambda k: k.provider == "steps")
    assert [k.variant for k in found] == list(steps.STEPS)
    mma = kernels.get_kernel("matmul", "steps", "9_mma")
    assert mma.min_capability == (8, 0) and torch.float32 not in mma.dtypes
    a, b = _operands(16, 16, 16, torch.bfloat16)
    assert mma.check(a, b.contiguous()).startswith("needs a column-major b")
    assert isinstance(mma.supports(a, b), str)  # on a CPU tensor: a reason, never an exception


def test_bad_arguments_raise_value_errors_naming_them():
    with pytest.raises(ValueError, match="variant expected"):
        steps.compile_step("4_magic")
    with pytest.raises(ValueError, match="dtype expected"):
        steps.compile_step("9_mma", torch.float32)
    with pytest.raises(ValueError, match="config expected keys"):
        steps.compile_step("1_naive", config={"BM": 64})
    with pytest.raises(ValueError, match="WM in 16..64"):
        steps.compile_step("9_mma", config={"WM": 24})
    with pytest.raises(ValueError, match=r"WN in 16..64 \(multiple of 16\)"):
        steps.compile_step("11_mma_swizzle", config={"WN": 8})  # x4 loads two n8 tiles of B
    with pytest.raises(ValueError, match="BK 32"):
        steps.compile_step("12_mma_warp_tile", config={"BK": 64})  # the swizzle's row width
    with pytest.raises(ValueError, match="STAGES of 2 or more"):
        steps.compile_step("10_mma_cp_async", config={"STAGES": 1})
    with pytest.raises(ValueError, match="at most 1024 threads"):
        steps.compile_step("7_smem_4x4", config={"TM": 1, "TN": 1})
    a, b = _operands(8, 8, 16, torch.float16)
    with pytest.raises(ValueError, match="a expected a CUDA tensor"):
        steps.matmul_step("1_naive", a, b)
    with pytest.raises(ValueError, match="b expected the dtype of a"):
        steps.matmul_step("1_naive", a, b.float())


def test_the_staircase_is_numbered_in_order_and_ends_in_the_full_kernel():
    numbers = [int(variant.split("_")[0]) for variant in steps.STEPS]
    assert numbers == list(range(1, len(steps.STEPS) + 1))
    assert bench_steps.FULL_KERNEL == f"{len(steps.STEPS) + 1}_mma.cu"
    for variant in list(steps.STEPS)[1:]:  # each step one idea: a new file or new constants
        assert steps.previous(variant).variant != variant


def test_only_the_warp_tile_step_needs_dynamic_shared_memory():
    for variant, step in steps.STEPS.items():
        nbytes = step.dynamic_shared_bytes(step.config, torch.bfloat16)
        # 4 stages x (128 + 128 rows) x 32 bf16: 64 KB, over the 48 KB of a static array
        assert nbytes == (4 * 256 * 32 * 2 if variant == "12_mma_warp_tile" else 0)


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
