"""Wrong answers to exercise model.swap, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "model.swap"
BLIND: dict[str, str] = {
        "x_hat rounded to x's dtype before the products (each dy * x_hat term rounded to bf16)": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    r = rstd.reshape(-1, 1).float()
    x_hat = (x.float() * r).to(x.dtype)  # the normalised row, as the forward produced it
    g = dy * weight
    mean = (g.float() * x_hat.float()).mean(dim=-1, keepdim=True)
    dx = r * (g.float() - x_hat.float() * mean)
    dweight = (dy * x_hat).float().sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype)
''',
        "dx returned in float32, not in x's dtype": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    r = rstd.reshape(-1, 1).float()
    x_hat = x.float() * r
    g = dy.float() * weight.float()
    dx = r * (g - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    dweight = (dy.float() * x_hat).sum(dim=0)
    return dx, dweight.to(weight.dtype)
''',
        "mean(g * x_hat) taken over the whole tensor, not per row": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    r = rstd.reshape(-1, 1).float()
    x_hat = x.float() * r
    g = dy.float() * weight.float()
    dx = r * (g - x_hat * (g * x_hat).mean())
    dweight = (dy.float() * x_hat).sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype)
''',
        "Triton kernel adds dweight with tl.atomic_add (order changes the bits)": r'''
# ✏️ Exercise model.swap: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_row_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr, n_cols,
                           BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    x_hat = x * rstd
    g = dy * w
    dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
    tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.atomic_add(dw_ptr + cols, dy * x_hat, mask=mask)  # float32 sum of every row's part


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from dy and what the forward saved (x, weight, rstd)."""
    x, dy, weight = x.contiguous(), dy.contiguous(), weight.contiguous()
    rows, cols = x.shape
    dx = torch.empty_like(x)
    dw = torch.zeros(cols, dtype=torch.float32, device=x.device)
    if rows == 0 or cols == 0:
        return dx, dw.to(weight.dtype)
    rmsnorm_bwd_row_kernel[(rows,)](dy, x, weight, rstd.contiguous(), dx, dw, cols,
                                    BLOCK=triton.next_power_of_2(cols))
    return dx, dw.to(weight.dtype)
''',
    }
