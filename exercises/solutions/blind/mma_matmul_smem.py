"""Wrong answers to exercise mma_matmul.smem, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "mma_matmul.smem"
BLIND: dict[str, str] = {
        "no __syncthreads after the inner product (next slice overwrites the tiles)": r'''
# ✏️ Exercise mma_matmul.smem: edit this cell, run it, then run the check below
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        as[ty][tx] = (row < M && k0 + tx < K) ? a[(long long)row * K + k0 + tx] : 0.0f;
        bs[ty][tx] = (col0 + ty < N && k0 + tx < K) ? b[(long long)(col0 + ty) * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[ty][k] * bs[tx][k];
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
"""
''',
        "B's staging guard tests col (col0 + tx), not the column it loads (col0 + ty)": r'''
# ✏️ Exercise mma_matmul.smem: edit this cell, run it, then run the check below
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        as[ty][tx] = (row < M && k0 + tx < K) ? a[(long long)row * K + k0 + tx] : 0.0f;
        bs[ty][tx] = (col < N && k0 + tx < K) ? b[(long long)(col0 + ty) * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[ty][k] * bs[tx][k];
        __syncthreads();
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
"""
''',
        "store of C guarded on the row only": r'''
# ✏️ Exercise mma_matmul.smem: edit this cell, run it, then run the check below
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        as[ty][tx] = (row < M && k0 + tx < K) ? a[(long long)row * K + k0 + tx] : 0.0f;
        bs[ty][tx] = (col0 + ty < N && k0 + tx < K) ? b[(long long)(col0 + ty) * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[ty][k] * bs[tx][k];
        __syncthreads();
    }
    if (row < M) c[(long long)row * N + col] = acc;
"""
''',
    }
