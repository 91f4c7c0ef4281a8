// Elementwise add as a PyTorch operator, built with load_inline (course_utils.cuda_ext.build).
//
// TORCH_LIBRARY declares the op torch.ops.course_add.add(Tensor a, Tensor b) -> Tensor, and
// TORCH_LIBRARY_IMPL gives it a CUDA implementation: the dispatcher then routes CUDA tensors here,
// torch.compile and torch.library see a real op, and no pybind11 module is needed
// (is_python_module=False). Compiling this file means compiling PyTorch's headers: that is where
// load_inline's tens of seconds go.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

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

at::Tensor add_cuda(const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "add: b expected the shape of a ", a.sizes(), ", got ",
                b.sizes());
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "add: b expected the dtype of a");
    TORCH_CHECK(a.device() == b.device(), "add: b expected the device of a");
    const c10::cuda::CUDAGuard guard(a.device());
    auto ac = a.contiguous(), bc = b.contiguous();
    auto out = at::empty_like(ac);
    const int64_t n = ac.numel();
    if (n == 0) return out;
    const int64_t blocks = std::min<int64_t>((n + BLOCK - 1) / BLOCK, 65535LL * 32);
    auto stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, ac.scalar_type(), "add_cuda", [&] {
        add_kernel<scalar_t><<<blocks, BLOCK, 0, stream>>>(
            ac.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

TORCH_LIBRARY(course_add, m) {
    m.def("add(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(course_add, CUDA, m) {
    m.impl("add", &add_cuda);
}
