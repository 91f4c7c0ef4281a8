"""Solutions (and known-wrong answers) of lesson 11's exercises (06.* before issue 24's split)."""

_BYOK_KERNEL = '''
import torch
import triton
import triton.language as tl

import kernels
from kernels.gelu.triton_gelu import triton_device_check

BLOCK_N, BLOCK_K = 16, 16


@triton.jit
def row_gemm_kernel(a_ptr, b_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float64)
    for k0 in range(0, K, BLOCK_K):
        k_ok = k0 + ks < K
        a = tl.load(a_ptr + m * K + k0 + ks, mask=k_ok, other=0.0)
        b = tl.load(b_ptr + (k0 + ks)[:, None] * N + cols[None, :],
                    mask=k_ok[:, None] & (cols[None, :] < N), other=0.0)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(out_ptr + m * N + cols, acc, mask=cols < N)


def row_gemm(a, b):
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty(m, n, dtype=torch.float64, device=a.device)
    if m and n:
        row_gemm_kernel[(m, triton.cdiv(n, BLOCK_N))](a, b, out, n, k, BLOCK_N=BLOCK_N,
                                                       BLOCK_K=BLOCK_K)
    return out
'''

SOLUTIONS = {
    "byok.supports": '''
import torch


def gemv_supports(a, x):
    if a.dim() != 2:
        raise ValueError(f"a expected a 2-D matrix [M, K], got {a.dim()}-D")
    if x.dim() != 1 or x.shape[0] != a.shape[1]:
        raise ValueError(f"x expected shape [{a.shape[1]}], got {list(x.shape)}")
    for name, t in (("a", a), ("x", x)):
        if t.device.type != "cuda":
            return f"needs CUDA tensors, got {name} on {t.device.type}"
        if t.dtype != torch.float64:
            return f"supports float64 only, got {name} of {t.dtype}"
    if not a.is_contiguous():
        return "needs a contiguous (row-major) a; call a.contiguous()"
    if a.shape[1] % 4:
        return f"K must be a multiple of 4 (32-byte loads), got K={a.shape[1]}"
    return None
''',
    "byok.byok": _BYOK_KERNEL + '''

def register_mine():
    return kernels.register("matmul", "mine", "fp64 rows", fn=row_gemm,
                            dtypes=(torch.float64,), contiguous=True, needs=("triton",),
                            check=triton_device_check,
                            meta={"family": "mine", "accumulator": "float64",
                                  "tile": (1, BLOCK_N)},
                            description="FP64 matmul in Triton: a row of out per program")


def find_mine(a, b):
    return kernels.get_kernels("matmul", a, b, where=lambda k: k.meta.get("family") == "mine")


def unregister_mine():
    kernels.unregister("matmul", "mine", "fp64 rows")
''',
    "byok.where": '''
def wide_thread_per_output(k):
    return (k.meta.get("family") == "fp64_gemm" and k.provider != "triton"
            and k.meta["tile"][1] >= 32)
''',
}

WRONG = {
    # the shape checks right, but a CPU tensor raises instead of returning the reason
    "byok.supports": '''
import torch


def gemv_supports(a, x):
    if a.dim() != 2:
        raise ValueError(f"a expected a 2-D matrix [M, K], got {a.dim()}-D")
    if x.dim() != 1 or x.shape[0] != a.shape[1]:
        raise ValueError(f"x expected shape [{a.shape[1]}], got {list(x.shape)}")
    if not a.is_cuda or not x.is_cuda:
        raise ValueError("a and x must be CUDA tensors")
    if a.dtype != torch.float64 or x.dtype != torch.float64:
        return "supports float64 only"
    if not a.is_contiguous():
        return "needs a contiguous a"
    if a.shape[1] % 4:
        return "K must be a multiple of 4"
    return None
''',
    # registered without a device check: it claims the tensors the interpreter cannot read
    # (or, on a GPU, CPU tensors that compiled Triton cannot read)
    "byok.byok": _BYOK_KERNEL + '''

def register_mine():
    return kernels.register("matmul", "mine", "fp64 rows", fn=row_gemm,
                            dtypes=(torch.float64,), contiguous=True, needs=("triton",),
                            meta={"family": "mine", "accumulator": "float64",
                                  "tile": (1, BLOCK_N)})


def find_mine(a, b):
    return kernels.get_kernels("matmul", a, b, where=lambda k: k.meta.get("family") == "mine")


def unregister_mine():
    kernels.unregister("matmul", "mine", "fp64 rows")
''',
    # reads meta["tile"] of every matmul: the eager reference has no tile
    "byok.where": '''
def wide_thread_per_output(k):
    return k.provider != "triton" and k.meta["tile"][1] >= 32
''',
}
