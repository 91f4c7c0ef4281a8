"""GeLU kernels beyond the matrix test: index safety past 2^31, alignment, kernel counts,
compute-sanitizer. The matrix test (tests/test_kernel_matrix.py) checks every provider against
F.gelu on fresh random inputs, awkward shapes and large |x|."""

import pytest
import torch
import torch.nn.functional as F

import kernels
from course_utils import env
from kernels.gelu import bench, extension


def test_no_provider_returns_nan_for_huge_inputs():
    x = torch.tensor([-3e38, -1e30, -1e4, -20.0, 0.0, 20.0, 1e4, 1e30, 3e38],
                     device=env.DEFAULT_DEVICE)
    for kernel in kernels.get_kernels("gelu", x):
        y = kernel(x)
        assert not y.isnan().any(), f"{kernel.name}: {y}"
        torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, k=kernel.name: f"{k}: {m}")


def test_gelu_rejects_what_is_not_a_float_tensor():
    with pytest.raises(ValueError, match="x expected a floating-point tensor, got int64"):
        kernels.get_kernel("gelu", "triton")(torch.arange(4))
    with pytest.raises(ValueError, match="x expected a torch.Tensor, got list"):
        kernels.get_kernel("gelu", "manual")([1.0, 2.0])


def test_cuda_provider_explains_why_it_cannot_run_a_cpu_tensor():
    reason = kernels.get_kernel("gelu", "cuda", "vectorized").supports(torch.ones(4))
    assert reason and ("CUDA" in reason or "nvcc" in reason)


@pytest.mark.gpu
def test_compiled_triton_explains_a_cpu_tensor():
    reason = kernels.get_kernel("gelu", "triton").supports(torch.ones(4))
    assert reason == "compiled Triton needs x on cuda, got x on cpu"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["naive", "vectorized"])
def test_unaligned_views_and_tails(variant):
    kernel = kernels.get_kernel("gelu", "cuda", variant)
    base = torch.randn(10_007, device="cuda")
    for x in (base[1:], base[3:], base[:8191], base[:1]):  # starts 4/12 bytes in; odd tails
        torch.testing.assert_close(kernel(x), F.gelu(x, approximate="tanh"))


@pytest.mark.gpu
@pytest.mark.parametrize("unroll", [1, 2, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grid_stride_loop_with_a_capped_grid(unroll, dtype):
    ext = extension.build_inline().module
    x = torch.randn(1_000_003, device="cuda").to(dtype)  # many loop steps over 1 block per SM
    atol, rtol = kernels.OPS["gelu"].tol(dtype)
    for threads in (32, 256, 1024):
        torch.testing.assert_close(ext.gelu_vectorized(x, threads, unroll, 1),
                                   F.gelu(x, approximate="tanh"), atol=atol, rtol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("provider", [("cuda", "naive"), ("cuda", "vectorized"), ("triton",)])
def test_more_than_2_to_the_31_elements(provider):
    """An int32 index wraps at 2^31: the elements past it would be read from the wrong place."""
    free, _ = torch.cuda.mem_get_info()
    n = (1 << 31) + 4099  # a tail after the last 16-byte vector, too
    if free < 3 * n * 2:
        pytest.skip(f"needs {3 * n * 2 / 2**30:.1f} GiB free on the GPU, has {free / 2**30:.1f}")
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = kernels.get_kernel("gelu", *provider)(x)
    for lo, hi in ((0, 4096), ((1 << 31) - 4096, (1 << 31) + 4096), (n - 8192, n)):
        torch.testing.assert_close(y[lo:hi], F.gelu(x[lo:hi], approximate="tanh"),
                                   atol=2e-2, rtol=2e-2, msg=lambda m, r=(lo, hi): f"{r}: {m}")
    del x, y
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.parametrize("provider", [("cuda", "naive"), ("cuda", "vectorized"), ("triton",),
                                      ("compile",), ("eager",)])
def test_fused_providers_launch_exactly_one_kernel(provider):
    from course_utils.profiling import count_kernels

    x = torch.randn(1 << 20, device="cuda")
    counts = count_kernels(kernels.get_kernel("gelu", *provider), x)
    assert sum(counts.values()) == 1, counts


@pytest.mark.gpu
def test_manual_version_launches_one_kernel_per_operation():
    from course_utils.profiling import count_kernels

    counts = count_kernels(kernels.get_kernel("gelu", "manual"), torch.randn(1024, device="cuda"))
    assert sum(counts.values()) >= 6, counts


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_finds_nothing(tool):
    if bench.sanitizer_path() is None:
        pytest.fail("compute-sanitizer not found next to nvcc or on PATH") if env.STRICT \
            else pytest.skip("compute-sanitizer not found")
    kernels.get_kernel("gelu", "cuda", "vectorized").load()  # build outside the sanitizer
    [(command, summary, status)] = bench.sanitize(tool)
    assert status == 0 and "0 errors" in summary, f"{command}: {summary}"
