"""Solution (and known-wrong answers) of exercise nvrtc.tiled_matmul: a tiled fp32 matmul in
CUDA, 64 x 64 tiles of C per block of 256 threads, 16 outputs a thread in registers.

Each wrong answer is a mistake a student makes, written as one; ``SAYS`` holds the words its
"not yet" must contain (the mistake named). ``ALTERNATIVES`` are correct answers written
differently (another step along K, other thread mappings): each must pass
(``tests/test_tiled_matmul.py``).
"""

_MATMUL = r'''
MATMUL_SOURCE = r"""
#define TILE 64  // the block's tile of C: TILE x TILE outputs (the launch's 64)
#define BK 8     // the step along K: a TILE x BK tile of A, a BK x TILE tile of B
#define THREADS 256

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[BK][TILE];  // A's tile, stored transposed: As[k][r]
    __shared__ float Bs[BK][TILE];
    const int t = threadIdx.x;
    // this thread's 16 outputs: rows ty + 16 i, columns tx + 16 j of the tile (neighbouring
    // threads on neighbouring columns: the stores of C are coalesced too)
    const int tx = t % 16, ty = t / 16;
    const long long row0 = (long long)blockIdx.y * TILE, col0 = (long long)blockIdx.x * TILE;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = t; i < TILE * BK; i += THREADS) {  // consecutive threads along a row of A
            const int r = i / BK, k = i % BK;
            const long long gr = row0 + r, gk = k0 + k;
            As[k][r] = gr < M && gk < K ? A[gr * K + gk] : 0.0f;
        }
        for (int i = t; i < BK * TILE; i += THREADS) {  // and along a row of B
            const int k = i / TILE, c = i % TILE;
            const long long gk = k0 + k, gc = col0 + c;
            Bs[k][c] = gk < K && gc < N ? B[gk * N + gc] : 0.0f;
        }
        __syncthreads();  // the tiles are whole before anyone reads them
        for (int k = 0; k < BK; ++k) {
            float a[4], b[4];  // in registers: each feeds 4 multiply-adds
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // everyone is done with the tiles before the next step refills them
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const long long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < M && c < N) C[r * N + c] = acc[i][j];
        }
}
"""
'''


def _edit(*edits: tuple[str, str], source: str = _MATMUL) -> str:
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return source


_STORE_GUARD = "            if (r < M && c < N) C[r * N + c] = acc[i][j];"
_NO_STORE_GUARD = _edit((_STORE_GUARD, "            C[r * N + c] = acc[i][j];  // no bound"))
_K_TAIL = _edit(("As[k][r] = gr < M && gk < K ? A[gr * K + gk] : 0.0f;",
                 "As[k][r] = gr < M ? A[gr * K + gk] : 0.0f;  // k past K not tested"),
                ("Bs[k][c] = gk < K && gc < N ? B[gk * N + gc] : 0.0f;",
                 "Bs[k][c] = gc < N ? B[gk * N + gc] : 0.0f;"))
_K_WHOLE_STEPS = _edit(("    for (int k0 = 0; k0 < K; k0 += BK) {",
                        "    for (int k0 = 0; k0 + BK <= K; k0 += BK) {  // whole steps only"))
_NO_SECOND_BARRIER = _edit((
    "        __syncthreads();  // everyone is done with the tiles before the next step refills "
    "them\n", ""))
_NO_FIRST_BARRIER = _edit((
    "        __syncthreads();  // the tiles are whole before anyone reads them\n", ""))
_A_TRANSPOSED = _edit(("            const int r = i / BK, k = i % BK;",
                       "            const int r = i % TILE, k = i / TILE;  // down A's columns"))
_TILE_TOO_SMALL = _edit(("    __shared__ float As[BK][TILE];  // A's tile, stored transposed: "
                         "As[k][r]", "    __shared__ float As[BK][TILE / 2];  // half a tile"),)
_ACCUMULATE = _edit(("            if (r < M && c < N) C[r * N + c] = acc[i][j];",
                     "            if (r < M && c < N) C[r * N + c] += acc[i][j];"))
_SWAPPED = _edit(("            if (r < M && c < N) C[r * N + c] = acc[i][j];",
                  "            if (r < M && c < N) C[c * M + r] = acc[i][j];  // column-major"))
_INT_OFFSETS = _edit(("            const long long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;",
                      "            const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;"))
_A_INT_OFFSETS = _edit(("            const long long gr = row0 + r, gk = k0 + k;",
                        "            const int gr = row0 + r, gk = k0 + k;  // int offsets"))
_B_ROWS_BY_M = _edit(("B[gk * N + gc]", "B[gk * M + gc]"))  # B's row stride taken as M
_NO_REGISTERS = _edit((
    """            float a[4], b[4];  // in registers: each feeds 4 multiply-adds
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];""",
    """            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                    // both operands from the tile for every multiply-add
                    volatile float* as = &As[k][ty + 16 * i];
                    volatile float* bs = &Bs[k][tx + 16 * j];
                    acc[i][j] += *as * *bs;
                }"""))
_NO_SHARED = r'''
MATMUL_SOURCE = r"""
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    // 16 outputs a thread straight from global memory: no tile in shared memory
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const long long row0 = (long long)blockIdx.y * 64, col0 = (long long)blockIdx.x * 64;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const long long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r >= M || c >= N) continue;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[r * K + k] * B[(long long)k * N + c];
            C[r * N + c] = acc;
        }
}
"""
'''
_ONE_ROW_GUARD = _edit(("As[k][r] = gr < M && gk < K ? A[gr * K + gk] : 0.0f;",
                        "As[k][r] = gk < K ? A[gr * K + gk] : 0.0f;  // rows past M loaded"))

SOLUTIONS = {"nvrtc.tiled_matmul": _MATMUL}
WRONG = {"nvrtc.tiled_matmul": {
    "no bound on the store of the ragged tail": _NO_STORE_GUARD,
    "the last partial step of K unguarded": _K_TAIL,
    "the last partial step of K skipped": _K_WHOLE_STEPS,
    "the second __syncthreads missing": _NO_SECOND_BARRIER,
    "the first __syncthreads missing": _NO_FIRST_BARRIER,
    "A's tile loaded down its columns (uncoalesced)": _A_TRANSPOSED,
    "a shared tile too small": _TILE_TOO_SMALL,
    "C accumulated into, never zeroed": _ACCUMULATE,
    "row and column of C swapped": _SWAPPED,
    "C's offset in 32 bits": _INT_OFFSETS,
    "A's offset in 32 bits": _A_INT_OFFSETS,
    "B's row stride taken as M": _B_ROWS_BY_M,
    "every operand read from shared memory (no register blocking)": _NO_REGISTERS,
    "no shared memory at all": _NO_SHARED,
    "rows of A past M loaded": _ONE_ROW_GUARD,
}}

SAYS = {"nvrtc.tiled_matmul": {
    "no bound on the store of the ragged tail": "must not store",
    "the last partial step of K unguarded": "past the end of",
    "the last partial step of K skipped": "the last partial step of K",
    "the second __syncthreads missing": "no barrier",
    "the first __syncthreads missing": "no barrier",
    "A's tile loaded down its columns (uncoalesced)": "uncoalesced",
    "a shared tile too small": "past the end of one of your arrays",
    "C accumulated into, never zeroed": "adds into C",
    "row and column of C swapped": "swapped",
    "C's offset in 32 bits": "64 bits",
    "A's offset in 32 bits": "before the start of A",
    "B's row stride taken as M": "past the end of B",
    "every operand read from shared memory (no register blocking)": "registers",
    "no shared memory at all": "no shared-memory store",
    "rows of A past M loaded": "past the end of A",
}}

# Correct answers written differently: each must pass
_PATCH_BK16 = _edit(  # a step of 16, and a thread's outputs a contiguous 4 x 4 patch
    ("#define BK 8 ", "#define BK 16"),
    ("            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];\n"
     "            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];",
     "            for (int i = 0; i < 4; ++i) a[i] = As[k][4 * ty + i];\n"
     "            for (int j = 0; j < 4; ++j) b[j] = Bs[k][4 * tx + j];"),
    ("            const long long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;",
     "            const long long r = row0 + 4 * ty + i, c = col0 + 4 * tx + j;"))
_STRIP = _edit(  # 16 outputs down one column: 1 value of B reused 16 times, 16 of A
    ("    const int tx = t % 16, ty = t / 16;", "    const int tx = t % 64, ty = t / 64;"),
    ("    float acc[4][4] = {};", "    float acc[16] = {};"),
    ("""            float a[4], b[4];  // in registers: each feeds 4 multiply-adds
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];""",
     """            const float b = Bs[k][tx];  // in a register: feeds 16 multiply-adds
            for (int i = 0; i < 16; ++i) acc[i] += As[k][16 * ty + i] * b;"""),
    ("""    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const long long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < M && c < N) C[r * N + c] = acc[i][j];
        }""",
     """    for (int i = 0; i < 16; ++i) {
        const long long r = row0 + 16 * ty + i, c = col0 + tx;
        if (r < M && c < N) C[r * N + c] = acc[i];
    }"""))
ALTERNATIVES = {"nvrtc.tiled_matmul": {
    "a step of 16 along K, a contiguous 4 x 4 patch a thread": _PATCH_BK16,
    "16 outputs down one column a thread": _STRIP,
}}

# Mechanical mutants (exercises.mutants) that behave exactly like the solution
_LARGER = ("an array one element larger than the loops index: the extra registers are never "
           "read or written (nvcc drops them; the SASS, the values and every access are the "
           "solution's)")
EQUIVALENT = {"nvrtc.tiled_matmul": {
    "constant: line 15: float acc[4][4] = {};  ->  float acc[5][4] = {};": _LARGER,
    "constant: line 15: float acc[4][4] = {};  ->  float acc[4][5] = {};": _LARGER,
    "constant: line 29: float a[4], b[4];  ->  float a[5], b[4];": _LARGER,
    "constant: line 29: float a[4], b[4];  ->  float a[4], b[5];": _LARGER,
    "bound: line 16: for (int k0 = 0; k0 < K; k0 += BK) {  ->  "
    "for (int k0 = 0; k0 <= K; k0 += BK) {":
        "one more step of K only when BK divides K, and its tiles are all zeros (the loads "
        "are guarded by gk < K): the same C, every access inside A and B, one step of K / BK "
        "more work",
}}
