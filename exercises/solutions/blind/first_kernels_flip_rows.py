"""Wrong answers to exercise first_kernels.flip_rows, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "first_kernels.flip_rows"
BLIND: dict[str, str] = {
        "guards joined with && (a thread outside one axis only still runs)": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    if (r >= rows && c >= cols) return;
    y[r * cols + c] = x[(rows - 1 - r) * cols + c];
}
"""
''',
        "flips against the padded grid's row count (right only when rows % 8 == 0)": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    const long long last = (long long)gridDim.y * blockDim.y - 1;  // the grid's last row
    if (r >= rows || c >= cols) return;
    const long long src = last - r;
    if (src < 0 || src >= rows) return;
    y[r * cols + c] = x[src * cols + c];
}
"""
''',
        "element offsets in 32-bit int (overflow past 2^31 elements)": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    const int dst = r * (int)cols + c;
    const int src = ((int)rows - 1 - r) * (int)cols + c;
    y[dst] = x[src];
}
"""
''',
        "only the column is guarded": r'''
# ✏️ Exercise first_kernels.flip_rows: edit this cell, run it, then run the check below
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    if (c >= cols) return;  // rows: the grid covers them
    y[r * cols + c] = x[(rows - 1 - r) * cols + c];
}
"""
''',
    }
