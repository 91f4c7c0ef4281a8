"""Solutions (and known-wrong answers) of lesson 15's exercises (04.generic and 04.libcu
before issue 24's split)."""

_GENERIC = '''
SCALE_SHIFT_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = float;
// ==== kernel: everything above this line is replaced by the generated header ====
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

extern "C" __global__ void scale_shift(const scalar_t* x, scalar_t* y, float a, float b,
                                       long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) store(&y[i], a * to_float(x[i]) + b);
}
"""
'''

SOLUTIONS = {
    "nvrtc_reference.generic": _GENERIC,
    "nvrtc_reference.libcu": '''
HOST_HEADERS_SOURCE = r"""
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
template <typename T>
__global__ void fill(T* out, cuda::std::int64_t n, T value) {
    static_assert(cuda::std::is_arithmetic_v<T>, "fill needs a number type");
    const cuda::std::int64_t i = blockIdx.x * (cuda::std::int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}
"""
''',
}

WRONG = {
    # scalar_t pointers, but __half arithmetic: PyTorch's flags switch those operators off
    "nvrtc_reference.generic": '''
SCALE_SHIFT_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = float;
// ==== kernel: everything above this line is replaced by the generated header ====
extern "C" __global__ void scale_shift(const scalar_t* x, scalar_t* y, float a, float b,
                                       long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
''',
    # the headers swapped, the std:: names left
    "nvrtc_reference.libcu": '''
HOST_HEADERS_SOURCE = r"""
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
template <typename T>
__global__ void fill(T* out, std::int64_t n, T value) {
    static_assert(std::is_arithmetic_v<T>, "fill needs a number type");
    const std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}
"""
''',
}
