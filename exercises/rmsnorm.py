"""Exercise of lesson 10: the backward of a fused RMSNorm, in Triton (the course's first gradient
before lesson 09's attention backward).

The student writes the kernel; the launcher is given in the stub. The check runs it in Triton's
interpreter with every lane's address checked, then compares ``dx`` and ``dweight`` with float64
autograd of the eager RMSNorm on awkward shapes (one column, a row longer than the others'
programs can share, rows that do not divide among the programs, no rows), refuses atomics and
16-bit accumulators, and on a GPU adds bf16, asks for a bit-identical ``dweight`` on a second
run and times it against the course's backward (:mod:`kernels.rmsnorm.triton_rmsnorm`).
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
import torch

from course_utils import env
from exercises import (
    Mismatch,
    compare,
    exercise,
    expect,
    expect_triton_kernel,
    triton_checks,
)
from exercises.triton_checks import call_answer, fenced, fenced_copy

EPS = 1e-6
BACKWARD_STUB = '''
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to (not including) the next program's first
    row, or n_rows. For each of its rows (x, dy row-major, n_cols wide; rstd one float per row):
        x_hat = x * rstd, g = dy * w, dx = rstd * (g - x_hat * mean(g * x_hat)).
    Its part of dweight, the sum over its rows of dy * x_hat, goes to row p of partial (float32,
    one row per program, n_cols wide): no two programs write the same address."""
    ...


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    # a few programs per multiprocessor on a GPU (4 under the interpreter): each adds its rows'
    # dweight in registers, and partial stays small
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
'''


def _problem(rows: int, cols: int, dtype: torch.dtype, device: str, scale: float = 1.0):
    """(dy, x, weight, rstd) as the forward would have saved them."""
    x = (scale * torch.randn(rows, cols, device=device)).to(dtype)
    weight = (1 + 0.5 * torch.randn(cols, device=device)).to(dtype)
    dy = torch.randn(rows, cols, device=device).to(dtype)
    rstd = torch.rsqrt(x.double().pow(2).mean(1) + EPS).float()
    return dy, x, weight, rstd


def exact_gradients(dy, x, weight) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of the eager RMSNorm by float64 autograd."""
    x64 = x.detach().double().requires_grad_()
    w64 = weight.detach().double().requires_grad_()
    y = x64 * torch.rsqrt(x64.pow(2).mean(1, keepdim=True) + EPS) * w64
    y.backward(dy.double())
    return x64.grad, w64.grad


# (rows, cols): one column; a short row; rows that the 4 programs do not share evenly; a power of
# two; a long row (BLOCK 8192 with 3904 lanes masked off); one row
CASES = ((1, 1), (7, 33), (33, 100), (16, 64), (3, 4289), (1, 781))
# compiled, the launcher gives a GPU two programs per SM (264 on an H100): only more rows than
# that make each program add several rows into its part of dweight
GPU_CASES = ((2000, 24),)
HINT = ("per row: load x and dy (masked, other=0.0), rstd = tl.load(rstd_ptr + row); x_hat = x * "
        "rstd, g = dy * w; dx = rstd * (g - x_hat * tl.sum(g * x_hat, axis=0) / n_cols); keep "
        "dw += dy * x_hat in float32 across the program's rows and store it once, in row p of "
        "partial")


# dweight summed over many bf16 rows: every dy · x_hat > 0 (dy takes x's sign), so each column's
# sum grows to about 0.64 per row. Kept in float32 and rounded once, it is within a bf16 rounding
# (2^-8 of itself) of float64's. Kept in bf16, a program's running sum stops growing once its
# half step passes the terms it adds (from 128 up a bf16 step is 1, from 256 up 2): with the
# launcher's 4 programs on a CPU, 256 rows each, it comes out about 5% short, six times the
# tolerance below. (Fewer rows would not stall the sums; the interpreter takes ~2.6 ms a row.)
# Compiled on a GPU the launcher starts two programs per multiprocessor (264 on an H100): 262144
# rows give each of them about a thousand.
LONG_SUM = {True: (1024, 32), False: (262144, 32)}  # (rows, cols) by env.TRITON_INTERPRET
LONG_HINT = ("keep dw in float32 across the program's rows: dw = tl.zeros((BLOCK,), "
             "dtype=tl.float32) whatever the input's dtype, dw += dy * x_hat with dy and x_hat in "
             "float32; a sum kept in bf16 stops growing once its rounding step passes the terms "
             "it adds")


def _long_problem(rows: int, cols: int, device: str):
    """(dy, x, weight, rstd) in bf16 whose dy · x_hat are all positive (fixed seed)."""
    gen = torch.Generator().manual_seed(10)
    x = torch.randn(rows, cols, generator=gen)
    weight = 1 + 0.5 * torch.randn(cols, generator=gen)
    dy = torch.randn(rows, cols, generator=gen).abs() * x.sign()
    x, weight, dy = (t.to(device, torch.bfloat16) for t in (x, weight, dy))
    rstd = torch.rsqrt(x.double().pow(2).mean(1) + EPS).float()
    return dy, x, weight, rstd


@contextlib.contextmanager
def _bf16_arithmetic():
    """In Triton's interpreter, arithmetic on bf16 values as a GPU does it: each result of an
    elementwise operation rounded to bf16, to nearest even. The interpreter keeps bf16 values as
    their 16-bit patterns (uint16) and operates on those as integers (0.7 + 0.7 in bf16 came out
    as 7.6e37), so a running sum kept in bf16 gave noise where a GPU's stops growing, and the
    check would say "not yet" for the wrong reason. Its casts between bf16 and float32 are right
    and stay as they are. Compiled, nothing changes."""
    if not env.TRITON_INTERPRET:
        yield
        return
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    binary_op, unary_op, create_fma = builder.binary_op, builder.unary_op, builder.create_fma
    Handle = interpreter.TensorHandle

    def is_bf16(handle) -> bool:
        return getattr(handle.dtype, "scalar", handle.dtype) == tl.bfloat16

    def wide(handle) -> np.ndarray:  # bf16 patterns -> float32 (exact)
        return (np.asarray(handle.data).astype(np.uint32) << np.uint32(16)).view(np.float32)

    def narrow(values: np.ndarray) -> np.ndarray:  # float32 -> bf16 patterns, to nearest even
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
        return np.where(np.isnan(values), np.uint16(0x7FC0),
                        (rounded >> np.uint32(16)).astype(np.uint16))

    def binary(self, lhs, rhs, op):
        if not is_bf16(lhs):
            return binary_op(self, lhs, rhs, op)
        out = op(wide(lhs), wide(rhs))
        if out.dtype == np.bool_:  # a comparison: as the interpreter returns one
            return Handle(out, lhs.dtype.scalar)
        return Handle(narrow(out), tl.bfloat16)

    def unary(self, arg, op):
        if not is_bf16(arg):
            return unary_op(self, arg, op)
        return Handle(narrow(op(wide(arg))), tl.bfloat16)

    def fma(self, x, y, z):
        if not is_bf16(z):
            return create_fma(self, x, y, z)
        return Handle(narrow(wide(x) * wide(y) + wide(z)), tl.bfloat16)

    with mock.patch.object(builder, "binary_op", binary), \
            mock.patch.object(builder, "unary_op", unary), \
            mock.patch.object(builder, "create_fma", fma):
        yield


def _long_sums(rmsnorm_backward) -> str:
    """dweight of :func:`_long_problem` within two bf16 roundings of float64's (dx within the
    bf16 cases' tolerance); the report line."""
    rows, cols = LONG_SUM[env.TRITON_INTERPRET]
    dy, x, weight, rstd = _long_problem(rows, cols, env.DEFAULT_DEVICE)
    with _bf16_arithmetic():
        dx, dweight = call_answer(rmsnorm_backward, dy, x, weight, rstd)
    exact_dx, exact_dw = exact_gradients(dy, x, weight)
    what = (f"{rows}x{cols} bfloat16, every dy · x_hat > 0 (each column of dweight a sum of "
            f"{rows} positive terms, about {float(exact_dw.mean()):.0f})")
    compare(dx, exact_dx.to(torch.bfloat16), what=f"dx, {what}", atol=2e-2, rtol=2e-2, hint=HINT)
    # rounding the float32 sum to bf16 once moves it by at most 2^-8 of itself: two roundings
    # allowed; a float32 sum's own error is far below it
    compare(dweight.float(), exact_dw.float(), what=f"dweight, {what}", rtol=2.0**-7,
            atol=1e-5 * float(exact_dw.abs().max()), hint=LONG_HINT)
    return (f"dweight over {rows} bf16 rows of positive terms within a bf16 rounding of "
            "float64's (summed in float32)")


def _bounds(rmsnorm_backward) -> str:
    """Every lane's address inside dy, x, weight, rstd, dx and the partial buffer, and no
    masked-off lane without other= reaching dx or dweight (the interpreter gives those NaN,
    :func:`exercises.triton_checks.interpreted_memory`); the report line."""
    copy = triton_checks.interpreted(rmsnorm_backward)
    labels = []
    for rows, cols in ((7, 33), (5, 4)):
        args = tuple(fenced(*t.shape).copy_(t) for t in _problem(rows, cols, torch.float32,
                                                                 "cpu"))
        out = []
        with triton_checks.interpreted_memory() as seen:
            unchecked = triton_checks.expect_in_bounds(
                lambda args=args, out=out: out.append(call_answer(copy, *args)),
                f"your backward on {rows}x{cols}")
        if unchecked:
            return unchecked
        nan = any(isinstance(t, torch.Tensor) and t.isnan().any() for t in out[0])
        expect(not (seen["undefined"] and nan), f"{rows}x{cols}: dx or dweight is NaN: a "
               "masked tl.load without other= gives its masked-off lanes undefined values "
               "(NaN here), and they reached a row's sum", "load with other=0.0: a padding "
               "lane must add nothing to tl.sum(g * x_hat)")
        labels.append(f"{rows}x{cols}")
    return (f"every load and store inside the tensors, no undefined lane in a sum (each lane "
            f"checked in Triton's interpreter on {', '.join(labels)})")


def backward_child(source: str, small: bool) -> dict:
    """The GPU child of rmsnorm.backward (:data:`exercises.kernel_checks.CHILDREN`), under
    compute-sanitizer where the GPU's Triton cannot interpret a copy: the compiled answer on
    :data:`CASES`, each tensor an allocation of its own exact size."""
    import json

    from exercises import triton_child

    answer = triton_child.imported(source)
    for rows, cols in CASES:
        print(json.dumps({"case": f"{rows}x{cols}"}), flush=True)
        answer.rmsnorm_backward(*_problem(rows, cols, torch.float32, "cuda"))
        torch.cuda.synchronize()
    return {"ok": True}


def _sanitized(rmsnorm_bwd_kernel, rmsnorm_backward) -> str:
    from exercises import triton_child

    return "; ".join(triton_child.sanitized(
        "rmsnorm.backward", rmsnorm_backward, rmsnorm_bwd_kernel,
        cases=", ".join(f"{r}x{c}" for r, c in CASES)))


@exercise("rmsnorm.backward", title="The RMSNorm backward in Triton", stub=BACKWARD_STUB,
          answers=("rmsnorm_bwd_kernel", "rmsnorm_backward"), section="The backward, derived",
          intro="""
Write `rmsnorm_bwd_kernel` (the launcher below it is given). Each program owns a group of rows:
for each it computes `dx` from the formula above, and it adds `dy · x̂` over its rows into a
float32 vector that it stores once, in its own row of `partial`; the launcher adds the rows of
`partial` (`partial.sum(0)`). No `tl.atomic_add`: the sum would then depend on which program adds
first, and change from run to run. The check runs it in Triton's interpreter with every lane's
address checked, then compares `dx` and `dweight` with float64 autograd of the eager RMSNorm on
1 × 1, 7 × 33, 33 × 100 (rows the four programs share unevenly), 16 × 64, 3 × 4289, 1 × 781 and
an empty input; on a GPU also 2000 × 24 (more rows than programs: each adds several), in bf16,
twice (`dweight` must be bit-identical), and timed against the course's backward.""")
def check_backward(rmsnorm_bwd_kernel, rmsnorm_backward, report) -> None:
    source = triton_checks.kernel_source(rmsnorm_bwd_kernel)
    expect("atomic" not in source, "rmsnorm_bwd_kernel uses an atomic: the programs would add "
           "into dweight in whatever order they finish, so its last bits change from run to "
           "run", "accumulate the program's rows in a float32 vector and store it once in row "
           "tl.program_id(0) of partial")
    expect("tl.float16" not in source and "tl.bfloat16" not in source, "rmsnorm_bwd_kernel "
           "uses a 16-bit type: a sum over thousands of rows in 16 bits loses its low bits",
           "accumulate in float32: tl.zeros((BLOCK,), dtype=tl.float32), and x.to(tl.float32)")
    if lines := triton_checks.masked_loads_without_other(rmsnorm_bwd_kernel):
        raise Mismatch(f"line {lines[0]} of rmsnorm_bwd_kernel (from @triton.jit): a masked "
                       "tl.load without other=: its masked-off lanes (past n_cols) hold "
                       "undefined values, and the row's sum of g * x_hat adds them (compiled "
                       "Triton often gives 0 there, by luck; the interpreter gives NaN)", HINT)
    bounds = _bounds(rmsnorm_backward)
    if bounds.startswith("not verified") and env.HAS_CUDA:
        bounds = _sanitized(rmsnorm_bwd_kernel, rmsnorm_backward)
    device = env.DEFAULT_DEVICE
    dtypes = [torch.float32] + ([torch.bfloat16] if not env.TRITON_INTERPRET else [])
    cases = CASES + (() if env.TRITON_INTERPRET else GPU_CASES)
    for dtype in dtypes:
        tol = 1e-4 if dtype == torch.float32 else 2e-2
        for rows, cols in cases:
            # NaN fences: compiled, a load past a tensor without its mask reads NaN, not the
            # plausible numbers of whatever tensor the allocator put next to it
            dy, x, weight, rstd = map(fenced_copy, _problem(rows, cols, dtype, device))
            dx, dweight = call_answer(rmsnorm_backward, dy, x, weight, rstd)
            exact_dx, exact_dw = exact_gradients(dy, x, weight)
            what = f"{rows}x{cols} {str(dtype).removeprefix('torch.')}"
            compare(dx, exact_dx.to(dtype), what=f"dx, {what}", atol=tol, rtol=tol, hint=HINT)
            # dweight sums over the rows: its error grows with them (scaled by the largest)
            scale = float(exact_dw.abs().max()) if exact_dw.numel() else 1.0
            compare(dweight, exact_dw.to(dtype), what=f"dweight, {what}", atol=tol * scale,
                    rtol=tol, hint=HINT)
    dy, x, weight, rstd = _problem(0, 8, torch.float32, device)
    dx, dweight = call_answer(rmsnorm_backward, dy, x, weight, rstd)
    compare(dweight, torch.zeros(8, device=device), what="dweight of no rows", hint=HINT)
    long_sums = _long_sums(rmsnorm_backward)
    expect_triton_kernel(rmsnorm_backward, _problem(7, 33, torch.float32, device),
                         what="rmsnorm_backward")
    how = "Triton's interpreter" if env.TRITON_INTERPRET else "compiled Triton"
    report.line(f"dx and dweight match float64 autograd in {', '.join(str(d)[6:] for d in dtypes)}"
                f" on {', '.join(f'{r}x{c}' for r, c in cases)} and no rows ({how})")
    report.line(long_sums)
    report.line(bounds)
    if not env.HAS_CUDA:
        report.line("speed and a bit-identical dweight on a second run: measured only on a GPU")
        return
    from course_utils import timing
    from kernels.rmsnorm import triton_rmsnorm

    dy, x, weight, rstd = _problem(16384, 4096, torch.bfloat16, "cuda")
    first = rmsnorm_backward(dy, x, weight, rstd)[1]
    expect(torch.equal(first, rmsnorm_backward(dy, x, weight, rstd)[1]), "dweight changed "
           "between two runs on the same input: the order of its additions is not fixed",
           "one row of partial per program, written once; no atomics")
    nbytes = 3 * x.numel() * x.element_size()  # dy and x read, dx written
    times = {name: timing.benchmark(fn, dy, x, weight, rstd, name=name).median
             for name, fn in (("yours", rmsnorm_backward), ("course", triton_rmsnorm.backward))}
    copy = timing.copy_bandwidth(nbytes // 2)
    gbs = {k: timing.gbps(nbytes, t) for k, t in times.items()}
    report.line(f"16384x4096 bf16: {gbs['yours']:,.0f} GB/s = {gbs['yours'] / copy:.0%} of copy "
                f"({copy:,.0f} GB/s), the course's backward {gbs['course']:,.0f} GB/s, same run; "
                "dweight bit-identical on a second run")
    if times["yours"] > 1.05 * times["course"]:
        report.line("the course's kernel loads each next row before it reduces the current one: "
                    "section 5's \"Loading the next row ahead\" measures what that buys")
