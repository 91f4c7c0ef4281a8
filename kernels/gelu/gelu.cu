// GeLU (tanh approximation) as CUDA kernels, and the C++ wrappers that launch them.
//
//   gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//
// Two kernels:
//   * gelu_naive_kernel:      one element per thread, as many threads as elements;
//   * gelu_vectorized_kernel: 16-byte loads and stores (4 floats, 8 halves/bfloat16s per access),
//                             several per thread per step, a grid-stride loop (for a grid
//                             capped below n), and the tail (n not a multiple of the vector
//                             width) done element by element.
// Both compute in float32 and index with int64_t: 2^31 elements and more must not overflow.
// Built by setup.py (CUDAExtension) and by load_inline (course_utils.cuda_ext.build) from this
// same file; gelu_binding.cpp declares and binds the wrappers.

// Only the ATen pieces the wrappers use: <torch/extension.h> (pybind11, Python, all of torch)
// makes nvcc's host pass several times slower, and gelu_binding.cpp needs it anyway.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

// c10 headers only: ATen/cuda/CUDAContext.h pulls in cuBLAS/cuSPARSE headers, which a minimal
// CUDA toolkit (nvcc + runtime, as on the CI machine) does not have.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace {

// 0.5·x·(1 + tanh(u)) = x·sigmoid(2u) = x / (1 + exp(-2u)): one fast exponential (__expf,
// two instructions) and one fast division instead of tanhf (a few dozen instructions; with
// bfloat16 the kernel has only ~30 instructions per element before it stops being memory-bound
// on an H100/H200). Large |x| gives no NaN: u -> -inf makes exp(-2u) = inf and x / inf = 0
// (__fdividef returns 0 for a denominator above 2^126), u -> +inf makes it x / 1 = x.
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCubic = 0.044715f;
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return __fdividef(x, 1.0f + __expf(-2.0f * u));
}

// float32 in registers whatever the storage type.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__global__ void gelu_naive_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  // blockIdx.x * blockDim.x is computed in 64 bits: in 32 bits it wraps past 2^31 elements.
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_float<T>(gelu_tanh(to_float(x[i])));
}

// 16 bytes of T: one LDG.128 / STG.128 per access.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// Each thread loads kUnroll vectors (coalesced: neighbouring threads, neighbouring vectors)
// before computing any, so several 16-byte loads per thread are in flight to cover DRAM
// latency. kUnroll is a template parameter (a register array needs a compile-time size); the
// wrapper picks 1, 2 or 4 at run time.
template <typename T, int kUnroll>
__global__ void gelu_vectorized_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  using V = Vec16<T>;
  constexpr int kWidth = V::kSize;
  const int64_t n_vec = n / kWidth;  // whole 16-byte vectors
  const int64_t chunk = static_cast<int64_t>(blockDim.x) * kUnroll;  // vectors per block step
  const int64_t stride = static_cast<int64_t>(gridDim.x) * chunk;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  for (int64_t base = blockIdx.x * chunk + threadIdx.x; base < n_vec; base += stride) {
    V in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * static_cast<int64_t>(blockDim.x);
      if (i < n_vec) in[u] = xv[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * static_cast<int64_t>(blockDim.x);
      if (i < n_vec) {
        V out;
#pragma unroll
        for (int k = 0; k < kWidth; ++k) {
          out.v[k] = from_float<T>(gelu_tanh(to_float(in[u].v[k])));
        }
        yv[i] = out;
      }
    }
  }
  // the tail: fewer than kWidth elements after the last whole vector
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = n_vec * kWidth + thread; i < n; i += threads) {
    y[i] = from_float<T>(gelu_tanh(to_float(x[i])));
  }
}

// torch dtype -> CUDA storage type
template <typename F>
void dispatch_float_types(at::ScalarType dtype, F&& launch) {
  switch (dtype) {
    case at::kFloat: launch(float{}); break;
    case at::kHalf: launch(__half{}); break;
    case at::kBFloat16: launch(__nv_bfloat16{}); break;
    default: TORCH_CHECK(false, "gelu: unreachable dtype ", dtype);
  }
}

// The checks are ordered dtype, layout, device so that each can be shown on a CPU as well.
void check_input(const at::Tensor& x, const char* fn) {
  TORCH_CHECK(x.defined(), fn, ": x is an undefined tensor");
  const auto dtype = x.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, fn,
              ": x must be float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(x.is_contiguous(), fn, ": x must be contiguous (call .contiguous() first)");
  TORCH_CHECK(x.is_cuda(), fn, ": x must be a CUDA tensor, got a tensor on ", x.device());
}

constexpr int kThreads = 256;

constexpr int64_t kDefaultThreads = 128;
constexpr int64_t kDefaultUnroll = 2;

int sm_count() {
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

at::Tensor gelu_naive(at::Tensor x) {
  check_input(x, "gelu_naive");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= INT32_MAX, "gelu_naive: ", n, " elements need more blocks than a grid has");
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_float_types(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    gelu_naive_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();  // a bad launch configuration is reported here, not later
  return y;
}

// Launch configuration, each <= 0 for its default (tuned on an H200 at 2^28 elements):
//   threads:       threads per block (a multiple of 32, at most 1024);
//   unroll:        16-byte vectors per thread per loop step (1, 2 or 4);
//   blocks_per_sm: cap on the grid, in blocks per SM; the grid-stride loop covers the rest.
//                  Default: no cap, a grid that covers n in one step.
at::Tensor gelu_vectorized(at::Tensor x, int64_t threads, int64_t unroll, int64_t blocks_per_sm) {
  // every check before any object that needs cleaning up exists
  check_input(x, "gelu_vectorized");
  if (threads <= 0) threads = kDefaultThreads;
  if (unroll <= 0) unroll = kDefaultUnroll;
  TORCH_CHECK(threads % 32 == 0 && threads <= 1024, "gelu_vectorized: threads must be a "
              "multiple of 32 up to 1024, got ", threads);
  TORCH_CHECK(unroll == 1 || unroll == 2 || unroll == 4, "gelu_vectorized: unroll must be 1, 2 "
              "or 4, got ", unroll);
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  // A view that starts mid-allocation may not be 16-byte aligned: the naive kernel handles it.
  if (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 != 0) {
    return gelu_naive(x);
  }
  const int64_t width = 16 / x.element_size();
  const int64_t per_block = threads * unroll * width;
  int64_t blocks = std::max<int64_t>(1, (n + per_block - 1) / per_block);
  if (blocks_per_sm > 0) blocks = std::min<int64_t>(blocks, blocks_per_sm * sm_count());
  blocks = std::min<int64_t>(blocks, INT32_MAX);  // the grid-stride loop covers the rest
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_float_types(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>(blocks)), block(static_cast<unsigned>(threads));
    const auto* in = static_cast<const T*>(x.data_ptr());
    auto* out = static_cast<T*>(y.data_ptr());
    if (unroll == 1) gelu_vectorized_kernel<T, 1><<<grid, block, 0, stream>>>(in, out, n);
    if (unroll == 2) gelu_vectorized_kernel<T, 2><<<grid, block, 0, stream>>>(in, out, n);
    if (unroll == 4) gelu_vectorized_kernel<T, 4><<<grid, block, 0, stream>>>(in, out, n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
