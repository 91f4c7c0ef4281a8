"""Wrong answers to exercise puzzles.dot, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "puzzles.dot"
BLIND: dict[str, str] = {
        "K not masked (a ragged K reads the next row's values)": r'''
# ✏️ Exercise puzzles.dot: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (a: M x K, b: K x N, c: M x N, all row-major)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :], mask=(rm < M)[:, None], other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + rn[None, :], mask=(rn < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
''',
        "K loop over whole BK slices only (K % 16 dropped)": r'''
# ✏️ Exercise puzzles.dot: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (a: M x K, b: K x N, c: M x N, all row-major)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K - BK + 1, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :],
                    mask=(rm < M)[:, None] & (k < K)[None, :], other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + rn[None, :],
                    mask=(k < K)[:, None] & (rn < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
''',
        "masked loads without other=": r'''
# ✏️ Exercise puzzles.dot: edit this cell, run it, then run the check below
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (a: M x K, b: K x N, c: M x N, all row-major)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :], mask=(rm < M)[:, None] & (k < K)[None, :])
        b = tl.load(b_ptr + k[:, None] * N + rn[None, :], mask=(k < K)[:, None] & (rn < N)[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
''',
    }
