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

_TRANSPOSE = r'''
TRANSPOSE_SOURCE = r"""
#define TILE 32
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[TILE][TILE + 1];  // +1: a tile column spreads over the 32 banks
    const long long r0 = blockIdx.y * (long long)TILE, c0 = blockIdx.x * (long long)TILE;
    // 8 rows of threads, 4 rows each: a fixed step the compiler unrolls, so each thread has its
    // 4 loads in flight at once (a loop over blockDim.y would issue them one at a time)
#pragma unroll
    for (int j = 0; j < TILE; j += 8) {  // in: threadIdx.x along x's row
        const int i = threadIdx.y + j;
        const long long r = r0 + i, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[i][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();  // the whole tile is in shared memory before anyone reads it
#pragma unroll
    for (int j = 0; j < TILE; j += 8) {  // out: threadIdx.x along y's row
        const int i = threadIdx.y + j;
        const long long c = c0 + i, r = r0 + threadIdx.x;  // y[c][r] = x[r][c]
        if (c < cols && r < rows) y[c * rows + r] = tile[threadIdx.x][i];
    }
}
"""
'''

_WARP_SUM = r'''
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const long long row = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp leaves: the shuffles below see all 32 lanes
    float sum = 0.0f;
    for (long long c = lane; c < cols; c += 32) sum += x[row * cols + c];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffff, sum, offset);
    if (lane == 0) y[row] = sum;
}
"""
'''


def _edit(source: str, old: str, new: str) -> str:
    assert old in source, old  # the solution changed: update its known-wrong answers
    return source.replace(old, new)


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
    "03.transpose": _TRANSPOSE,
    "03.warp_sum": _WARP_SUM,
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
    "03.transpose": {
        # the store's bound checks x's shape instead of y's: the edge tiles of a non-square
        # matrix lose elements
        "off-by-one edge": _edit(_TRANSPOSE, "if (c < cols && r < rows) y[c * rows + r]",
                                 "if (c < rows && r < cols) y[c * rows + r]"),
        # no bound on the store: the edge tiles write past the end of y
        "out-of-bounds write": _edit(_TRANSPOSE, "if (c < cols && r < rows) y[c * rows + r]",
                                     "y[c * rows + r]"),
        "missing __syncthreads": _edit(_TRANSPOSE, "    __syncthreads();", ""),
        # the naive transpose: coalesced reads, writes 4 * rows bytes apart
        "uncoalesced": r'''
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * 32LL + threadIdx.x;
    for (long long r = blockIdx.y * 32LL + threadIdx.y; r < blockIdx.y * 32LL + 32; r += 8)
        if (r < rows && c < cols) y[c * rows + r] = x[r * cols + c];
}
"""
''',
        "plain PyTorch": "TRANSPOSE_SOURCE = lambda x: x.t().contiguous()\n",
        "a constant": r'''
TRANSPOSE_SOURCE = r"""
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    __shared__ float tile[32][33];
    tile[threadIdx.y][threadIdx.x] = 0.0f;
    __syncthreads();
    const long long c = blockIdx.x * 32LL + threadIdx.y, r = blockIdx.y * 32LL + threadIdx.x;
    if (c < cols && r < rows) y[c * rows + r] = tile[threadIdx.x][threadIdx.y];
}
"""
''',
    },
    "03.warp_sum": {
        # the last column is never added
        "off-by-one edge": _edit(_WARP_SUM, "c < cols;", "c < cols - 1;"),
        # the extra warps of the last block go on and write y[rows], y[rows + 1], ...
        "out-of-bounds write": _edit(_edit(_WARP_SUM, "    if (row >= rows) return;", ""),
                                     "c < cols;", "c < cols && row < rows;"),
        # the lanes' partial sums meet in shared memory, without shuffles
        "no shuffles": _edit(_WARP_SUM, "    for (int offset = 16; offset > 0; offset /= 2) sum "
                             "+= __shfl_down_sync(0xffffffff, sum, offset);\n",
                             "    __shared__ float part[8][32];\n"
                             "    part[threadIdx.x / 32][lane] = sum;\n    __syncwarp();\n"
                             "    if (lane == 0) for (int l = 1; l < 32; ++l) "
                             "sum += part[threadIdx.x / 32][l];\n"),
        "plain PyTorch": "import torch\n\nWARP_SUM_SOURCE = torch.sum\n",
        "a constant": r'''
WARP_SUM_SOURCE = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ y,
                                        long long rows, long long cols) {
    const long long row = blockIdx.x * 8LL + threadIdx.x / 32;
    float sum = 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffff, sum, offset);
    if (row < rows && threadIdx.x % 32 == 0) y[row] = sum;
}
"""
''',
    },
}
