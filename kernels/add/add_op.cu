// Elementwise add for the load_inline build: the CUDA half (kernel and launcher).
//
// add_op.cpp, compiled by the host compiler, declares the PyTorch operator, checks its inputs
// and calls launch_add. Keeping every TORCH_CHECK (every C++ exception) in the host compiler's
// file and out of nvcc's is the usual split for extensions (notebook 05's GeLU does the same).
// Compiling either file means compiling PyTorch's headers: that is where load_inline's tens of
// seconds go.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

constexpr int BLOCK = 256;

// at::Half and at::BFloat16 convert to float and back; the sum is rounded once, like a + b.
template <typename scalar_t>
__global__ void __launch_bounds__(BLOCK)
add_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
           scalar_t* __restrict__ out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        out[i] = static_cast<scalar_t>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
    }
}

// a, b, out: contiguous, same shape, dtype float32/float64/float16/bfloat16 (add_op.cpp checks).
// Returns the launch's error code instead of throwing.
cudaError_t launch_add(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
    const int64_t n = a.numel();
    if (n == 0) return cudaSuccess;
    const int64_t blocks = std::min<int64_t>((n + BLOCK - 1) / BLOCK, 65535LL * 32);
    auto stream = c10::cuda::getCurrentCUDAStream();
    switch (a.scalar_type()) {
#define COURSE_LAUNCH(TYPE, scalar_t)                                                          \
    case at::ScalarType::TYPE:                                                                 \
        add_kernel<scalar_t><<<blocks, BLOCK, 0, stream>>>(                                    \
            a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);      \
        break;
        COURSE_LAUNCH(Float, float)
        COURSE_LAUNCH(Double, double)
        COURSE_LAUNCH(Half, at::Half)
        COURSE_LAUNCH(BFloat16, at::BFloat16)
#undef COURSE_LAUNCH
        default:
            return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
