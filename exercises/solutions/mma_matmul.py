"""Solutions (and known-wrong answers) of lesson 07's exercises."""

SOLUTIONS = {
    "mma_matmul.swizzle": '''
def swizzled_offset(row, chunk, row_bytes):
    chunks = row_bytes // 16
    return row * row_bytes + ((chunk ^ ((row // (8 // chunks)) % chunks)) << 4)
''',
}

WRONG = {
    # XOR with row % chunks: right for 128-byte rows, a 2-way conflict for 64-byte rows, where
    # two consecutive rows already sit in different halves of the 8 bank groups
    "mma_matmul.swizzle": '''
def swizzled_offset(row, chunk, row_bytes):
    chunks = row_bytes // 16
    return row * row_bytes + ((chunk ^ (row % chunks)) << 4)
''',
}

# -- kernels the student writes ----------------------------------------------------------------

SOLUTIONS["mma_matmul.smem"] = '''
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // consecutive tx read consecutive k: both loads are coalesced (A and B are K-major)
        const int k = k0 + tx;
        as[ty][tx] = (row < M && k < K) ? a[(long long)row * K + k] : 0.0f;
        bs[ty][tx] = (col0 + ty < N && k < K) ? b[(long long)(col0 + ty) * K + k] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += as[ty][kk] * bs[tx][kk];
        __syncthreads();
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
"""
'''


def _smem(old: str, new: str) -> str:
    """The solution of mma_matmul.smem with one piece changed: a known-wrong answer."""
    source = SOLUTIONS["mma_matmul.smem"]
    assert old in source, old
    return source.replace(old, new)


WRONG["mma_matmul.smem"] = {
    # k <= K: the last slice reads one element past each row of A and B (the next row's first)
    "off-by-one edge": _smem("k < K) ? a", "k <= K) ? a").replace("k < K) ? b", "k <= K) ? b"),
    # the store without its guard: the threads of the edge tiles write outside C
    "out-of-bounds write": _smem("if (row < M && col < N) c[", "c["),
    # no barrier after the stores: a thread reads as/bs before its neighbours have written them
    "missing __syncthreads": _smem("""        __syncthreads();
#pragma unroll""", """#pragma unroll"""),
    # no barrier after the loads: a fast thread overwrites the tile others are still reading
    "missing second __syncthreads": _smem("""acc += as[ty][kk] * bs[tx][kk];
        __syncthreads();""", "acc += as[ty][kk] * bs[tx][kk];"),
    # the right values, from PyTorch: no kernel at all
    "plain PyTorch": '''
import torch

def SMEM_LOOP(a, b):
    return a @ b
''',
    # a kernel that compiles and writes C, but computes nothing
    "a constant": '''
SMEM_LOOP = r"""
    if (row < M && col < N) c[(long long)row * N + col] = 0.0f;
"""
''',
    # step 1 again: every thread reads global memory, nothing is staged
    "no shared memory": '''
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        if (row < M && col < N) acc += a[(long long)row * K + k] * b[(long long)col * K + k];
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
"""
''',
    # the property taught: the right tiles, but tx walks down a column of A and of B (16 rows
    # apart, a 32-byte sector each) instead of along K: uncoalesced
    "uncoalesced loads": _smem("as[ty][tx] = (row < M && k < K) ? a[(long long)row * K + k] : "
                               """0.0f;
        bs[ty][tx] = (col0 + ty < N && k < K) ? b[(long long)(col0 + ty) * K + k] : 0.0f;""",
                               """as[tx][ty] = (row0 + tx < M && k0 + ty < K)
            ? a[(long long)(row0 + tx) * K + k0 + ty] : 0.0f;
        bs[tx][ty] = (col0 + tx < N && k0 + ty < K)
            ? b[(long long)(col0 + tx) * K + k0 + ty] : 0.0f;"""),
    # K not a multiple of the tile: only whole slices, the ragged end of K is never added
    "ragged K dropped": _smem("k0 < K; k0 += TILE", "k0 + TILE <= K; k0 += TILE"),
    # M and N exchanged in the store's guard: right for square C only
    "M and N swapped in the guard": _smem("if (row < M && col < N)", "if (row < N && col < M)"),
    # C stored transposed (column-major): the right values in the wrong places, past the end
    # of C's tile for ragged shapes
    "C stored transposed": _smem("c[(long long)row * N + col]", "c[(long long)col * M + row]"),
}

SOLUTIONS["mma_matmul.swizzle_cuda"] = '''
OFFSETS = r"""
// chunk c of row r lives at chunk c ^ ((r / (8 / CHUNKS)) % CHUNKS) of that row: the 8 rows of
// an ldmatrix phase then start in 8 different bank groups
__host__ __device__ constexpr int swizzle(int row, int chunk) {
    return chunk ^ ((row / (8 / CHUNKS)) % CHUNKS);
}

__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + swizzle(row, chunk) * 16;
}

__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    return (16 * warp + lane % 16) * ROW_BYTES + swizzle(16 * warp + lane % 16,
                                                         2 * step + lane / 16) * 16;
}
"""
'''


def _swizzle(old: str, new: str) -> str:
    source = SOLUTIONS["mma_matmul.swizzle_cuda"]
    assert old in source, old
    return source.replace(old, new)


WRONG["mma_matmul.swizzle_cuda"] = {
    # the copy swizzled, ldmatrix still reading the plain layout: the wrong elements
    "loads not swizzled": _swizzle("""swizzle(16 * warp + lane % 16,
                                                         2 * step + lane / 16) * 16""",
                                   "(2 * step + lane / 16) * 16"),
    # XOR with row % CHUNKS: rows r and r + 4 collide, a 2-way conflict with 64-byte rows
    "row % chunks": _swizzle("chunk ^ ((row / (8 / CHUNKS)) % CHUNKS)", "chunk ^ (row % CHUNKS)"),
    # 128 bytes a row where the tile has 64: half the stores land outside the tile
    "out-of-bounds write": _swizzle("row * ROW_BYTES + swizzle", "row * 128 + swizzle").replace(
        "(16 * warp + lane % 16) * ROW_BYTES", "(16 * warp + lane % 16) * 128"),
    "a constant": '''
OFFSETS = r"""
__host__ __device__ constexpr int store_offset(int row, int chunk) { return 0; }
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) { return 0; }
"""
''',
    "plain PyTorch": '''
def OFFSETS(row, chunk):
    return row * 64 + 16 * (chunk ^ (row // 2 % 4))
''',
    # the bank conflicts moved from the loads to the stores: a chunk-major tile (all rows of
    # chunk 0, then chunk 1, ...) makes each ldmatrix phase read 128 contiguous bytes, but the
    # copy's 8 threads of a phase store 2 rows x 4 chunks into 2 bank groups (a 4-way conflict)
    "conflicts moved to the stores": '''
OFFSETS = r"""
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return (chunk * ROWS + row) * 16;
}

__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    return ((2 * step + lane / 16) * ROWS + 16 * warp + lane % 16) * 16;
}
"""
''',
    # XOR with (row / 8) % CHUNKS: the 8 rows of a phase share one XOR, a 4-way conflict
    "XOR of every 8 rows": _swizzle("chunk ^ ((row / (8 / CHUNKS)) % CHUNKS)",
                                    "chunk ^ ((row / 8) % CHUNKS)"),
    # one chunk further on both sides: consistent, but the last chunk of every row lands in
    # the next row and the tile's last one 16 bytes past its end
    "one chunk past the end": _swizzle("row * ROW_BYTES + swizzle(row, chunk) * 16",
                                       "row * ROW_BYTES + (swizzle(row, chunk) + 1) * 16").replace(
        "2 * step + lane / 16) * 16", "2 * step + lane / 16) * 16 + 16"),
    # ldmatrix pointed one row down: warp 3's lane 15 reads row 64, past the tile
    "ldmatrix one row down": _swizzle("return (16 * warp + lane % 16) * ROW_BYTES",
                                      "return (16 * warp + lane % 16 + 1) * ROW_BYTES"),
}

SOLUTIONS["mma_matmul.triton_dot"] = '''
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rows < M)[:, None] & (k0 + ks < K)[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=(k0 + ks < K)[:, None] & (cols < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(rows < M)[:, None] & (cols < N)[None, :])


def matmul(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K)
    return c
'''


def _dot(old: str, new: str) -> str:
    source = SOLUTIONS["mma_matmul.triton_dot"]
    assert old in source, old
    return source.replace(old, new)


WRONG["mma_matmul.triton_dot"] = {
    # the grid rounds down: the ragged edge tiles are never computed (C keeps torch.empty's bytes)
    "off-by-one edge": _dot("grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))",
                            "grid = (max(m // BLOCK_M, 1), max(n // BLOCK_N, 1))"),
    # the kernel given, but the result from PyTorch
    "plain PyTorch": _dot("    matmul_kernel[grid](", "    return a @ b\n    matmul_kernel[grid]("),
    # a kernel that runs and stores, but only zeros
    "a constant": _dot("tl.store(c_ptrs, acc.to(", "tl.store(c_ptrs, (0.0 * acc).to("),
    # the sum on the CUDA cores: right values, no tensor cores
    "no tl.dot": _dot("acc = tl.dot(a, b, acc)",
                      "acc += tl.sum(a[:, :, None].to(tl.float32) * b[None, :, :].to(tl.float32), "
                      "axis=1)"),
    # fp32 out whatever the inputs: right values, wrong dtype
    "wrong dtype": _dot("c = torch.empty((m, n), dtype=a.dtype", "c = torch.empty((m, n), "
                        "dtype=torch.float32"),
    # memory safety: the K slice unmasked (rows and columns only): the last tile reads past K,
    # past the end of A's last row and of B
    "no K mask": _dot("mask=(rows < M)[:, None] & (k0 + ks < K)[None, :]",
                      "mask=(rows < M)[:, None]").replace(
                          "mask=(k0 + ks < K)[:, None] & (cols < N)[None, :]",
                          "mask=(cols < N)[None, :]"),
    # strides: A and B assumed row-major (the strides passed, then ignored)
    "assumes contiguous": _dot("rows[:, None] * stride_am + ks[None, :] * stride_ak",
                               "rows[:, None] * K + ks[None, :]").replace(
        "ks[:, None] * stride_bk + cols[None, :] * stride_bn", "ks[:, None] * N + cols[None, :]"
    ).replace("a_ptrs += BLOCK_K * stride_ak", "a_ptrs += BLOCK_K").replace(
        "b_ptrs += BLOCK_K * stride_bk", "b_ptrs += BLOCK_K * N"),
    # fp32 accumulation: the accumulator in C's dtype (fp16 for fp16 inputs)
    "accumulator in C's dtype": _dot("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                                     "acc = tl.zeros((BLOCK_M, BLOCK_N), "
                                     "dtype=c_ptr.dtype.element_ty)"),
    # the math: each K step overwrites the sum (only the last slice of K is kept)
    "acc overwritten": _dot("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b)"),
    # the math's corner: K = 0 returns C untouched (torch.empty's bytes), not zeros
    "K = 0 skipped": _dot("    grid = (", "    if k == 0:\n        return c\n    grid = ("),
    # dtype path: the result rounded through fp16 whatever C's dtype (inf past 65504 in fp32)
    "stored through fp16": _dot("acc.to(c_ptr.dtype.element_ty)", "acc.to(tl.float16)"),
}

# the mechanical mutants (exercises/mutants.py) that behave exactly like the solution
EQUIVALENT = {
    "mma_matmul.swizzle_cuda": {
        "constant: line 6: return chunk ^ ((row / (8 / CHUNKS)) % CHUNKS);  ->  "
        "return chunk ^ ((row / (9 / CHUNKS)) % CHUNKS);":
            "integer division: 9 / CHUNKS = 8 / CHUNKS for every CHUNKS that is a power of two "
            "(1, 2, 4, 8: 32- to 128-byte rows; they differ only where CHUNKS divides 9, i.e. "
            "3, 9, which an XOR swizzle cannot permute), and the loader has CHUNKS = 4",
        "term dropped: line 14: return (16 * warp + lane % 16) * ROW_BYTES + swizzle(16 * warp "
        "+ lane % 16,  ->  return (16 * warp + lane % 16) * ROW_BYTES + swizzle(16 + lane % 16,":
            "the swizzle depends on row % 8 only ((row / (8 / CHUNKS)) % CHUNKS has period 8 "
            "for CHUNKS = 1, 2, 4, 8), and 16 * warp and 16 are both multiples of 8: the same "
            "XOR for every warp, lane and step (the row part of the offset keeps 16 * warp)",
    },
    "mma_matmul.triton_dot": {
        "term dropped: line 25: c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * "
        "stride_cn  ->  c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :]":
            "C is allocated by matmul() itself with torch.empty((m, n)), contiguous, so "
            "stride_cn is always 1 and the product by it changes no address",
    },
}
