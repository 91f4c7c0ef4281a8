"""Exercises of lesson 15, the NVRTC reference: a kernel generic over dtype under PyTorch's
flags, host headers replaced by libcu++. Before the split of issue 24 they closed sections 6 and 7
of lesson 06 as 04.libcu and 04.generic."""

from __future__ import annotations

import torch

from course_utils import env
from exercises import (
    bandwidth_verdict,
    compare,
    exercise,
    expect,
    needs,
)
from exercises.kernel_checks import compile_answer

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# what torch's own NVRTC and extension builds add: no __half/__nv_bfloat16 operators
TORCH_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__")
# NVRTC numbers an error's line from the first line of the source the student wrote
YOUR_SOURCE = "read the first error: its line number counts from the first line of your source"


# --------------------------------------------------------------------------------------------
GENERIC_STUB = '''
SCALE_SHIFT_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = float;  // for the editor: the generated header sets it from a torch dtype
// ==== kernel: everything above this line is replaced by the generated header ====
extern "C" __global__ void scale_shift(const float* x, float* y, float a, float b, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
'''


@exercise("nvrtc_reference.generic", title="One kernel for float32, float16 and bfloat16",
          stub=GENERIC_STUB, answers=("SCALE_SHIFT_SOURCE",), section="__CUDA_NO_HALF_OPERATORS__",
          intro="""
`scale_shift` computes `y = a·x + b` for float32 only. Make it generic over the element type
with the generated header: the check compiles it with `defines={"scalar_t": dtype}` for
float32, float16 and bfloat16, *with PyTorch's flags* (`-D__CUDA_NO_HALF_OPERATORS__` and
friends, so `__half` arithmetic and implicit conversions are off). Compute in `float`: convert
with `__half2float` / `__bfloat162float` on load and `__float2half_rn` / `__float2bfloat16_rn`
on store (overloads, as in `kernels/add/add.cu`, keep it short). The check compiles all three
for sm_90 without a GPU; on a GPU it runs them on odd lengths and measures bfloat16.""")
def check_generic(source, report) -> None:
    from course_utils import nvrtc

    expect(isinstance(source, str), f"SCALE_SHIFT_SOURCE is a {type(source).__name__}; "
           "expected the kernel's source as a string")
    for dtype in DTYPES:
        label = f"scale_shift with scalar_t = {str(dtype).removeprefix('torch.')}"
        compiled = compile_answer(source, "scale_shift", label, hint=YOUR_SOURCE,
                                  output="ptx", defines={"scalar_t": dtype},
                                  options=TORCH_FLAGS)
        params = nvrtc.parameters(compiled)
        pointers = [p for p in params if p.pointer]
        expect(len(pointers) == 2 and all(p.dtype == dtype for p in pointers),
               f"{label}: the pointer parameters are "
               f"{', '.join(p.spelled for p in pointers)}, so a {dtype} tensor cannot be passed",
               "declare x and y as scalar_t pointers: const scalar_t* x, scalar_t* y")
    report.line("compiles for float32, float16 and bfloat16 with PyTorch's flags; x and y are "
                "scalar_t")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also runs each dtype on odd lengths and measures "
                    "bfloat16 against the copy bandwidth")
        return
    for dtype in DTYPES:
        kernel = nvrtc.kernel(source, "scale_shift", defines={"scalar_t": dtype},
                              options=TORCH_FLAGS, verbose=False)
        for n in (1, 7, 4099, 1 << 20):
            x = torch.randn(n, device="cuda").to(dtype)
            y = torch.empty_like(x)
            kernel(x, y, 2.0, -1.0, n, grid=-(-n // 256), block=256)
            atol = 1e-5 if dtype == torch.float32 else 1e-2
            compare(y, (2.0 * x.float() - 1.0).to(dtype), what=f"{dtype} n={n}", atol=atol,
                    rtol=atol, hint="load as float, compute, round once on the store")
    report.line("matches 2·x - 1 in every dtype, odd lengths included")
    kernel = nvrtc.kernel(source, "scale_shift", defines={"scalar_t": torch.bfloat16},
                          options=TORCH_FLAGS, verbose=False)
    x = torch.randn(1 << 28, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    bandwidth_verdict(report, lambda: kernel(x, y, 2.0, -1.0, x.numel(),
                                             grid=-(-x.numel() // 256), block=256), (),
                      2 * x.numel() * 2)


# --------------------------------------------------------------------------------------------
LIBCU_STUB = '''
HOST_HEADERS_SOURCE = r"""
#include <cstdint>
#include <type_traits>
template <typename T>
__global__ void fill(T* out, std::int64_t n, T value) {
    static_assert(std::is_arithmetic_v<T>, "fill needs a number type");
    const std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}
"""
'''


@exercise("nvrtc_reference.libcu", title="No host headers under NVRTC", stub=LIBCU_STUB,
          answers=("HOST_HEADERS_SOURCE",), section="The missing-header lesson",
          intro="""
This kernel compiles with nvcc and fails with NVRTC: there is no host C++ standard library.
Make it compile with NVRTC using libcu++ (`<cuda/std/...>`, namespace `cuda::std`), keeping the
64-bit index and the `static_assert`. The check compiles `fill<float>` and `fill<int>` for
sm_90 (no GPU needed).""")
def check_libcu(source, report) -> None:
    needs("nvrtc", "libcu++")
    expect(isinstance(source, str), f"HOST_HEADERS_SOURCE is a {type(source).__name__}; "
           "expected the kernel's source as a string")
    expect("<cstdint>" not in source and "<type_traits>" not in source,
           "the source still includes host headers (<cstdint>, <type_traits>): NVRTC has none",
           "include <cuda/std/cstdint> and <cuda/std/type_traits> instead")
    for name in ("fill<float>", "fill<int>"):
        ptx = compile_answer(source, name, name, hint=YOUR_SOURCE, output="ptx").ptx
        expect(".u64" in ptx or ".s64" in ptx, f"{name}: no 64-bit integer in the PTX",
               "keep the index 64-bit: cuda::std::int64_t")
    expect("static_assert" in source, "the static_assert is gone", "keep it: "
           "cuda::std::is_arithmetic_v<T> works under NVRTC")
    report.line("fill<float> and fill<int> compile with NVRTC, libcu++ only")
