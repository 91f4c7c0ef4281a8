// Python bindings of the CUDA GeLU wrappers defined in gelu.cu.
//
// This file holds only declarations and the binding, so it compiles with the host compiler
// (no nvcc); setup.py and load_inline both build it next to gelu.cu. TORCH_EXTENSION_NAME is
// the module name each build chooses.

#include <torch/extension.h>

at::Tensor gelu_naive(at::Tensor x);
at::Tensor gelu_vectorized(at::Tensor x, int64_t threads, int64_t unroll, int64_t blocks_per_sm);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "GeLU (tanh approximation) CUDA kernels: float32, float16, bfloat16";
  m.def("gelu_naive", &gelu_naive, "GeLU, one element per thread", pybind11::arg("x"));
  m.def("gelu_vectorized", &gelu_vectorized,
        "GeLU, 16-byte loads/stores and a grid-stride loop. Launch configuration (<= 0: the "
        "default): threads per block, 16-byte vectors per thread per step (1, 2, 4), a cap on "
        "blocks per SM",
        pybind11::arg("x"), pybind11::arg("threads") = 0, pybind11::arg("unroll") = 0,
        pybind11::arg("blocks_per_sm") = 0);
}
