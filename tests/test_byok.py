"""Lesson 11's FP64 GEMM family: its interface (metadata, reasons, generator), its compiles, and
its benchmark records. Correctness against the reference is the matrix test's job."""

import re

import pytest
import torch

import kernels
from course_utils import env, requirements
from kernels.matmul.fp64 import DESIGN_SPACE, bench, generate, interface, nvrtc_gemm, triton_gemm

DEVICE = env.DEFAULT_DEVICE


def test_every_point_of_every_design_space_is_registered_with_its_metadata():
    for provider, tiles in DESIGN_SPACE.items():
        for tile in tiles:
            kernel = kernels.get_kernel("matmul", provider, "fp64 " + "x".join(map(str, tile)))
            assert kernel.meta["tile"] == tile and kernel.meta["accumulator"] == "float64"
            assert kernel.dtypes == (torch.float64,) and kernel.contiguous
            assert not kernel.built or provider == "triton"  # nothing compiled at import


@pytest.mark.parametrize(("provider", "tile", "match"), [
    ("cuda", (16, 16), "provider expected one of triton, nvrtc, cute_dsl, got 'cuda'"),
    ("nvrtc", (16, 16, 8), r"tile expected \(rows, columns\) of positive ints for nvrtc"),
    ("triton", (32, 32), r"tile expected \(BLOCK_M, BLOCK_N, BLOCK_K\) of positive ints"),
    ("triton", (24, 32, 8), "tile expected powers of two"),
    ("nvrtc", (64, 32), "tile expected at most 1024 threads"),
    ("cute_dsl", (0, 32), "positive ints"),
])
def test_a_bad_point_of_the_design_space_is_a_value_error(provider, tile, match):
    with pytest.raises(ValueError, match=match):
        interface.make_kernel(provider, tile)


def test_generate_filters_on_metadata_and_registers_nothing():
    before = kernels.all_kernels()
    tall = generate("nvrtc", where=lambda k: k.meta["tile"][0] > k.meta["tile"][1])
    assert [k.meta["tile"] for k in tall] == [(32, 8), (64, 4)]
    assert generate("triton", where=lambda k: k.meta["tile"][0] == 256) == []
    assert kernels.all_kernels() == before


def test_refusals_are_reasons_and_malformed_problems_value_errors():
    triton_k = kernels.get_kernel("matmul", "triton", "fp64 32x32x8")
    nvrtc_k = kernels.get_kernel("matmul", "nvrtc", "fp64 16x16")
    a = torch.randn(8, 4, dtype=torch.float64, device=DEVICE)
    b = torch.randn(4, 6, dtype=torch.float64, device=DEVICE)
    assert triton_k.supports(a, b) is None
    assert triton_k.supports(a.float(), b.float()) == "supports float64; got a of float32"
    assert triton_k.supports(a, b.t().contiguous().t()) == (
        "needs contiguous inputs; b is not (call .contiguous())")
    on_cpu = nvrtc_k.supports(a.cpu(), b.cpu())
    assert on_cpu == ("needs a CUDA tensor, got a on cpu" if env.HAS_CUDA
                      else "no CUDA GPU (torch.cuda.is_available() is False)")
    with pytest.raises(ValueError, match="matmul: b expected 4 rows"):
        triton_k.supports(a, b.t())


def test_the_cute_dsl_kernels_say_how_to_get_the_dsl():
    reason = kernels.get_kernel("matmul", "cute_dsl", "fp64 16x16").unavailable()
    if requirements.unmet("cute-dsl"):
        assert "pip install nvidia-cutlass-dsl" in reason
    else:
        assert reason == (None if env.HAS_CUDA else "no CUDA GPU (torch.cuda.is_available() "
                                                      "is False)")


def test_triton_gemm_with_k_not_a_multiple_of_the_k_step():
    a = torch.randn(20, 37, dtype=torch.float64, device=DEVICE)
    b = torch.randn(37, 18, dtype=torch.float64, device=DEVICE)
    torch.testing.assert_close(triton_gemm.gemm(a, b, tile=(16, 16, 32)), a @ b,
                               atol=1e-12, rtol=1e-12)


@pytest.mark.skipif(bool(requirements.unmet("nvrtc")), reason="NVRTC is not available")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_nvrtc_tile_compiles_to_an_fp64_fma_loop(arch):
    for tile in DESIGN_SPACE["nvrtc"]:
        ptx = nvrtc_gemm.compile_gemm(tile, arch=arch, output="ptx", verbose=False).ptx
        assert "fma.rn.f64" in ptx
        # __launch_bounds__ from the generated header: the block is TILE_M x TILE_N threads
        assert re.search(rf"\.maxntid {tile[0] * tile[1]}, 1, 1", ptx), tile


def test_bench_records_sit_beside_torch_mm_float64():
    records = bench.run(quick=True)
    assert records[0].what.startswith("fp64 gemm torch.mm float64") and records[0].value > 0
    ours = records[1:]
    assert ours and all(r.peer == records[0].value and r.lesson == bench.LESSON for r in ours)
    assert sum("(best of its design space)" in r.what for r in ours) == len(
        {r.what.split()[2] for r in ours})  # one best per provider that ran


@pytest.mark.gpu
@pytest.mark.parametrize("provider", ["triton", "nvrtc"])
def test_every_tile_matches_torch_mm_on_an_awkward_gpu_problem(provider):
    a = torch.randn(257, 300, dtype=torch.float64, device="cuda")
    b = torch.randn(300, 129, dtype=torch.float64, device="cuda")
    for kernel in kernels.get_kernels("matmul", a, b, where=bench.family(provider)):
        assert kernels.verify(kernel, a, b, label="257x129x300") < 1e-9
    assert len(kernels.get_kernels("matmul", a, b, where=bench.family(provider))) == len(
        DESIGN_SPACE[provider])
