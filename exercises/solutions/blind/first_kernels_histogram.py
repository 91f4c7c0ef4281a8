"""Wrong answers to exercise first_kernels.histogram, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "first_kernels.histogram"
BLIND: dict[str, str] = {
        "only bins below blockDim.x are zeroed (one pass, not a loop)": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    if (threadIdx.x < bins) local[threadIdx.x] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
        "negative values not ignored (only v < bins tested)": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
        "no barrier between the zeroing and the counting": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
        "one element per thread, no grid-stride loop": r'''
# ✏️ Exercise first_kernels.histogram: edit this cell, run it, then run the check below
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        const int c = local[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
"""
''',
    }
