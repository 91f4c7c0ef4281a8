"""course_utils.nvrtc launches on a GPU: checked arguments, template names, > 48 KB of shared
memory, and torch.cuda._compile_kernel on whatever torch is installed."""

import pytest
import torch

from course_utils import env, nvrtc

pytestmark = pytest.mark.gpu
AXPY = env.ROOT / "kernels" / "add" / "axpy.cu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("relu", [False, True])
def test_template_kernel_by_name(dtype, relu):
    ctype = nvrtc.DTYPE_CTYPES[dtype][0]
    kernel = nvrtc.kernel(AXPY, f"axpy<{ctype}>", defines={"ITEMS": 4, "RELU": relu})
    n = 10_001
    x, y = (torch.randn(n, device="cuda").to(dtype) for _ in range(2))
    out = torch.empty_like(x)
    kernel(x, y, out, 0.5, n, grid=-(-n // (128 * 4)), block=128)
    expected = 0.5 * x.float() + y.float()
    if relu:
        expected = expected.relu()
    torch.testing.assert_close(out, expected.to(dtype))


def test_launch_arguments_are_checked_before_launching():
    kernel = nvrtc.kernel(AXPY, "axpy<__half>", defines={"ITEMS": 1, "RELU": False})
    x = torch.ones(8, device="cuda", dtype=torch.float16)
    with pytest.raises(TypeError, match="takes 5 arguments"):
        kernel(x, x, x, 8, grid=1, block=8)
    with pytest.raises(TypeError, match=r"argument 0 \(const T\* __restrict__ x\) expected a "
                                        r"torch.float16 tensor \(__half\), got torch.float32"):
        kernel(x.float(), x, x, 1.0, 8, grid=1, block=8)
    with pytest.raises(TypeError, match="expected a tensor on cuda:0, got one on cpu"):
        kernel(x.cpu(), x, x, 1.0, 8, grid=1, block=8)
    with pytest.raises(TypeError, match=r"argument 4 \(cuda::std::int64_t n\) expected a "
                                        "Python int, got float"):
        kernel(x, x, x, 1.0, 8.0, grid=1, block=8)
    with pytest.raises(ValueError, match="block expected at most 1024 threads"):
        kernel(x, x, x, 1.0, 8, grid=1, block=2048)
    torch.cuda.synchronize()  # the process is still healthy


def test_more_than_48_kb_of_dynamic_shared_memory():
    source = """
extern "C" __global__ void reverse(const float* x, float* out, int n) {
    extern __shared__ float buffer[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];
}
"""
    limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    n = min(limit, 96 * 1024) // 4
    if n * 4 <= 48 * 1024:
        pytest.skip(f"this GPU allows only {limit} bytes of shared memory per block")
    kernel = nvrtc.kernel(source, "reverse")
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    kernel(x, out, n, grid=1, block=256, shared_mem=n * 4)
    torch.testing.assert_close(out, x.flip(0))
    with pytest.raises(ValueError, match="exceeds this GPU's per-block limit"):
        kernel(x, out, n, grid=1, block=256, shared_mem=limit + 4)


def test_ptx_loads_too():
    compiled = nvrtc.compile(AXPY, "axpy<float>", defines={"ITEMS": 2, "RELU": False},
                             output="ptx")
    kernel = nvrtc.load(compiled)
    x = torch.arange(100, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    kernel(x, x, out, 2.0, 100, grid=1, block=64)
    torch.testing.assert_close(out, 3 * x)


def test_cubin_for_another_gpu_is_refused_with_a_reason():
    other = "sm_80" if env.device_info().arch != "sm_80" else "sm_90"
    compiled = nvrtc.compile(AXPY, "axpy<float>", defines={"ITEMS": 2, "RELU": False},
                             arch=other)
    with pytest.raises(ValueError, match=f"CUBIN for {other}; this GPU is"):
        nvrtc.load(compiled)


TORCH_SEED = """
template <typename T>
__global__ void add_t(const T* a, const T* b, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
extern "C" __global__ void add_f(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""


def test_torch_compile_kernel_on_this_torch():
    """The seed's one-liner, through the shim that knows each torch's signature. torch passes
    Python ints as C int, so the kernel takes ``int n`` (a ``long long`` would read garbage)."""
    if reason := nvrtc.torch_compat.torch_compile_kernel_reason():
        pytest.skip(reason)
    a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    templates_ok = nvrtc.torch_compat.torch_allows_template_names()
    names = ["add_f", *(["add_t<float>"] if templates_ok else [])]
    for name in names:
        out = torch.zeros_like(a)
        kernel = nvrtc.torch_compat.torch_compile_kernel(TORCH_SEED, name)
        kernel(grid=(4, 1, 1), block=(256, 1, 1), args=[a, b, out, 1000])
        torch.testing.assert_close(out, a + b)
