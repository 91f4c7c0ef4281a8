"""Wrong answers to exercise nvrtc.tiled_matmul, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "nvrtc.tiled_matmul"
BLIND: dict[str, str] = {
    "offsets computed in 32-bit unsigned int instead of long long (right up to 2^32 elements, wraps past that)": r'''
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
''',
    "B's offset k * N + c left in int (A's and C's are long long): wrong once K * N passes 2^31": r'''
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
            const int gr = row0 + r, gk = k0 + k;
            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < K && gc < N) ? B[gk * N + gc] : 0.0f;
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
        const int r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
        }
    }
}
"""
''',
    "C += acc instead of C = acc: relies on C being zero before the launch": r'''
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
            const int gr = row0 + r, gk = k0 + k;
            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
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
        const int r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(long long)r * N + c] += acc[i][j];
        }
    }
}
"""
''',
    "B's tile zeroed once before the K loop, not per step: in the ragged last step its rows past K keep the previous step's values (cancelled by A's zeros only while they are finite)": r'''
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

    // B's tile cleared once: columns past N stay 0; rows past K meet A's zero columns
    #pragma unroll
    for (int e = tid; e < BK * BN; e += 256) Bs[e / BN][e % BN] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: 64 x 8, two elements a thread, consecutive threads along a row
        #pragma unroll
        for (int e = tid; e < BM * BK; e += 256) {
            const int r = e / BK, k = e % BK;
            const int gr = row0 + r, gk = k0 + k;
            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            if (gk < K && gc < N) Bs[k][c] = B[(long long)gk * N + gc];
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
        const int r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
        }
    }
}
"""
''',
    "C stored inside the K loop after every step (misplaced brace, do-while so K = 0 still stores) instead of once at the end": r'''
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

    int k0 = 0;
    do {   // at least one step, so that K = 0 still writes C
        // A tile: 64 x 8, two elements a thread, consecutive threads along a row
        #pragma unroll
        for (int e = tid; e < BM * BK; e += 256) {
            const int r = e / BK, k = e % BK;
            const int gr = row0 + r, gk = k0 + k;
            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
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
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + ty + 16 * i;
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int c = col0 + tx + 16 * j;
                if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
            }
        }
        k0 += BK;
    } while (k0 < K);
}
"""
''',
    "A's tile guarded by the linear index < M * K, not by r < M && k < K: columns past K hold the next row's values, not 0 (B's zeros cancel them unless they are inf or NaN)": r'''
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
            const int gr = row0 + r, gk = k0 + k;
            const long long off = (long long)gr * K + gk;
            As[r][k] = (off < (long long)M * K) ? A[off] : 0.0f;   // inside A
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
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
        const int r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
        }
    }
}
"""
''',
    "B's columns past N clamped to column N - 1 instead of zero-filled (reads B[-1] when N = 0)": r'''
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
            const int gr = row0 + r, gk = k0 + k;
            As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            const int cc = min(gc, N - 1);   // clamp: columns past N feed outputs that are never stored
            Bs[k][c] = (gk < K) ? B[(long long)gk * N + cc] : 0.0f;
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
        const int r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
        }
    }
}
"""
''',
    "64-bit base pointers per block, but the offsets inside the tile in int: (row in tile) * K and (row in tile) * N wrap once K or N passes ~2^31 / 64": r'''
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

    const float* Ab = A + (long long)row0 * K;          // 64-bit bases of the block's rows and columns
    float* Cb = C + (long long)row0 * N + col0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float* Bk = B + (long long)k0 * N + col0;
        // A tile: 64 x 8, two elements a thread, consecutive threads along a row
        #pragma unroll
        for (int e = tid; e < BM * BK; e += 256) {
            const int r = e / BK, k = e % BK;
            const int gr = row0 + r, gk = k0 + k;
            As[r][k] = (gr < M && gk < K) ? Ab[r * K + gk] : 0.0f;
        }
        // B tile: 8 x 64, two elements a thread
        #pragma unroll
        for (int e = tid; e < BK * BN; e += 256) {
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < K && gc < N) ? Bk[k * N + c] : 0.0f;
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
        const int r = row0 + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (r < M && c < N) Cb[(ty + 16 * i) * N + tx + 16 * j] = acc[i][j];
        }
    }
}
"""
''',
}
