"""Solutions (and known-wrong answers) of lesson 05's exercises."""

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
    "cuda_gelu.silu": _SILU,
    "cuda_gelu.oob": '''
BUG_LINE = 7                     # `if (i > n) return;` lets thread i == n through
FIXED_LINE = "    if (i >= n) return;"
''',
    "cuda_gelu.index": '''
FIRST_BAD_BLOCK = 2**31 // 1024  # 2,097,152
I_BECOMES = -2**31
''',
    "cuda_gelu.transpose": _TRANSPOSE,
    "cuda_gelu.warp_sum": _WARP_SUM,
}

WRONG = {
    "cuda_gelu.silu": {
        # one element per thread: correct, but every access moves 4 bytes
        "one element per thread": '''
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    const long long first = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
    for (long long i = first; i < first + 4 && i < n; ++i) y[i] = x[i] / (1.0f + __expf(-x[i]));
}
"""
''',
        # no alignment test: a view such as x[1:] gets a misaligned float4 (a crash on a GPU)
        "no alignment test": _edit(_SILU, "if (aligned && first + 3 < n)", "if (first + 3 < n)"),
        # only x's alignment is tested: a misaligned y gets a misaligned float4 store
        "only x aligned": _edit(_SILU, "reinterpret_cast<unsigned long long>(x) |\n"
                                "                           reinterpret_cast<unsigned long long>"
                                "(y)) % 16", "reinterpret_cast<unsigned long long>(x)) % 16"),
        # the vector path for any group that starts before n: the last float4 runs past x and y
        "float4 past the end": _edit(_SILU, "first + 3 < n", "first < n"),
        # float4 only when n is a multiple of 4: right values, but an odd length goes one
        # element at a time everywhere (what the exercise is about, lost)
        "vector only when n % 4 == 0": _edit(_SILU, "if (aligned && first + 3 < n)",
                                             "if (aligned && n % 4 == 0 && first + 3 < n)"),
        # the tail loads a whole float4 and keeps the elements that exist: a read past the end
        # of x whose values are thrown away (compute-sanitizer sees it)
        "tail reads a float4 past x": _edit(
            _SILU, "    } else {\n",
            "    } else if (aligned && first < n) {\n"
            "        const float4 v = reinterpret_cast<const float4*>(x)[first / 4];\n"
            "        const float f[4] = {v.x, v.y, v.z, v.w};\n"
            "        for (long long i = first; i < n; ++i) y[i] = silu(f[i - first]);\n"
            "    } else {\n"),
        # exp(x) instead of exp(-x)
        "exp of +x": _edit(_SILU, "__expf(-v)", "__expf(v)"),
        # the one-at-a-time path does only its first element
        "tail of one element": _edit(
            _SILU, "for (long long i = first; i < first + 4 && i < n; ++i) y[i] = silu(x[i]);",
            "if (first < n) y[first] = silu(x[first]);"),
    },
    # the line compute-sanitizer points at, not the one that lets the thread through
    "cuda_gelu.oob": '''
BUG_LINE = 8
FIXED_LINE = "    if (i < n) y[i] = a * x[i];"
''',
    "cuda_gelu.index": '''
FIRST_BAD_BLOCK = 2**32 // 1024
I_BECOMES = 0
''',
    "cuda_gelu.transpose": {
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
        # the tile without its padding column: right values, but a warp reading a tile column
        # hits one bank 32 times (the statement's tile[32][33] is there to prevent it)
        "no padding (bank conflicts)": _edit(_TRANSPOSE, "tile[TILE][TILE + 1];",
                                             "tile[TILE][TILE];"),
        # no padding and the tile stored transposed: the conflicts move to the stores
        "conflicts on the stores": _edit(_edit(_edit(
            _TRANSPOSE, "tile[TILE][TILE + 1];", "tile[TILE][TILE];"),
            "tile[i][threadIdx.x] = x[r * cols + c]", "tile[threadIdx.x][i] = x[r * cols + c]"),
            "= tile[threadIdx.x][i];", "= tile[i][threadIdx.x];"),
        # the tile read back without swapping the thread axes: threadIdx.x walks y's rows, so
        # the stores of a warp lie 4 * rows bytes apart (uncoalesced)
        "strided stores": _edit(_edit(
            _TRANSPOSE, "const long long c = c0 + i, r = r0 + threadIdx.x;",
            "const long long c = c0 + threadIdx.x, r = r0 + i;"),
            "= tile[threadIdx.x][i];", "= tile[i][threadIdx.x];"),
        # threadIdx.x along x's rows on the way in: the loads are strided, the stores coalesced
        "strided loads": _edit(_edit(
            _TRANSPOSE, "const long long r = r0 + i, c = c0 + threadIdx.x;",
            "const long long r = r0 + threadIdx.x, c = c0 + i;"),
            "tile[i][threadIdx.x] = x[r * cols + c]", "tile[threadIdx.x][i] = x[r * cols + c]"),
        # the load checks the column only: the last tile reads rows past the end of x (those
        # values are never stored, so only compute-sanitizer sees it)
        "load reads past x": _edit(_TRANSPOSE, "if (r < rows && c < cols) tile[i]",
                                   "if (c < cols) tile[i]"),
        # the store's row bound moved by one: y[c][rows] is one past the end of row c
        "one past the end": _edit(_TRANSPOSE, "if (c < cols && r < rows) y[c * rows + r]",
                                  "if (c < cols && r <= rows) y[c * rows + r]"),
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
    "cuda_gelu.warp_sum": {
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
        # a mask of 16 lanes while all 32 call the shuffle: undefined behaviour that happens to
        # work on sm_90, where the mask is not enforced
        "partial shuffle mask": _edit(_WARP_SUM, "__shfl_down_sync(0xffffffff,",
                                      "__shfl_down_sync(0xffff,"),
        # the tree starts at offset 8: lane 0 adds the partial sums of lanes 0..15 only
        "lanes 0..15 only": _edit(_WARP_SUM, "int offset = 16;", "int offset = 8;"),
        # the running sum in 16 bits: a long row loses its low digits
        "__half accumulator": _edit(_edit(_edit(_edit(_edit(
            _WARP_SUM, 'WARP_SUM_SOURCE = r"""\n',
            'WARP_SUM_SOURCE = r"""\n#include <cuda_fp16.h>\n'),
            "float sum = 0.0f;", "__half sum = __float2half(0.0f);"),
            "sum += x[row * cols + c];", "sum = __hadd(sum, __float2half(x[row * cols + c]));"),
            "sum += __shfl_down_sync(0xffffffff, sum, offset);",
            "sum = __hadd(sum, __shfl_down_sync(0xffffffff, sum, offset));"),
            "y[row] = sum;", "y[row] = __half2float(sum);"),
        # each lane sums a contiguous chunk of the row: right sums, but at each step the 32
        # lanes read addresses a chunk apart (uncoalesced)
        "a chunk per lane": _edit(
            _WARP_SUM, "for (long long c = lane; c < cols; c += 32) sum += x[row * cols + c];",
            "const long long chunk = (cols + 31) / 32;\n"
            "    for (long long c = lane * chunk; c < (lane + 1) * chunk && c < cols; ++c) "
            "sum += x[row * cols + c];"),
        # the loop runs to a multiple of 32 and multiplies the extra reads by 0: the last row
        # reads past the end of x
        "reads past the row": _edit(
            _WARP_SUM, "c < cols; c += 32) sum += x[row * cols + c];",
            "c < (cols + 31) / 32 * 32; c += 32) sum += x[row * cols + c] * (c < cols);"),
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

# The mechanical mutants (exercises/mutants.py) that behave exactly like a solution: none in this
# lesson. The nearest, cuda_gelu.silu's one-at-a-time loop run to `i <= first + 4`, writes the same
# values, but makes five accesses per thread where four are due on misaligned tensors, which the
# GPU check counts (Nsight Compute); `first + 4 < n` sends one aligned group of four the slow way.
EQUIVALENT: dict[str, dict[str, str]] = {}
