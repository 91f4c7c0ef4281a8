"""GeLU in Triton: each program handles one BLOCK of elements.

    gelu(x) = 0.5·x·(1 + tanh(u)) = x·sigmoid(2u) = x / (1 + exp(-2u)),  u = √(2/π)(x + 0.044715x³)

The last form needs one ``exp`` and never divides inf by inf: for u → -inf, exp(-2u) → inf and
x / inf → 0; for u → +inf, exp(-2u) → 0 and the result is x. No NaN for large |x|.

It is differentiable too (lesson 12 trains a model with it): with ``s = sigmoid(2u)``,

    gelu'(x) = s + x · 2·s·(1 - s) · √(2/π)(1 + 3·0.044715·x²)

one more elementwise kernel (:func:`gelu_bwd_kernel`) that reads x and dy and writes dx; the
forward saves x, nothing else.
"""

import numpy as np
import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.gelu.op import FLOAT_DTYPES
from kernels.registry import register
from kernels.triton_launch import Launcher, cdiv

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
          meta={"block": BLOCK, "num_warps": NUM_WARPS, "backward": "triton"})
def gelu_triton(x: torch.Tensor) -> torch.Tensor:
    """Triton: one program per BLOCK elements, float32 in registers."""
    # autograd only when a gradient is wanted (a training step); inference keeps no graph
    if torch.is_grad_enabled() and x.requires_grad:
        return GeLUFunction.apply(x)
    return forward(x)


def _launch(launcher: Launcher, n: int, *tensors) -> None:
    """One program per BLOCK elements (bigger blocks under the interpreter)."""
    if env.TRITON_INTERPRET:
        # NumPy warns when exp(-2u) overflows to inf; that inf is intended (x / inf = 0)
        with np.errstate(over="ignore", invalid="ignore"):
            launcher((n,), tensors, lambda: ((cdiv(n, INTERPRETER_BLOCK),), (n,),
                                             {"BLOCK": INTERPRETER_BLOCK}))
    else:  # the grid and block worked out once per size (kernels/triton_launch.py)
        launcher((n,), tensors, lambda: ((cdiv(n, BLOCK),), (n,),
                                         {"BLOCK": BLOCK, "num_warps": NUM_WARPS}))


def forward(x: torch.Tensor) -> torch.Tensor:
    """gelu(x) by :func:`gelu_kernel`, in x's dtype."""
    x = x.contiguous()  # flat offsets need a dense layout (a copy only for strided views)
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _launch(_forward_launch, n, x, y)
    return y


@triton.jit
def gelu_bwd_kernel(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    dy = tl.load(dy_ptr + offsets, mask=mask).to(tl.float32)
    inner = 1.0 + 0.044715 * 3.0 * x * x
    s = 1.0 / (1.0 + tl.exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)))
    ds = 2.0 * s * (1.0 - s)  # d sigmoid(2u) / du
    # far from 0, ds is exactly 0 while x·inner may be inf (bf16 |x| > 1e13): 0·inf would be NaN
    slope = tl.where(ds == 0.0, 0.0, x * ds * 0.7978845608028654 * inner)
    tl.store(dx_ptr + offsets, (dy * (s + slope)).to(dx_ptr.dtype.element_ty), mask=mask)


def backward(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx = dy · gelu'(x) by :func:`gelu_bwd_kernel`, in x's dtype (fp32 in registers)."""
    x, dy = x.contiguous(), dy.contiguous()
    dx = torch.empty_like(x)
    if x.numel():
        _launch(_backward_launch, x.numel(), x, dy, dx)
    return dx


_forward_launch = Launcher(gelu_kernel)
_backward_launch = Launcher(gelu_bwd_kernel)


class GeLUFunction(torch.autograd.Function):
    """The two kernels as one differentiable op: the forward saves x (the input), nothing more."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return forward(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return backward(x, dy)
