"""Fused RMSNorm in Triton, forward and backward, as one differentiable op.

**Forward** (:func:`forward`): one program per row, the whole row in registers (BLOCK = the next
power of two ≥ hidden, masked). It reads x and the weight once, sums x² in float32, and writes
``y = x · rstd · w`` and ``rstd = 1 / sqrt(mean(x²) + eps)``, one float per row, saved for the
backward. (The backward reads x anyway and could recompute rstd; saving it costs 4 bytes a row
and spares the backward one reduction per row: the usual choice.)

**Backward** (:func:`backward`). With ``x̂ = x · rstd`` (the normalised row) and ``g = dy · w``:

* ``dx = rstd · (g - x̂ · mean(g · x̂))``: a row reduction again, so one row per loop step;
* ``dweight = Σ_rows dy · x̂``: a sum over *every* row, the part that needs care.

Every program adding its rows into one ``dweight`` with ``tl.atomic_add`` would be correct only up
to rounding that depends on which program happens to add first, so it changes from run to run
(float addition is not associative: the gradient would not be reproducible), and every program
would hammer the same ``hidden`` addresses. Instead each program owns a group of rows, accumulates
its part of ``dweight`` in float32 registers, and writes it to its own row of a ``(programs,
hidden)`` buffer: no two programs write the same address. A second, small kernel
(``rmsnorm_dweight_kernel``) adds the buffer's rows in float32 and rounds the sum once to the
weight's dtype. The buffer has a few rows per SM, not one per row of x (at hidden 8192 on an
H100's 132 SMs, four programs each: 17 MiB of float32, written once and read once, against the
768 MiB of bf16 that the backward of 16k rows must move), so the second pass costs the GPU little;
it is a kernel of our own rather than ``partial.sum(0).to(weight.dtype)`` because that is two
launches (the sum, then the rounding) and a float32 vector between them, and at a small problem
every launch is host time (lesson 11's table). The result is deterministic: same shapes, same
groups, same order of additions.

**Loading ahead.** A program's loop waits twice per row: for the row's loads, then for its
reduction (``tl.sum`` across the warps goes through shared memory and a barrier). While it
reduces, a program that loads only the row it works on has nothing in flight, and with a few
programs per SM nobody else fills the gap. So the kernel loads row r + 1 before it reduces row r
(``PREFETCH``): on an H100 at 16k rows that took the backward from 0.83 to 0.96 of copy bandwidth
at hidden 8192 and from 0.87 to 0.95 at 4096 (``docs/results/*rmsnorm-bwd-variants-2dd71f1.txt``,
where Triton's own pipelining of the loop, ``tl.range(num_stages=3)``, reached 0.93 and 0.92).
The forward needs no such thing: one row per program, and many programs per SM to overlap.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.gelu.triton_gelu import triton_device_check
from kernels.registry import register
from kernels.rmsnorm.op import EPS, KERNEL_DTYPES
from kernels.softmax.triton_softmax import num_warps_for
from kernels.triton_launch import Launcher, cdiv, next_power_of_2

# The backward keeps four row-sized float32 vectors live (x, dy·w, the weight and the dweight
# accumulator): at 16384 columns and 16 warps that is already 4 x 32 registers a thread; past
# it they would spill to (slow) local memory, and a kernel that loops over a row would win.
MAX_COLUMNS = 1 << 14
# Backward programs per SM on a GPU: few, so the partial buffer stays small. With the loads
# ahead, 1, 2 and 4 were within 1% of each other at hidden 8192 on an H100; at 4096, 4 was the
# best (0.97 of copy against 0.95 with 2 and 0.83 with 1: shorter rows leave more to overlap)
PROGRAMS_PER_SM = 4
INTERPRETER_PROGRAMS = 4  # on a CPU: still several, so the partial-sum buffer has rows to add


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_cols, x_row_stride, x_col_stride,
                       w_stride, y_row_stride, eps, ACC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row · stride can pass 2^31
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # padding reads 0: it adds nothing to Σx², and n_cols (not BLOCK) divides the sum
    x = tl.load(x_ptr + row * x_row_stride + cols * x_col_stride, mask=mask,
                other=0.0).to(ACC)
    w = tl.load(w_ptr + cols * w_stride, mask=mask, other=0.0).to(ACC)
    # 1 / sqrt, not tl.rsqrt (an approximate instruction on the GPU): once per row, so it costs
    # nothing, and float64 input (what gradcheck runs) keeps float64 accuracy
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    y = x * rstd * w
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, dy_row_stride, dy_col_stride, x_row_stride,
                       x_col_stride, w_stride, dx_row_stride, partial_row_stride,
                       ACC: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols * w_stride, mask=mask, other=0.0).to(ACC)  # once per program
    dw = tl.zeros((BLOCK,), dtype=ACC)  # this program's part of dweight
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)  # the last group may be short
    x_at = x_ptr + cols * x_col_stride  # a row's addresses, less the row's offset
    dy_at = dy_ptr + cols * dy_col_stride
    if PREFETCH:  # the first row before the loop; each step loads the one after its own
        x_next = tl.load(x_at + first * x_row_stride, mask=mask, other=0.0)
        dy_next = tl.load(dy_at + first * dy_row_stride, mask=mask, other=0.0)
    for row in range(first, last):
        if PREFETCH:
            x, dy = x_next.to(ACC), dy_next.to(ACC)
            ahead = mask & (row + 1 < last)  # the group's last row loads nothing ahead
            # issued now, awaited next step: in flight while this row is reduced below
            x_next = tl.load(x_at + (row + 1) * x_row_stride, mask=ahead, other=0.0)
            dy_next = tl.load(dy_at + (row + 1) * dy_row_stride, mask=ahead, other=0.0)
        else:
            x = tl.load(x_at + row * x_row_stride, mask=mask, other=0.0).to(ACC)
            dy = tl.load(dy_at + row * dy_row_stride, mask=mask, other=0.0).to(ACC)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        # d(rstd)/dx feeds every column's x back into each dx: the row's mean of g · x̂
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    # one row of the partial buffer per program: no other program writes here (no atomics)
    tl.store(partial_ptr + pid * partial_row_stride + cols, dw, mask=mask)


@triton.jit
def rmsnorm_dweight_kernel(partial_ptr, dw_ptr, n_partials, n_cols, partial_row_stride,
                           ACC: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # one program per BLOCK_N columns: walks down the partial rows BLOCK_P at a time, always in
    # the same order (deterministic), sums in ACC and rounds once, to dweight's dtype
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    total = tl.zeros((BLOCK_N,), dtype=ACC)
    for start in range(0, n_partials, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        ok = (rows[:, None] < n_partials) & col_ok[None, :]
        block = tl.load(partial_ptr + rows[:, None] * partial_row_stride + cols[None, :],
                        mask=ok, other=0.0)
        total += tl.sum(block, axis=0)
    tl.store(dw_ptr + cols, total.to(dw_ptr.dtype.element_ty), mask=col_ok)


# the dweight kernel's tile: 32 partial rows x 64 columns a step (4 warps, 16 floats a thread);
# 64 programs at hidden 4096. (Reasoned, not timed: a few microseconds of GPU time either way.)
DWEIGHT_ROWS, DWEIGHT_COLUMNS = 32, 64


def _acc(dtype: torch.dtype) -> tuple[torch.dtype, tl.dtype]:
    """Accumulate in float32, in float64 for float64 input (for gradcheck)."""
    return (torch.float64, tl.float64) if dtype == torch.float64 else (torch.float32, tl.float32)


def _launch_options(block: int) -> dict:
    # the interpreter has no warps; on a GPU, more warps for longer rows (softmax's rule)
    return {} if env.TRITON_INTERPRET else {"num_warps": num_warps_for(block)}


@functools.cache
def _sm_count(device: int) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def backward_programs(rows: int, device: torch.device) -> int:
    """How many programs share the backward's rows (each writes one row of partial dweight)."""
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return max(1, min(rows, PROGRAMS_PER_SM * _sm_count(index)))
    return max(1, min(rows, INTERPRETER_PROGRAMS))


def forward(x: torch.Tensor, weight: torch.Tensor,
            eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y, rstd)`` for a 2-D x and a 1-D weight of x's dtype and length x.shape[1] (the op's
    validation, not repeated here). ``rstd`` holds ``1/sqrt(mean(x²) + eps)`` per row in
    float32 (float64 for float64 x); NaN for rows of no columns, as torch's mean of nothing."""
    rows, cols = x.shape
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    rstd = torch.empty(rows, dtype=acc, device=x.device)
    if rows == 0 or cols == 0:
        return y, rstd.fill_(float("nan"))

    def make():  # once per problem: what the key below holds is all it reads
        block = next_power_of_2(cols)
        # strides, not .contiguous(): a transposed x or a strided weight is read in place
        return ((rows,), (cols, x.stride(0), x.stride(1), weight.stride(0), y.stride(0),
                          float(eps)),
                {"ACC": _acc(x.dtype)[1], "BLOCK": block, **_launch_options(block)})

    _forward_launch((x.shape, x.stride(), weight.stride(), eps), (x, weight, y, rstd), make)
    return y, rstd


def backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
             prefetch: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx, dweight)`` from the output gradient ``dy`` (x's shape, any strides) and what the
    forward saved: x, weight and rstd. ``prefetch=False`` runs the loop without loading ahead,
    as the exercise's kernel does: to measure what loading ahead buys."""
    rows, cols = x.shape
    dx = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    if rows == 0 or cols == 0:  # dweight is a sum over no rows: zero
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    programs, rows_per_program = _split(rows, x.device)
    partial = torch.empty((programs, cols), dtype=rstd.dtype, device=x.device)

    def make():
        block = next_power_of_2(cols)
        return ((programs,), (rows, cols, rows_per_program, dy.stride(0), dy.stride(1),
                              x.stride(0), x.stride(1), weight.stride(0), dx.stride(0),
                              partial.stride(0)),
                {"ACC": _acc(x.dtype)[1], "BLOCK": block, "PREFETCH": prefetch,
                 **_launch_options(block)})

    key = (x.shape, x.stride(), dy.stride(), weight.stride(), prefetch)
    _backward_launch(key, (dy, x, weight, rstd, dx, partial), make)
    # the second reduction: (programs, hidden) -> (hidden,), in float32, rounded once
    dweight = torch.empty(cols, dtype=weight.dtype, device=x.device)
    _dweight_launch(key, (partial, dweight), lambda: (
        (cdiv(cols, DWEIGHT_COLUMNS),), (programs, cols, partial.stride(0)),
        {"ACC": _acc(x.dtype)[1], "BLOCK_P": DWEIGHT_ROWS, "BLOCK_N": DWEIGHT_COLUMNS}))
    return dx, dweight


# The kernels' launchers: a problem's grid, sizes, strides and compiled kernel are worked out on
# its first call and looked up on every later one (kernels/triton_launch.py says why and how)
_forward_launch = Launcher(rmsnorm_fwd_kernel)
_backward_launch = Launcher(rmsnorm_bwd_kernel)
_dweight_launch = Launcher(rmsnorm_dweight_kernel)


@functools.lru_cache(maxsize=256)  # per (rows, device): the same answer for every call
def _split(rows: int, device: torch.device) -> tuple[int, int]:
    """(programs, rows per program) of the backward: no program is left without rows."""
    rows_per_program = cdiv(rows, backward_programs(rows, device))
    return cdiv(rows, rows_per_program), rows_per_program


class RMSNormFunction(torch.autograd.Function):
    """The two kernels as one differentiable op: ``RMSNormFunction.apply(x, weight, eps)``."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        y, rstd = forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)  # rstd: 4 bytes a row, one reduction spared
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        dx, dweight = backward(dy, x, weight, rstd)
        return dx, dweight, None  # (eps gets no gradient)


def reason(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> str | None:
    """Why these kernels cannot run (x, weight) here, in words; None when they can."""
    if why := triton_device_check(x):  # (the op's validation puts weight on x's device)
        return why
    if x.shape[1] > MAX_COLUMNS:
        return (f"keeps a row in registers: at most {MAX_COLUMNS} columns, "
                f"got x with {x.shape[1]}")
    return None


def rmsnorm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Triton: one program per row forward; backward dx per row, dweight from partial sums."""
    # (what the registry calls, after its checks): autograd only when a gradient is wanted
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return RMSNormFunction.apply(x, weight, eps)
    return forward(x, weight, eps)[0]  # inference: no graph, rstd dropped


register("rmsnorm", "triton", fn=rmsnorm_triton, dtypes=KERNEL_DTYPES, needs=("triton",),
         check=reason,
         meta={"rows_per_program": 1, "max_columns": MAX_COLUMNS, "backward": "triton",
               "dweight_reduction": "per-program partial sums, then a column-sum kernel"})
