"""Wrong answers to exercise rmsnorm.backward, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "rmsnorm.backward"
BLIND: dict[str, str] = {
        "mean(g * x_hat) divided by BLOCK, not n_cols": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / BLOCK))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
        "last program's rows not clamped to n_rows (reads and writes past the end)": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    for row in range(first, first + rows_per_program):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
        "dweight added with tl.atomic_add into one zeroed row (no partial rows)": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.atomic_add(partial_ptr + cols, dw, mask=mask)  # one float32 row, every program adds


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.zeros((1, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
        "dweight accumulated in the input dtype (bf16 sums over the rows)": r'''
# ✏️ Exercise rmsnorm.backward: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    """Program p takes rows p * rows_per_program up to the next program's first row."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)  # dweight has the weight's dtype
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += (dy * x_hat).to(dw.dtype)
    tl.store(partial_ptr + pid * n_cols + cols, dw.to(tl.float32), mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    """Given: (dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return dx, torch.zeros(cols, dtype=weight.dtype, device=weight.device)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))
    programs = triton.cdiv(rows, rows_per_program)
    partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(programs,)](dy, x, weight, rstd, dx, partial, rows, cols,
                                    rows_per_program, BLOCK=triton.next_power_of_2(cols))
    return dx, partial.sum(0).to(weight.dtype)
''',
    }
