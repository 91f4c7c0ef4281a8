"""Solutions (and known-wrong answers) of lesson 03's exercises."""

_SILU = '''
SILU_SOURCE = r"""
__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long first = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
    const bool aligned = ((reinterpret_cast<unsigned long long>(x) |
                           reinterpret_cast<unsigned long long>(y)) % 16) == 0;
    if (aligned && first + 3 < n) {
        float4 v = reinterpret_cast<const float4*>(x)[first / 4];
        v.x = silu(v.x); v.y = silu(v.y); v.z = silu(v.z); v.w = silu(v.w);
        reinterpret_cast<float4*>(y)[first / 4] = v;
    } else {
        for (long long i = first; i < first + 4 && i < n; ++i) y[i] = silu(x[i]);
    }
}
"""
'''

SOLUTIONS = {
    "03.silu": _SILU,
    "03.oob": '''
BUG_LINE = 7                     # `if (i > n) return;` lets thread i == n through
FIXED_LINE = "    if (i >= n) return;"
''',
    "03.index": '''
FIRST_BAD_BLOCK = 2**31 // 1024  # 2,097,152
I_BECOMES = -2**31
''',
}

WRONG = {
    # one element per thread: correct, but every access moves 4 bytes
    "03.silu": '''
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long first = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
    for (long long i = first; i < first + 4 && i < n; ++i) y[i] = x[i] / (1.0f + __expf(-x[i]));
}
"""
''',
    # the line compute-sanitizer points at, not the one that lets the thread through
    "03.oob": '''
BUG_LINE = 8
FIXED_LINE = "    if (i < n) y[i] = a * x[i];"
''',
    "03.index": '''
FIRST_BAD_BLOCK = 2**32 // 1024
I_BECOMES = 0
''',
}
