"""GeLU in Triton: each program handles one BLOCK of elements.

    gelu(x) = 0.5·x·(1 + tanh(u)) = x·sigmoid(2u) = x / (1 + exp(-2u)),  u = √(2/π)(x + 0.044715x³)

The last form needs one ``exp`` and never divides inf by inf: for u → -inf, exp(-2u) → inf and
x / inf → 0; for u → +inf, exp(-2u) → 0 and the result is x. No NaN for large |x|.
"""

import numpy as np
import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.gelu import FLOAT_DTYPES
from kernels.registry import register

# Elements and warps per program: 8 elements per thread, two 16-byte accesses for float32. Tuned
# on an H200 at 2^28 elements (BLOCK 1024..8192 x 4..16 warps all land at 96-100% of copy).
BLOCK = 1024
NUM_WARPS = 4
# The interpreter runs each program as NumPy code: bigger blocks mean fewer, faster programs.
INTERPRETER_BLOCK = 1 << 16


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # 64-bit offsets: n may exceed 2^31
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def triton_device_check(*tensors: torch.Tensor) -> str | None:
    """Compiled Triton kernels read GPU memory; the interpreter reads CPU memory."""
    want = "cpu" if env.TRITON_INTERPRET else "cuda"
    for t in tensors:
        if t.device.type != want:
            how = "the Triton interpreter" if env.TRITON_INTERPRET else "compiled Triton"
            return f"{how} needs x on {want}, got x on {t.device.type}"
    return None


@register("gelu", "triton", dtypes=FLOAT_DTYPES, needs=("triton",), check=triton_device_check,
          meta={"block": BLOCK, "num_warps": NUM_WARPS})
def gelu_triton(x: torch.Tensor) -> torch.Tensor:
    """Triton: one program per BLOCK elements, float32 in registers."""
    x = x.contiguous()  # flat offsets need a dense layout (a copy only for strided views)
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    if env.TRITON_INTERPRET:
        # NumPy warns when exp(-2u) overflows to inf; that inf is intended (x / inf = 0)
        with np.errstate(over="ignore"):
            gelu_kernel[(triton.cdiv(n, INTERPRETER_BLOCK),)](x, y, n, BLOCK=INTERPRETER_BLOCK)
    else:
        gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return y
