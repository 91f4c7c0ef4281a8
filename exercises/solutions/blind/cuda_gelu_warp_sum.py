"""Wrong answers to exercise cuda_gelu.warp_sum, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "cuda_gelu.warp_sum"
BLIND: dict[str, str] = {
        "shuffle mask from __activemask() instead of the full warp": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += xr[c];
    const unsigned mask = __activemask();
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(mask, s, offset);
    if (lane == 0) y[row] = s;
}
"""
''',
        "row guard is row > rows: the last block writes y[rows]": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row > rows) return;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += x[row * cols + c];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) y[row] = s;
}
"""
''',
        "xor butterfly, then every lane stores the row's sum": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row >= rows) return;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += x[row * cols + c];
    // after the butterfly every lane holds the whole sum
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    y[row] = s;
}
"""
''',
        "lanes with no column return before the shuffles": r'''
# ✏️ Exercise cuda_gelu.warp_sum: edit this cell, run it, then run the check below
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row = blockIdx.x * 8LL + warp;
    if (row >= rows) return;
    if (cols > 0 && lane >= cols) return;  // nothing to add for this lane
    float s = 0.0f;
    for (long long c = lane; c < cols; c += 32) s += x[row * cols + c];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) y[row] = s;
}
"""
''',
    }
