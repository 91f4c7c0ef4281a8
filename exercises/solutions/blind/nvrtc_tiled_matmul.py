"""Wrong answers to exercise nvrtc.tiled_matmul, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

from exercises.solutions.blind import edited

ID = "nvrtc.tiled_matmul"
# The first answer whole; each other one is it with its own mistake in place of the first's
# (edited: each old text occurs once in the first answer).
FIRST = 'offsets computed in 32-bit unsigned int instead of long long (right up to 2^32 elements, wraps past that)'
BASE = r'''
# ✏️ Exercise nvrtc.tiled_matmul: edit this cell, run it, then run the check below
MATMUL_SOURCE = r"""
#define BM 64
#define BN 64
#define BK 8
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    // C (M x N) = A (M x K) @ B (K x N), float32, row-major (A[r][k] at A[r * K + k]).
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;          // thread's outputs: rows ty + 16 i, cols tx + 16 j
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: 64 x 8, two elements a thread, consecutive threads along a row
        #pragma unroll
        for (int e = tid; e < BM * BK; e += 256) {
            const int r = e / BK, k = e % BK;
            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned
            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const unsigned gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[4], b[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[ty + 16 * i][k];
            #pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned c = col0 + tx + 16 * j;
            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];
        }
    }
}
"""
'''

BLIND: dict[str, str] = {FIRST: BASE}
BLIND["B's offset k * N + c left in int (A's and C's are long long): wrong once K * N passes 2^31"] = edited(BASE, [
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < K && gc < N) ? B[gk * N + gc] : 0.0f;\n        }\n'),
    ('    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n',
     '    for (int i = 0; i < 4; ++i) {\n        const int r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const int c = col0 + tx + 16 * j;\n            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];\n        }\n'),
])
BLIND['C += acc instead of C = acc: relies on C being zero before the launch'] = edited(BASE, [
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;\n        }\n'),
    ('    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n',
     '    for (int i = 0; i < 4; ++i) {\n        const int r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const int c = col0 + tx + 16 * j;\n            if (r < M && c < N) C[(long long)r * N + c] += acc[i][j];\n        }\n'),
])
BLIND["B's tile zeroed once before the K loop, not per step: in the ragged last step its rows past K keep the previous step's values (cancelled by A's zeros only while they are finite)"] = edited(BASE, [
    ('\n    for (int k0 = 0; k0 < K; k0 += BK) {\n',
     "\n    // B's tile cleared once: columns past N stay 0; rows past K meet A's zero columns\n    #pragma unroll\n    for (int e = tid; e < BK * BN; e += 256) Bs[e / BN][e % BN] = 0.0f;\n    for (int k0 = 0; k0 < K; k0 += BK) {\n"),
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            if (gk < K && gc < N) Bs[k][c] = B[(long long)gk * N + gc];\n        }\n'),
    ('    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n',
     '    for (int i = 0; i < 4; ++i) {\n        const int r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const int c = col0 + tx + 16 * j;\n            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];\n        }\n'),
])
BLIND['C stored inside the K loop after every step (misplaced brace, do-while so K = 0 still stores) instead of once at the end'] = edited(BASE, [
    ('\n    for (int k0 = 0; k0 < K; k0 += BK) {\n        // A tile: 64 x 8, two elements a thread, consecutive threads along a row\n',
     '\n    int k0 = 0;\n    do {   // at least one step, so that K = 0 still writes C\n        // A tile: 64 x 8, two elements a thread, consecutive threads along a row\n'),
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;\n        }\n'),
    ('        __syncthreads();\n    }\n    #pragma unroll\n    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n    }\n}\n',
     '        __syncthreads();\n        #pragma unroll\n        for (int i = 0; i < 4; ++i) {\n            const int r = row0 + ty + 16 * i;\n            #pragma unroll\n            for (int j = 0; j < 4; ++j) {\n                const int c = col0 + tx + 16 * j;\n                if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];\n            }\n        }\n        k0 += BK;\n    } while (k0 < K);\n}\n'),
])
BLIND["A's tile guarded by the linear index < M * K, not by r < M && k < K: columns past K hold the next row's values, not 0 (B's zeros cancel them unless they are inf or NaN)"] = edited(BASE, [
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            const long long off = (long long)gr * K + gk;\n            As[r][k] = (off < (long long)M * K) ? A[off] : 0.0f;   // inside A\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;\n        }\n'),
    ('    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n',
     '    for (int i = 0; i < 4; ++i) {\n        const int r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const int c = col0 + tx + 16 * j;\n            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];\n        }\n'),
])
BLIND["B's columns past N clamped to column N - 1 instead of zero-filled (reads B[-1] when N = 0)"] = edited(BASE, [
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            const int cc = min(gc, N - 1);   // clamp: columns past N feed outputs that are never stored\n            Bs[k][c] = (gk < K) ? B[(long long)gk * N + cc] : 0.0f;\n        }\n'),
    ('    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n',
     '    for (int i = 0; i < 4; ++i) {\n        const int r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const int c = col0 + tx + 16 * j;\n            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];\n        }\n'),
])
BLIND['64-bit base pointers per block, but the offsets inside the tile in int: (row in tile) * K and (row in tile) * N wrap once K or N passes ~2^31 / 64'] = edited(BASE, [
    ('\n    for (int k0 = 0; k0 < K; k0 += BK) {\n        // A tile: 64 x 8, two elements a thread, consecutive threads along a row\n',
     "\n    const float* Ab = A + (long long)row0 * K;          // 64-bit bases of the block's rows and columns\n    float* Cb = C + (long long)row0 * N + col0;\n    for (int k0 = 0; k0 < K; k0 += BK) {\n        const float* Bk = B + (long long)k0 * N + col0;\n        // A tile: 64 x 8, two elements a thread, consecutive threads along a row\n"),
    ('            const int r = e / BK, k = e % BK;\n            const unsigned gr = row0 + r, gk = k0 + k;        // offsets are never negative: unsigned\n            As[r][k] = (gr < (unsigned)M && gk < (unsigned)K) ? A[gr * (unsigned)K + gk] : 0.0f;\n        }\n',
     '            const int r = e / BK, k = e % BK;\n            const int gr = row0 + r, gk = k0 + k;\n            As[r][k] = (gr < M && gk < K) ? Ab[r * K + gk] : 0.0f;\n        }\n'),
    ('            const int k = e / BN, c = e % BN;\n            const unsigned gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < (unsigned)K && gc < (unsigned)N) ? B[gk * (unsigned)N + gc] : 0.0f;\n        }\n',
     '            const int k = e / BN, c = e % BN;\n            const int gk = k0 + k, gc = col0 + c;\n            Bs[k][c] = (gk < K && gc < N) ? Bk[k * N + c] : 0.0f;\n        }\n'),
    ('    for (int i = 0; i < 4; ++i) {\n        const unsigned r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const unsigned c = col0 + tx + 16 * j;\n            if (r < (unsigned)M && c < (unsigned)N) C[r * (unsigned)N + c] = acc[i][j];\n        }\n',
     '    for (int i = 0; i < 4; ++i) {\n        const int r = row0 + ty + 16 * i;\n        #pragma unroll\n        for (int j = 0; j < 4; ++j) {\n            const int c = col0 + tx + 16 * j;\n            if (r < M && c < N) Cb[(ty + 16 * i) * N + tx + 16 * j] = acc[i][j];\n        }\n'),
])

