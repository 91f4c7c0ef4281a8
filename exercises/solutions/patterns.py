"""Solutions (and known-wrong answers) of lesson 21's exercises: patterns.block_scan.

Each wrong answer is a mistake students make in a first block scan, and its verdict must name
it (``SAYS``: the words its "not yet" must contain). ``ALTERNATIVES`` are correct answers
written differently (the warp totals scanned by warp 0 with shuffles; a Hillis-Steele scan of
the warp totals in shared memory with two buffers); every one must pass.
"""

_BLOCK_SCAN = r'''
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    __shared__ float totals[8];  // one per warp of the block
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long i = blockIdx.x * 256LL + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;  // past n: a 0, so every lane reaches the shuffles
    for (int offset = 1; offset < 32; offset *= 2) {
        const float below = __shfl_up_sync(0xffffffff, v, offset);
        if (lane >= offset) v += below;  // lanes below offset have nobody that far down
    }
    if (lane == 31) totals[warp] = v;  // lane 31 holds the warp's total
    __syncthreads();  // all 8 totals are in shared memory
    for (int w = 0; w < warp; ++w) v += totals[w];
    if (i < n) y[i] = v;
}
"""
'''


def _edit(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, old
    return source.replace(old, new)


_WARP0_SCANS = _edit(_BLOCK_SCAN, '''    __syncthreads();  // all 8 totals are in shared memory
    for (int w = 0; w < warp; ++w) v += totals[w];
''', '''    __syncthreads();  // all 8 totals are in shared memory
    if (warp == 0) {  // warp 0 turns the totals into their exclusive scan, with shuffles
        float t = lane < 8 ? totals[lane] : 0.0f;
        for (int offset = 1; offset < 8; offset *= 2) {
            const float below = __shfl_up_sync(0xffffffff, t, offset);
            if (lane >= offset) t += below;
        }
        const float before = __shfl_up_sync(0xffffffff, t, 1);
        if (lane < 8) totals[lane] = lane == 0 ? 0.0f : before;
    }
    __syncthreads();
    v += totals[warp];
''')

_TWO_BUFFERS = _edit(_BLOCK_SCAN, '''    __syncthreads();  // all 8 totals are in shared memory
    for (int w = 0; w < warp; ++w) v += totals[w];
''', '''    __syncthreads();  // all 8 totals are in shared memory
    // Hillis-Steele over the 8 totals, two buffers so that no step reads what it writes
    __shared__ float scanned[2][8];
    if (threadIdx.x < 8) scanned[0][threadIdx.x] = totals[threadIdx.x];
    __syncthreads();
    int from = 0;
    for (int offset = 1; offset < 8; offset *= 2) {
        if (threadIdx.x < 8) {
            const int t = threadIdx.x;
            const float left = t >= offset ? scanned[from][t - offset] : 0.0f;
            scanned[1 - from][t] = scanned[from][t] + left;
        }
        __syncthreads();
        from = 1 - from;
    }
    if (warp > 0) v += scanned[from][warp - 1];
''')

SOLUTIONS = {"patterns.block_scan": _BLOCK_SCAN}

WRONG = {"patterns.block_scan": {
    # the classic first scan: each thread's sum leaves its own value out
    "exclusive scan": _edit(_BLOCK_SCAN, "    if (i < n) y[i] = v;",
                            "    if (i < n) y[i] = v - x[i];"),
    # the warps scan, and the block step is forgotten
    "warps only": _edit(_BLOCK_SCAN, "    for (int w = 0; w < warp; ++w) v += totals[w];\n", ""),
    # w <= warp: the warp's own total added again
    "own warp's total twice": _edit(_BLOCK_SCAN, "w < warp;", "w <= warp;"),
    # no barrier between the totals' stores and their loads
    "no __syncthreads": _edit(_BLOCK_SCAN,
                              "    __syncthreads();  // all 8 totals are in shared memory\n", ""),
    # threads past n leave before the shuffles: the last warp's shuffles miss lanes
    "tail threads leave early": _edit(_BLOCK_SCAN,
                                      "    float v = i < n ? x[i] : 0.0f;",
                                      "    if (i >= n) return;\n    float v = x[i];"),
    # the tail is read past the end of x
    "reads past n": _edit(_BLOCK_SCAN, "float v = i < n ? x[i] : 0.0f;", "float v = x[i];"),
    # every thread stores, past n too
    "writes past n": _edit(_BLOCK_SCAN, "    if (i < n) y[i] = v;", "    y[i] = v;"),
    # the tile of block b starts at 0 of the array: every block scans the first tile
    "every block on tile 0": _edit(_BLOCK_SCAN, "blockIdx.x * 256LL + threadIdx.x",
                                   "(long long)threadIdx.x"),
    # `if (lane >= offset)` dropped: lanes below offset add what __shfl_up_sync gives back
    # for them (their own value)
    "no lane guard": _edit(_BLOCK_SCAN, "        if (lane >= offset) v += below;",
                           "        v += below;"),
    # the sums in int: exact on the integer cases, wrong on the floats (the float case's job)
    "int sums": _edit(_edit(_edit(_BLOCK_SCAN,
        "__shared__ float totals[8];", "__shared__ int totals[8];"),
        "float v = i < n ? x[i] : 0.0f;", "int v = i < n ? (int)x[i] : 0;"),
        "const float below", "const int below"),
    # the partial sums in half precision
    "__half sums": _edit(_edit(_edit(_BLOCK_SCAN,
        'BLOCK_SCAN_SOURCE = r"""\n', 'BLOCK_SCAN_SOURCE = r"""\n#include <cuda_fp16.h>\n'),
        "const float below = __shfl_up_sync(0xffffffff, v, offset);",
        "const float below = __half2float(__float2half(__shfl_up_sync(0xffffffff, v, offset)));"),
        "        if (lane >= offset) v += below;",
        "        if (lane >= offset) v = __half2float(__float2half(v + below));"),
    # a serial scan by thread 0 of each block: right sums, no shuffle, no parallelism
    "one thread per block": r'''
BLOCK_SCAN_SOURCE = r"""
extern "C" __global__ void block_scan(const float* __restrict__ x, float* __restrict__ y,
                                      long long n) {
    if (threadIdx.x != 0) return;
    float sum = 0.0f;
    for (long long i = blockIdx.x * 256LL; i < n && i < blockIdx.x * 256LL + 256; ++i) {
        sum += x[i];
        y[i] = sum;
    }
}
"""
''',
    "plain PyTorch": "import torch\n\nBLOCK_SCAN_SOURCE = torch.cumsum\n",
}}

SAYS = {"patterns.block_scan": {
    "exclusive scan": "exclusive scan",
    "warps only": "each warp scanned its own 32 values only",
    "own warp's total twice": "added its own total too",
    "no __syncthreads": "no barrier",
    "tail threads leave early": "already exited",
    "reads past n": "past the end of x",
    "writes past n": "past the end of y",
    "every block on tile 0": "n=257",
    "no lane guard": "differ",
    "__half sums": "differ",
    "int sums": "more than any order of float32 additions",
    "one thread per block": "no shuffle",
    "plain PyTorch": "expected CUDA source code",
}}

_SIXTH_STEP = ("one more shuffle step, offset 32: __shfl_up_sync by 32 gives every lane its own "
               "value back (no lane is 32 below another) and `lane >= 32` holds for none, so "
               "nothing is added")
EQUIVALENT: dict[str, dict[str, str]] = {"patterns.block_scan": {
    "constant: line 5: __shared__ float totals[8];  ->  __shared__ float totals[9];":
        "a ninth slot that no thread reads or writes (8 warps store into slots 0-7)",
    "bound: line 9: for (int offset = 1; offset < 32; offset *= 2) {  ->  "
    "for (int offset = 1; offset <= 32; offset *= 2) {": _SIXTH_STEP,
    "constant: line 9: for (int offset = 1; offset < 32; offset *= 2) {  ->  "
    "for (int offset = 1; offset < 33; offset *= 2) {": _SIXTH_STEP,
}}

ALTERNATIVES = {"patterns.block_scan": {
    "warp 0 scans the totals with shuffles": _WARP0_SCANS,
    "Hillis-Steele over the totals, two buffers": _TWO_BUFFERS,
}}
