// Elementwise add as a PyTorch operator: the host half, compiled by the host compiler.
//
// TORCH_LIBRARY declares torch.ops.course_add.add(Tensor a, Tensor b) -> Tensor and
// TORCH_LIBRARY_IMPL gives it a CUDA implementation: the dispatcher routes CUDA tensors here,
// torch.compile and torch.library see a real op, and no pybind11 module is needed
// (load_inline(..., is_python_module=False)). The kernel is in add_op.cu.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <torch/library.h>

cudaError_t launch_add(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);

at::Tensor add_cuda(const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "add: b expected the shape of a ", a.sizes(), ", got ",
                b.sizes());
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "add: b expected the dtype of a (",
                a.scalar_type(), "), got ", b.scalar_type());
    TORCH_CHECK(a.device() == b.device(), "add: b expected the device of a (", a.device(),
                "), got ", b.device());
    const auto dtype = a.scalar_type();
    TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
                    dtype == at::kBFloat16,
                "add: a expected float32, float64, float16 or bfloat16, got ", dtype);
    const c10::cuda::CUDAGuard guard(a.device());
    auto ac = a.contiguous(), bc = b.contiguous();
    auto out = at::empty_like(ac);
    const cudaError_t err = launch_add(ac, bc, out);
    TORCH_CHECK(err == cudaSuccess, "add: kernel launch failed: ", cudaGetErrorString(err));
    return out;
}

TORCH_LIBRARY(course_add, m) {
    m.def("add(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(course_add, CUDA, m) {
    m.impl("add", &add_cuda);
}
