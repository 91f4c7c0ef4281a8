"""Wrong answers to exercise cuda_gelu.transpose, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "cuda_gelu.transpose"
BLIND: dict[str, str] = {
        "tile declared [32][32]: no padding column (bank conflicts)": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][32];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long yr = c0 + j, yc = r0 + threadIdx.x;  // y's row is a column of x
        if (yr < cols && yc < rows) y[yr * rows + yc] = tile[threadIdx.x][j];
    }
}
"""
''',
        "no __syncthreads between the tile's stores and loads": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long yr = c0 + j, yc = r0 + threadIdx.x;
        if (yr < cols && yc < rows) y[yr * rows + yc] = tile[threadIdx.x][j];
    }
}
"""
''',
        "output guard compares y's row with rows and y's column with cols (right only when square)": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long yr = c0 + j, yc = r0 + threadIdx.x;
        if (yr < rows && yc < cols) y[yr * rows + yc] = tile[threadIdx.x][j];
    }
}
"""
''',
        "transposes in the global index on the way out: strided stores": r'''
# ✏️ Exercise cuda_gelu.transpose: edit this cell, run it, then run the check below
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    const long long c0 = blockIdx.x * 32LL, r0 = blockIdx.y * 32LL;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const long long r = r0 + j, c = c0 + threadIdx.x;  // element (r, c) of x goes to y[c][r]
        if (r < rows && c < cols) y[c * rows + r] = tile[j][threadIdx.x];
    }
}
"""
''',
    }
