"""Solutions (and known-wrong answers) of lesson 04's exercises."""

_FLIP = r'''
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // along a row
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;  // down the rows
    if (r < rows && c < cols) y[r * cols + c] = x[(rows - 1 - r) * cols + c];
}
"""
'''

_HISTOGRAM = r'''
HISTOGRAM_SOURCE = r"""
constexpr int MAX_BINS = 1024;  // bins <= MAX_BINS

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    __shared__ int local[MAX_BINS];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();  // every bin is zero before anyone counts
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (0 <= v && v < bins) atomicAdd(&local[v], 1);
    }
    __syncthreads();  // every count is in before the flush reads the bins
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        if (local[b] > 0) atomicAdd(&counts[b], local[b]);
    }
}
"""
'''


def _edit(source: str, old: str, new: str) -> str:
    assert old in source, old  # the solution changed: update its known-wrong answers
    return source.replace(old, new)


SOLUTIONS = {"first_kernels.flip_rows": _FLIP, "first_kernels.histogram": _HISTOGRAM}

WRONG = {
    "first_kernels.flip_rows": {
        # rows - r instead of rows - 1 - r: row 0 reads the row past the end of x
        "off by one row": _edit(_FLIP, "(rows - 1 - r)", "(rows - r)"),
        # only the column is guarded: the last block row reads before x and writes past y
        "one guard": _edit(_FLIP, "if (r < rows && c < cols)", "if (c < cols)"),
        # || for &&: threads outside one axis still load and store
        "|| for &&": _edit(_FLIP, "r < rows && c < cols", "r < rows || c < cols"),
        # the row stride taken as rows: right on square matrices only
        "row stride = rows": _edit(_FLIP, "y[r * cols + c] = x[(rows - 1 - r) * cols + c]",
                                   "y[r * rows + c] = x[(rows - 1 - r) * rows + c]"),
        # threadIdx.x down the rows: with this launch the grid covers the wrong rectangle, and
        # where it covers the matrix the 32 threads of a warp read 32 rows (uncoalesced)
        "x down the rows": _edit(_edit(
            _FLIP, "const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
            "const long long c = blockIdx.y * (long long)blockDim.y + threadIdx.y;"),
            "const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;",
            "const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;"),
        # the columns flipped as well (a rotation by 180 degrees)
        "columns flipped too": _edit(_FLIP, "x[(rows - 1 - r) * cols + c]",
                                     "x[(rows - 1 - r) * cols + cols - 1 - c]"),
        # a 1-D index over the 2-D launch: only the first block row's threads ever run it
        "1-D index": r'''
FLIP_SOURCE = r"""
extern "C" __global__ void flip_rows(const float* __restrict__ x, float* __restrict__ y,
                                     long long rows, long long cols) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] = x[(rows - 1 - i / cols) * cols + i % cols];
}
"""
''',
        "plain PyTorch": "FLIP_SOURCE = lambda x: x.flip(0)\n",
    },
    "first_kernels.histogram": {
        # every element a global atomic: right counts, no shared histogram
        "global atomics only": r'''
HISTOGRAM_SOURCE = r"""
extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const int v = x[i];
        if (0 <= v && v < bins) atomicAdd(&counts[v], 1);
    }
}
"""
''',
        # no barrier after the zeroing: a fast warp counts into a bin a slow one then zeroes
        "no barrier after zeroing": _edit(
            _HISTOGRAM, "    __syncthreads();  // every bin is zero before anyone counts\n", ""),
        # no barrier before the flush: a bin is flushed while other warps still count into it
        "no barrier before the flush": _edit(
            _HISTOGRAM, "    __syncthreads();  // every count is in before the flush reads the "
            "bins\n", ""),
        # both counters: the shared histogram and a global atomic per element (double counts)
        "global atomic per element too": _edit(
            _HISTOGRAM, "if (0 <= v && v < bins) atomicAdd(&local[v], 1);",
            "if (0 <= v && v < bins) { atomicAdd(&local[v], 1); atomicAdd(&counts[v], 1); }"),
        # every thread flushes every bin: blockDim.x times each count
        "every thread flushes every bin": _edit(
            _HISTOGRAM, "for (int b = threadIdx.x; b < bins; b += blockDim.x) {",
            "for (int b = 0; b < bins; ++b) {"),
        # no range test on the value: a negative value or one >= bins counts outside local
        "no value guard": _edit(_HISTOGRAM, "if (0 <= v && v < bins) atomicAdd(&local[v], 1);",
                                "atomicAdd(&local[v], 1);"),
        # only bins below blockDim.x are zeroed: with 1000 bins, the others start from garbage
        "zeroes blockDim.x bins": _edit(
            _HISTOGRAM, "for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;",
            "if (threadIdx.x < bins) local[threadIdx.x] = 0;"),
        # one element per thread with a capped grid: elements past 64 * 256 are never counted
        "no grid-stride loop": _edit(
            _HISTOGRAM, "for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
            "i < n; i += stride) {",
            "if (const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
            "i < n) {"),
        # the flush runs one bin past the end: counts[bins] is written
        "flush to bins inclusive": _edit(
            _HISTOGRAM, "for (int b = threadIdx.x; b < bins; b += blockDim.x) {",
            "for (int b = threadIdx.x; b <= bins; b += blockDim.x) {"),
        # a plain store instead of an atomic flush: blocks overwrite each other's counts
        "store instead of atomic flush": _edit(
            _HISTOGRAM, "if (local[b] > 0) atomicAdd(&counts[b], local[b]);",
            "if (local[b] > 0) counts[b] = local[b];"),
        "plain PyTorch": "import torch\n\nHISTOGRAM_SOURCE = torch.bincount\n",
    },
}

# mutants that behave exactly like the solution, and why
EQUIVALENT = {"first_kernels.histogram": {
    "bound: line 17: if (local[b] > 0) atomicAdd(&counts[b], local[b]);  ->  "
    "if (local[b] >= 0) atomicAdd(&counts[b], local[b]);":
        "a bin is never negative, so this adds every bin; adding an empty bin adds 0: the same "
        "counts, a few more atomics (the guard only saves them on empty bins)",
    "guard dropped: line 17: if (local[b] > 0) atomicAdd(&counts[b], local[b]);  ->  "
    "atomicAdd(&counts[b], local[b]);":
        "adding an empty bin adds 0: the same counts, a few more atomics",
    "constant: line 3: constexpr int MAX_BINS = 1024;  ->  constexpr int MAX_BINS = 1025;":
        "one more shared int than bins <= 1024 can use: never read, never written"}}
