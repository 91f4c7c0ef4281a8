// out = alpha * x + y, optionally followed by a ReLU: the lesson's small templated kernel.
//
// Two ways to specialise a kernel at run time meet here:
//  * values above the marker (ITEMS, RELU) come from Python through the generated header:
//        nvrtc.compile(..., defines={"ITEMS": 4, "RELU": True})
//  * the element type is a C++ template parameter, picked by the kernel *name* NVRTC is given:
//        nvrtc.compile(..., "axpy<__nv_bfloat16>")
// NVRTC has no host C++ standard library: <cstdint> and <type_traits> are not there; libcu++
// provides them as <cuda/std/cstdint> and <cuda/std/type_traits> (namespace cuda::std), found in
// $CUDA_HOME/include/cccl with CUDA 13.
//
// nvrtc example: axpy<float>
// nvrtc example: axpy<__half>
// nvrtc example: axpy<__nv_bfloat16>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
constexpr int ITEMS = 4;      // elements per thread (an unrolled loop)
constexpr bool RELU = false;  // fuse max(v, 0)
// ==== kernel: everything above this line is replaced by the generated header ====

template <typename T>
__device__ __forceinline__ float to_float(T x) {
    if constexpr (cuda::std::is_same_v<T, __half>) return __half2float(x);
    else if constexpr (cuda::std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
    else return static_cast<float>(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
    if constexpr (cuda::std::is_same_v<T, __half>) return __float2half_rn(v);
    else if constexpr (cuda::std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
    else return static_cast<T>(v);
}

template <typename T>
__global__ void axpy(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out,
                     float alpha, cuda::std::int64_t n) {
    const cuda::std::int64_t first = (blockIdx.x * (cuda::std::int64_t)blockDim.x + threadIdx.x)
                                     * ITEMS;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const cuda::std::int64_t i = first + k;
        if (i < n) {
            float v = alpha * to_float(x[i]) + to_float(y[i]);
            if constexpr (RELU) v = fmaxf(v, 0.0f);
            out[i] = from_float<T>(v);
        }
    }
}
