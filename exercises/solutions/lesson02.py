"""Solutions (and known-wrong answers) of lesson 02's exercises."""


_REVERSE = '''
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + (n - 1 - offsets), mask=mask), mask=mask)
'''

_BIAS_GELU = '''
import torch
import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n_cols, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    x += tl.load(bias_ptr + offsets % n_cols, mask=mask).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x, bias):
    x, bias = x.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    BLOCK = 1024
    bias_gelu_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, bias, y, x.shape[1], x.numel(),
                                                        BLOCK=BLOCK)
    return y
'''

_SILU_MUL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    row, col = offsets // d, offsets % d
    a = tl.load(x_ptr + row * 2 * d + col, mask=mask).to(tl.float32)
    b = tl.load(x_ptr + row * 2 * d + d + col, mask=mask).to(tl.float32)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got {tuple(x.shape)}")
    x = x.contiguous()
    d = x.shape[1] // 2
    y = torch.empty(x.shape[0], d, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    BLOCK = 1024
    silu_mul_kernel[(triton.cdiv(y.numel(), BLOCK),)](x, y, d, y.numel(), BLOCK=BLOCK)
    return y
'''

SOLUTIONS = {
    "02.reverse": _REVERSE,
    "02.bias_gelu": _BIAS_GELU,
    "02.predict": '''
UNFUSED_KERNELS = 2                                  # add, gelu
UNFUSED_BYTES = 4 * (4096 * 4096 * 4) + 4096 * 4     # add: x, bias in, sum out; gelu: in, out
FUSED_BYTES = 2 * (4096 * 4096 * 4) + 4096 * 4       # x and bias in, y out
''',
    "02.silu_mul": _SILU_MUL,
}

WRONG = {
    "02.reverse": {
        # lane i reads x[n - i]: one past the end for i = 0, and x[0] is never read
        "off-by-one edge": _REVERSE.replace("n - 1 - offsets", "n - offsets"),
        # the store is not masked: the last program's extra lanes write past the end of y
        "out-of-bounds write": _REVERSE.replace("mask=mask), mask=mask)", "mask=mask))"),
        "plain PyTorch": "def reverse_kernel(x, y, n, BLOCK=64):\n    y.copy_(x.flip(0))\n",
        "a constant": _REVERSE.replace("tl.load(x_ptr + (n - 1 - offsets), mask=mask)",
                                       "tl.zeros((BLOCK,), dtype=tl.float32)"),
    },
    # the bias indexed by the flat offset instead of the column
    "02.bias_gelu": _BIAS_GELU.replace("bias_ptr + offsets % n_cols", "bias_ptr + offsets"
                                       ).replace("mask=mask).to(tl.float32)\n    u",
                                                 "mask=offsets < n_cols, other=0.0)"
                                                 ".to(tl.float32)\n    u"),
    # counts only what the GeLU moves
    "02.predict": '''
UNFUSED_KERNELS = 2
UNFUSED_BYTES = 2 * (4096 * 4096 * 4)
FUSED_BYTES = 2 * (4096 * 4096 * 4)
''',
    # the second half read at the same column offset as the first
    "02.silu_mul": _SILU_MUL.replace("row * 2 * d + d + col", "row * 2 * d + col"),
}
