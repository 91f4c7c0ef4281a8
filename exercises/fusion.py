"""Exercises of lesson 02: kernel fusion (Triton, bytes moved, kernels launched)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course_utils import env
from exercises import (
    Mismatch,
    bandwidth_verdict,
    compare,
    exercise,
    expect,
    expect_triton_kernel,
    triton_checks,
    triton_launchers,
)
from exercises.triton_checks import call_answer, expect_bounds, expect_one_fused_kernel, fenced

_TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2)}


def _dtypes() -> list[torch.dtype]:
    # the Triton interpreter computes bf16 wrongly (it casts to fp32 after loading): GPU only
    return [torch.float32, torch.bfloat16] if env.HAS_CUDA else [torch.float32]


# --------------------------------------------------------------------------------------------
REVERSE_STUB = '''
import triton
import triton.language as tl


@triton.jit
def reverse_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[n - 1 - i] for i < n; launched with grid (cdiv(n, BLOCK),)."""
    ...
'''
REVERSE_BLOCK = 64


def _guarded(n: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(a tensor of n floats, the NaN guard right after it): a write there is out of bounds,
    and under the interpreter it lands in the guard instead of someone else's memory."""
    buffer = torch.full((n + 2 * REVERSE_BLOCK,), float("nan"), device=device)
    return buffer[:n], buffer[n:]


@exercise("fusion.reverse", title="Puzzle: reverse a vector in Triton", stub=REVERSE_STUB,
          answers=("reverse_kernel",), section="A Triton kernel, line by line", intro=f"""
Write the kernel only: `y[i] = x[n - 1 - i]`. The check launches it itself, with
`BLOCK = {REVERSE_BLOCK}` and the grid `(triton.cdiv(n, BLOCK),)`, on n = 1, 7, 64 and 1000 (a
ragged last program), with a guard zone after `y` that catches a store past the end. Two
offsets this time: where each lane stores (its own `offsets`) and where it loads from. Without
a GPU it runs under Triton's interpreter, at once.""")
def check_reverse(reverse_kernel, report) -> None:
    import triton

    launchers = tuple(triton_launchers())
    expect(isinstance(reverse_kernel, launchers),
           f"reverse_kernel is a {type(reverse_kernel).__name__}, not a @triton.jit kernel",
           "decorate the function with @triton.jit and use tl.load / tl.store")
    device = env.DEFAULT_DEVICE
    for n in (1, 7, 64, 1000):
        x = torch.randn(n + 2 * REVERSE_BLOCK, device=device)[:n]  # a read past x stays ours
        y, guard = _guarded(n, device)
        call_answer(lambda x, y, n: reverse_kernel[(triton.cdiv(n, REVERSE_BLOCK),)](
            x, y, n, BLOCK=REVERSE_BLOCK), x, y, n)
        expect(bool(guard.isnan().all()),
               f"n={n}: your kernel stored past the end of y (the guard after it changed)",
               "mask the store: the last program's lanes with offsets >= n must not write")
        compare(y, x.flip(0), what=f"n={n}", hint="lane i loads x[n - 1 - i] (mask both "
                "the load and the store with offsets < n)")
    where = "under the interpreter" if env.TRITON_INTERPRET else "on the GPU"
    report.line(f"reverses n = 1, 7, 64, 1000 {where}, nothing stored past the end")
    # a load past either end whose value is masked away at the store leaves y right: only
    # the addresses show it (the interpreter's bounds checker sees every lane)
    interpreted = triton_checks.interpreted(reverse_kernel)
    for n in (1, 7, 64, 100):
        x, y = torch.randn(n), torch.empty(n)
        triton_checks.expect_in_bounds(lambda x=x, y=y, n=n: interpreted[(
            triton.cdiv(n, REVERSE_BLOCK),)](x, y, n, BLOCK=REVERSE_BLOCK), f"n={n}")
    report.line("every load and store stays inside x and y (each lane's address checked in "
                "Triton's interpreter)")


# --------------------------------------------------------------------------------------------
BIAS_GELU_STUB = '''
import torch
import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n_cols, n, BLOCK: tl.constexpr):
    """y = gelu_tanh(x + bias[column]) over a row-major x of n elements, n_cols per row."""
    # offsets of this program's BLOCK elements, a mask for the end, load x and the bias of
    # each element's column, compute in float32, store
    ...


def bias_gelu(x, bias):
    """F.gelu(x + bias, approximate="tanh") in one kernel; x is 2-D, bias has x.shape[1]."""
    raise NotImplementedError
'''


def _bias_gelu_cases(device: str, dtype: torch.dtype):
    r = lambda *shape: torch.randn(*shape, device=device).to(dtype)
    return [("7x13", r(7, 13), r(13)), ("1x1", r(1, 1), r(1)), ("empty 0x16", r(0, 16), r(16)),
            ("33x1000", r(33, 1000), r(1000)),
            ("transposed view 31x50", r(50, 31).t(), r(50)),
            ("misaligned view", r(7 * 13 + 1)[1:].view(7, 13), r(13)),
            ("large |x|", 1e3 * r(5, 8), r(8))]


@exercise("fusion.bias_gelu", title="Fuse bias + GeLU in Triton", stub=BIAS_GELU_STUB,
          answers=("bias_gelu",), section="GeLU five ways", intro="""
A `Linear` layer's bias add followed by GeLU is two kernels in eager PyTorch: the sum makes a
round trip to DRAM. Write the fused kernel: each program loads `BLOCK` elements of `x`, the bias
of each element's column (`offsets % n_cols`), computes GeLU (tanh form; `x / (1 + exp(-2u))`
never gives NaN) and stores once. Without a GPU it runs under the Triton interpreter, so the
check keeps shapes small; on a GPU it also measures it against the copy bandwidth.""")
def check_bias_gelu(bias_gelu, report) -> None:
    device = env.DEFAULT_DEVICE
    # the addresses first, in the interpreter: a store past y is caught there, not done
    bounds = expect_bounds(bias_gelu, [(f"x {r}x{c}", (fenced(r, c), fenced(c)))
                                       for r, c in ((7, 13), (1, 1), (33, 100))], "bias_gelu")
    for dtype in _dtypes():
        atol, rtol = _TOL[dtype]
        for label, x, bias in _bias_gelu_cases(device, dtype):
            got = call_answer(bias_gelu, x, bias)
            compare(got, F.gelu(x.float() + bias.float(), approximate="tanh").to(dtype),
                    what=f"{label} {str(dtype).removeprefix('torch.')}", atol=atol, rtol=rtol,
                    hint="the bias index of flat element i is i % n_cols (x must be "
                         "contiguous); compute in float32 and cast when storing")
    x, bias = torch.randn(7, 13, device=device), torch.randn(13, device=device)
    launched = expect_triton_kernel(bias_gelu, (x, bias), what="bias_gelu")
    expect_one_fused_kernel(bias_gelu, (x, bias), "bias_gelu")
    report.line("matches F.gelu(x + bias) on odd shapes, empty, views and large |x|, with one "
                f"launch of Triton kernel {', '.join(launched)} and no PyTorch op but the "
                "allocation")
    report.line(bounds[0] if bounds[0].startswith("not verified") else
                f"every load and store stays inside x, bias and y (each lane's address checked "
                f"in Triton's interpreter on {', '.join(bounds)})")
    if env.HAS_CUDA:
        from course_utils.profiling import count_kernels

        x, bias = torch.randn(8192, 8192, device="cuda"), torch.randn(8192, device="cuda")
        launches = sum(count_kernels(bias_gelu, x, bias).values())
        report.line(f"kernels per call: {launches} (fused: 1)")
        bandwidth_verdict(report, bias_gelu, (x, bias), 2 * x.numel() * x.element_size())


# --------------------------------------------------------------------------------------------
PREDICT_STUB = '''
# F.gelu(x + bias, approximate="tanh") for x of shape (4096, 4096) float32, bias of (4096,).
UNFUSED_KERNELS = ...  # kernels launched by the two-op version, per call
UNFUSED_BYTES = ...    # bytes those kernels read + write in DRAM, all together
FUSED_BYTES = ...      # bytes one fused bias + GeLU kernel reads + writes
'''


class _BytesMoved(TorchDispatchMode):
    """(op, bytes read, bytes written) for every ATen op run inside the block."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        size = lambda tree: sum(t.numel() * t.element_size() for t in tree_flatten(tree)[0]
                                if isinstance(t, torch.Tensor))
        self.ops.append((func.__name__, size((args, kwargs)), size(out)))
        return out


def unfused_bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias, approximate="tanh")


@exercise("fusion.predict", title="Predict the bytes moved and the kernels launched",
          stub=PREDICT_STUB, answers=("UNFUSED_KERNELS", "UNFUSED_BYTES", "FUSED_BYTES"),
          section="How many kernels does each launch?", intro="""
Napkin math before measuring: how many kernels does `F.gelu(x + bias)` launch, and how many
bytes do they move (each kernel reads its inputs from DRAM and writes its output back)? How many
would one fused kernel move (you write it after the measurements below)? Give exact integers
(within 5% passes). The check counts the kernels with `count_kernels` and the bytes with a
`TorchDispatchMode`, as in section 1.""")
def check_predict(kernels, unfused_bytes, fused_bytes, report) -> None:
    from course_utils.profiling import count_kernels

    dev = env.DEFAULT_DEVICE
    small = torch.randn(64, 64, device=dev), torch.randn(64, device=dev)
    launched = sum(count_kernels(unfused_bias_gelu, *small).values())
    # meta tensors: shapes and bytes, no memory, no compute (made outside the counter)
    meta = torch.empty(4096, 4096, device="meta"), torch.empty(4096, device="meta")
    with _BytesMoved() as counter:
        unfused_bias_gelu(*meta)
    table = "; ".join(f"{op}: reads {r / 1e6:.2f} MB, writes {w / 1e6:.2f} MB"
                      for op, r, w in counter.ops)
    moved = sum(r + w for _, r, w in counter.ops)
    fused = 2 * 4096 * 4096 * 4 + 4096 * 4
    for name, got, want, hint in (
            ("UNFUSED_KERNELS", kernels, launched, "one kernel per op: the add, then the GeLU"),
            ("UNFUSED_BYTES", unfused_bytes, moved,
             "the add reads x and bias and writes x + bias; GeLU reads that and writes y: "
             "4 bytes per float32 element"),
            ("FUSED_BYTES", fused_bytes, fused, "one pass: read x (and the small bias) once, "
             "write y once")):
        expect(isinstance(got, int | float), f"{name} = {got!r}; expected a number", hint)
        if abs(got - want) > 0.05 * want:
            raise Mismatch(f"{name} = {got:,}; measured here: {want:,}"
                           + (f" ({table})" if name == "UNFUSED_BYTES" else ""), hint)
    report.line(f"unfused: {launched} kernels, {moved / 1e6:.0f} MB ({table}); fused: "
                f"{fused / 1e6:.0f} MB, so fusion should be ~{moved / fused:.1f}x faster on a GPU")


def _silu_dtypes() -> list[torch.dtype]:
    # float16 runs right in the interpreter (bf16 does not: GPU only)
    return [torch.float32, torch.float16] + ([torch.bfloat16] if env.HAS_CUDA else [])


# float16: within 2 units in the last place of the float32 result rounded once (atol for the
# subnormals near silu(-12) ~ -7e-5, where a silu computed in float16 gives 0)
_SILU_TOL = {**_TOL, torch.float16: (1e-5, 2e-3)}


def _prime_allocator(rows: int, cols: int, dtype: torch.dtype, device: str) -> None:
    """Leave a NaN-filled block of the output's size just freed: the allocator tends to hand
    it to the answer's torch.empty, so an element the kernel never writes shows as NaN rather
    than as a stale right value (or a lucky zero)."""
    torch.full((rows, cols), float("nan"), dtype=dtype, device=device)


# --------------------------------------------------------------------------------------------
SILU_MUL_STUB = '''
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, d, n, BLOCK: tl.constexpr):
    """y[r, c] = silu(x[r, c]) * x[r, d + c]; x: (rows, 2d) row-major, y: (rows, d), n = rows*d"""
    ...


def silu_mul(x):
    """F.silu(a) * b for a, b = x.chunk(2, dim=-1), in one kernel; x is 2-D with an even width."""
    raise NotImplementedError
'''


@exercise("fusion.silu_mul", title="SiLU-and-multiply in Triton", stub=SILU_MUL_STUB,
          answers=("silu_mul",), section="GeLU five ways", intro="""
The MLP of most LLMs computes `F.silu(a) * b` where `a` and `b` are the two halves of one
projection `x` (shape `(rows, 2d)`): eager PyTorch launches three kernels. Write one. Output
element `i` of `y` is row `i // d`, column `i % d`; it reads `x` at that row, columns `c` and
`d + c`; compute in float32 and store in `x`'s dtype. Validate the input: an odd width is a
`ValueError` naming `x`. The check tries float32 and float16 (bf16 too on a GPU), checks every
lane's address in Triton's interpreter, and counts what one call runs: one Triton launch, and
no PyTorch op but the allocation of `y`.""")
def check_silu_mul(silu_mul, report) -> None:
    device = env.DEFAULT_DEVICE
    try:
        silu_mul(torch.randn(3, 5, device=device))
    except ValueError as err:
        expect("x" in str(err), f"the ValueError for an odd width says {str(err)!r}, which does "
               "not name the argument", "e.g. ValueError(f'x expected an even width, got 5')")
    except NotImplementedError:
        raise
    except Exception as err:
        raise Mismatch(f"x of width 5 (odd) raised {type(err).__name__}: {err}",
                       "check x.shape[1] % 2 first and raise ValueError naming x") from err
    else:
        raise Mismatch("x of width 5 (odd) was accepted: the halves do not line up",
                       "check x.shape[1] % 2 and raise ValueError naming x")
    # first the addresses (in the interpreter, so that a store past y is caught, not done): a
    # load past x whose lanes are never stored leaves y right, only the addresses show it
    bounds = expect_bounds(silu_mul, [(f"x {r}x{w}", (fenced(r, w),))
                                      for r, w in ((3, 10), (1, 2), (17, 2002))], "silu_mul")
    for dtype in _silu_dtypes():
        atol, rtol = _SILU_TOL[dtype]
        r = lambda *shape, dt=dtype: torch.randn(*shape, device=device).to(dt)
        # exp(-a) overflows 16 bits below a = -11.1: silu computed in fp16 gives 0 there
        low = -11.5 - 1.5 * torch.rand(9, 16, device=device)
        for label, x in [("1x2", r(1, 2)), ("3x10", r(3, 10)), ("17x2002", r(17, 2002)),
                         ("empty 0x8", r(0, 8)), ("transposed view 6x40", r(40, 6).t()),
                         ("misaligned view", r(4 * 6 + 1)[1:].view(4, 6)),
                         ("large |x|", 100 * r(5, 12)),
                         ("a in [-13, -11.5]", torch.cat([low, r(9, 16)], 1).to(dtype))]:
            a, b = x.float().chunk(2, dim=-1)
            _prime_allocator(x.shape[0], x.shape[1] // 2, dtype, device)
            compare(call_answer(silu_mul, x), (F.silu(a) * b).to(dtype),
                    what=f"{label} {str(dtype).removeprefix('torch.')}", atol=atol, rtol=rtol,
                    hint="for output i: row = i // d, col = i % d; read x at row*2d + col and "
                         "row*2d + d + col (after x = x.contiguous()); compute in float32 "
                         "(.to(tl.float32) after loading: exp(-a) overflows 16 bits)")
    launched = expect_triton_kernel(silu_mul, (torch.randn(3, 10, device=device),),
                                    what="silu_mul")
    # one kernel is the point of the exercise: no half of the work left to PyTorch
    expect_one_fused_kernel(silu_mul, (torch.randn(4, 10, device=device),), "silu_mul")
    names = ", ".join(str(d).removeprefix("torch.") for d in _silu_dtypes())
    report.line(f"matches F.silu(a) * b in {names} on odd shapes, empty, views, large |x| and "
                f"a < -11 (exp(-a) past 16 bits); odd width rejected; one launch of Triton "
                f"kernel {', '.join(launched)} and no PyTorch op but the allocation")
    report.line(bounds[0] if bounds[0].startswith("not verified") else
                f"every load and store stays inside x and y (each lane's address checked in "
                f"Triton's interpreter on {', '.join(bounds)})")
    if env.HAS_CUDA:
        x = torch.randn(8192, 2 * 8192, device="cuda")
        bandwidth_verdict(report, silu_mul, (x,), x.numel() * 4 * 3 // 2)
