"""Wrong answers to exercise cuda_gelu.silu, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "cuda_gelu.silu"
BLIND: dict[str, str] = {
        "alignment tested on x only, not on y": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long i = 4 * t;
    if (i >= n) return;
    // a float4 needs a 16-byte aligned address
    const bool aligned = reinterpret_cast<unsigned long long>(x) % 16 == 0;
    if (aligned && i + 4 <= n) {
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        for (long long j = i; j < n && j < i + 4; ++j) y[j] = x[j] / (1.0f + __expf(-x[j]));
    }
}
"""
''',
        "last whole group of four takes the scalar path (i + 4 < n)": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long i = 4 * t;
    if (i >= n) return;
    const bool aligned = (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);
    if (aligned && i + 4 < n) {  // all four exist
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        for (long long j = i; j < n && j < i + 4; ++j) y[j] = x[j] / (1.0f + __expf(-x[j]));
    }
}
"""
''',
        "scalar path writes all four elements, no j < n bound": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long i = 4 * t;
    if (i >= n) return;
    const bool aligned = (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);
    if (aligned && i + 4 <= n) {
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        // one at a time
#pragma unroll
        for (int k = 0; k < 4; ++k) y[i + k] = x[i + k] / (1.0f + __expf(-x[i + k]));
    }
}
"""
''',
        "32-bit thread index (4 * t overflows past 2^31 elements)": r'''
# ✏️ Exercise cuda_gelu.silu: edit this cell, run it, then run the check below
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = 4 * t;
    if (i >= n) return;
    const bool aligned = (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);
    if (aligned && i + 4 <= n) {
        float4 v = reinterpret_cast<const float4*>(x)[t];
        v.x = v.x / (1.0f + __expf(-v.x));
        v.y = v.y / (1.0f + __expf(-v.y));
        v.z = v.z / (1.0f + __expf(-v.z));
        v.w = v.w / (1.0f + __expf(-v.w));
        reinterpret_cast<float4*>(y)[t] = v;
    } else {
        for (int j = i; j < n && j < i + 4; ++j) y[j] = x[j] / (1.0f + __expf(-x[j]));
    }
}
"""
''',
    }
