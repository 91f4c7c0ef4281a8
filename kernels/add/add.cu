// Elementwise add for NVRTC: out[i] = a[i] + b[i].
//
// Everything above the marker line is for the editor only. course_utils.nvrtc replaces it by a
// header generated from Python values (its #include lines are kept), e.g. for bfloat16 tensors:
//     #include <cuda_bf16.h>
//     using scalar_t = __nv_bfloat16;
//     constexpr int BLOCK = 256;
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = float;     // example value; the generated header sets it from the tensors' dtype
constexpr int BLOCK = 256;  // threads per block; the launch must use the same number
// ==== kernel: everything above this line is replaced by the generated header ====

// Arithmetic in float, rounded once to scalar_t: the same result as torch's a + b, and it needs
// no __half operators (torch compiles with -D__CUDA_NO_HALF_OPERATORS__).
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

extern "C" __global__ void __launch_bounds__(BLOCK)
add_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
           scalar_t* __restrict__ out, long long n) {
    // grid-stride loop: any grid size covers any n (64-bit: n may exceed 2^31)
    for (long long i = blockIdx.x * (long long)BLOCK + threadIdx.x; i < n;
         i += (long long)gridDim.x * BLOCK) {
        store(&out[i], to_float(a[i]) + to_float(b[i]));
    }
}
