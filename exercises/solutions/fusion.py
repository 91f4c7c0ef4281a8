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

def _silu(old: str, new: str) -> str:
    """The solution of fusion.silu_mul with one piece changed (every occurrence): a wrong answer."""
    assert old in _SILU_MUL, old
    return _SILU_MUL.replace(old, new)


_SILU_MUL_CHUNKS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(y_ptr + offsets, (a / (1.0 + tl.exp(-a)) * b).to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got {tuple(x.shape)}")
    a, b = x.chunk(2, dim=-1)
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty_like(a)
    if y.numel():
        silu_mul_kernel[(triton.cdiv(y.numel(), 1024),)](a, b, y, y.numel(), BLOCK=1024)
    return y
'''

_SILU_MUL_TWO_LAUNCHES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def silu_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x_ptr + offsets // d * 2 * d + offsets % d, mask=mask).to(tl.float32)
    tl.store(y_ptr + offsets, (a / (1.0 + tl.exp(-a))).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    b = tl.load(x_ptr + offsets // d * 2 * d + d + offsets % d, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(y_ptr + offsets, (y * b).to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(x):
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x expected a 2-D tensor with an even width, got {tuple(x.shape)}")
    x = x.contiguous()
    d = x.shape[1] // 2
    y = torch.empty(x.shape[0], d, device=x.device, dtype=x.dtype)
    if y.numel():
        grid = (triton.cdiv(y.numel(), 1024),)
        silu_kernel[grid](x, y, d, y.numel(), BLOCK=1024)
        mul_kernel[grid](x, y, d, y.numel(), BLOCK=1024)
    return y
'''


SOLUTIONS = {
    "fusion.reverse": _REVERSE,
    "fusion.bias_gelu": _BIAS_GELU,
    "fusion.predict": '''
UNFUSED_KERNELS = 2                                  # add, gelu
UNFUSED_BYTES = 4 * (4096 * 4096 * 4) + 4096 * 4     # add: x, bias in, sum out; gelu: in, out
FUSED_BYTES = 2 * (4096 * 4096 * 4) + 4096 * 4       # x and bias in, y out
''',
    "fusion.silu_mul": _SILU_MUL,
}

WRONG = {
    "fusion.reverse": {
        # lane i reads x[n - i]: one past the end for i = 0, and x[0] is never read
        "off-by-one edge": _REVERSE.replace("n - 1 - offsets", "n - offsets"),
        # the store is not masked: the last program's extra lanes write past the end of y
        "out-of-bounds write": _REVERSE.replace("mask=mask), mask=mask)", "mask=mask))"),
        "plain PyTorch": "def reverse_kernel(x, y, n, BLOCK=64):\n    y.copy_(x.flip(0))\n",
        "a constant": _REVERSE.replace("tl.load(x_ptr + (n - 1 - offsets), mask=mask)",
                                       "tl.zeros((BLOCK,), dtype=tl.float32)"),
        # only the store masked: the last program's extra lanes read before the start of x
        # (their values are never stored, so y is right)
        "unmasked load": _REVERSE.replace("tl.load(x_ptr + (n - 1 - offsets), mask=mask)",
                                          "tl.load(x_ptr + (n - 1 - offsets))"),
        # each program reverses its own block: right only when n is a multiple of BLOCK
        "each block reversed": _REVERSE.replace(
            "tl.load(x_ptr + (n - 1 - offsets), mask=mask)",
            "tl.load(x_ptr + tl.program_id(0) * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK)), "
            "mask=mask)"),
    },
    # the bias indexed by the flat offset instead of the column
    "fusion.bias_gelu": _BIAS_GELU.replace("bias_ptr + offsets % n_cols", "bias_ptr + offsets"
                                       ).replace("mask=mask).to(tl.float32)\n    u",
                                                 "mask=offsets < n_cols, other=0.0)"
                                                 ".to(tl.float32)\n    u"),
    # counts only what the GeLU moves
    "fusion.predict": '''
UNFUSED_KERNELS = 2
UNFUSED_BYTES = 2 * (4096 * 4096 * 4)
FUSED_BYTES = 2 * (4096 * 4096 * 4)
''',
    "fusion.silu_mul": {
        # the second half read at the same column offset as the first
        "b read from the first half": _SILU_MUL.replace("row * 2 * d + d + col",
                                                        "row * 2 * d + col"),
        # memory safety: the loads unmasked, the store masked; the last program's extra lanes
        # read past the end of x, and their values are never stored
        "unmasked loads": _silu("mask=mask).to(tl.float32)", ").to(tl.float32)"),
        # memory safety: the mask of x's length (2n), not y's: reads past x, writes past y
        "mask of x's length": _silu("mask = offsets < n", "mask = offsets < 2 * n"),
        # one kernel: silu(a) in Triton, the product by b left to PyTorch (a second kernel)
        "multiply in PyTorch": _silu("y = a / (1.0 + tl.exp(-a)) * b", "y = a / (1.0 + tl.exp(-a))"
                                     ).replace("    return y\n", "    return y * x[:, d:]\n"),
        # one kernel: the halves copied out with chunk + contiguous first (two copy kernels)
        "chunk copies": _SILU_MUL_CHUNKS,
        # one kernel: two Triton launches, silu(a) into y, then y *= b in place
        "two launches": _SILU_MUL_TWO_LAUNCHES,
        # dtype path: silu computed in the input dtype (no .to(tl.float32)): in float16,
        # exp(-a) overflows for a < -11.1 and silu(a) becomes 0
        "computed in the input dtype": _silu("mask=mask).to(tl.float32)", "mask=mask)"),
        # the math's corner: sigmoid as exp(a) / (1 + exp(a)) is inf / inf = NaN for large a
        "exp(a) / (1 + exp(a))": _silu("y = a / (1.0 + tl.exp(-a)) * b",
                                       "y = a * tl.exp(a) / (1.0 + tl.exp(a)) * b"),
    },
}

EQUIVALENT = {
    "fusion.silu_mul": {
        "narrowed: line 13: b = tl.load(x_ptr + row * 2 * d + d + col, mask=mask)"
        ".to(tl.float32)  ->  b = tl.load(x_ptr + row * 2 * d + d + col, mask=mask)":
            "b is only multiplied by silu(a), which is float32: Triton promotes a 16-bit b "
            "to float32 for the product (exactly), so every dtype computes the same values",
    },
}
