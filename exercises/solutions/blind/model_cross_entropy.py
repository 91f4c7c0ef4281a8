"""Wrong answers to exercise model.cross_entropy, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

from exercises.solutions.blind import edited

ID = "model.cross_entropy"
# The first answer whole; each other one is it with its own mistake in place of the first's
# (edited: each old text occurs once in the first answer).
FIRST = 'ignored rows load their target logit unmasked (reads at column ignore_index, e.g. -100: out of bounds; value then discarded)'
BASE = r'''
# ✏️ Exercise model.cross_entropy: edit this cell, run it, then run the check below
import torch
import triton
import triton.language as tl


@triton.jit
def _ce_fwd(x_ptr, t_ptr, loss_ptr, lse_ptr, n_cols, stride_r, stride_c, ignore_index,
            BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride_r
    offs = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(base + cols.to(tl.int64) * stride_c, mask=cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))
    t = tl.load(t_ptr + row)
    valid = t != ignore_index
    xt = tl.load(base + t * stride_c).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))
    tl.store(lse_ptr + row, lse)


@triton.jit
def _ce_bwd(x_ptr, t_ptr, lse_ptr, scale_ptr, g_ptr, n_cols, stride_r, stride_c,
            g_stride_r, g_stride_c, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride_r
    gbase = g_ptr + row * g_stride_r
    t = tl.load(t_ptr + row)
    valid = t != ignore_index
    lse = tl.load(lse_ptr + row)
    scale = tl.load(scale_ptr)
    offs = tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        inside = cols < n_cols
        x = tl.load(base + cols.to(tl.int64) * stride_c, mask=inside & valid,
                    other=0.0).to(tl.float32)
        g = (tl.exp(x - lse) - tl.where(cols == t, 1.0, 0.0)) * scale
        g = tl.where(valid, g, 0.0)
        tl.store(gbase + cols.to(tl.int64) * g_stride_c, g.to(g_ptr.dtype.element_ty),
                 mask=inside)


def _block(n_cols):
    return min(triton.next_power_of_2(n_cols), 4096)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, ignore_index):
        n, v = logits.shape
        row_loss = torch.empty(n, dtype=torch.float32, device=logits.device)
        lse = torch.empty(n, dtype=torch.float32, device=logits.device)
        _ce_fwd[(n,)](logits, targets, row_loss, lse, v, logits.stride(0), logits.stride(1),
                      ignore_index, BLOCK=_block(v))
        n_valid = (targets != ignore_index).sum()
        ctx.save_for_backward(logits, targets, lse, n_valid)
        ctx.ignore_index = ignore_index
        return row_loss.sum() / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        logits, targets, lse, n_valid = ctx.saved_tensors
        n, v = logits.shape
        scale = (grad_out.float() / n_valid.float()).reshape(1)
        grad = torch.empty_like(logits)
        _ce_bwd[(n,)](logits, targets, lse, scale, grad, v, logits.stride(0), logits.stride(1),
                      grad.stride(0), grad.stride(1), ctx.ignore_index, BLOCK=_block(v))
        return grad, None, None


def cross_entropy(logits, targets, ignore_index=-100):
    """The mean cross-entropy of logits (N, V) against targets (N,), int64 class indices: the
    mean over the rows whose target is not ignore_index of logsumexp(row) - row[target].
    Returns a float32 0-d tensor, differentiable with respect to logits (your autograd
    Function), computed by your Triton kernels."""
    return _CrossEntropy.apply(logits, targets, ignore_index)
'''

BLIND: dict[str, str] = {FIRST: BASE}
BLIND["n_valid clamped to at least 1 'to avoid dividing by zero': every row ignored returns 0, not NaN"] = edited(BASE, [
    ('    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n',
     '    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n'),
    ('                      ignore_index, BLOCK=_block(v))\n        n_valid = (targets != ignore_index).sum()\n        ctx.save_for_backward(logits, targets, lse, n_valid)\n',
     '                      ignore_index, BLOCK=_block(v))\n        n_valid = (targets != ignore_index).sum().clamp(min=1)  # avoid 0 / 0\n        ctx.save_for_backward(logits, targets, lse, n_valid)\n'),
])
BLIND['a row counts when target >= 0 (not target != ignore_index): wrong when ignore_index is a class id or non-negative'] = edited(BASE, [
    ('    t = tl.load(t_ptr + row)\n    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n',
     '    t = tl.load(t_ptr + row)\n    valid = t >= 0\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n'),
    ('    t = tl.load(t_ptr + row)\n    valid = t != ignore_index\n    lse = tl.load(lse_ptr + row)\n',
     '    t = tl.load(t_ptr + row)\n    valid = t >= 0\n    lse = tl.load(lse_ptr + row)\n'),
    ('                      ignore_index, BLOCK=_block(v))\n        n_valid = (targets != ignore_index).sum()\n        ctx.save_for_backward(logits, targets, lse, n_valid)\n',
     '                      ignore_index, BLOCK=_block(v))\n        n_valid = (targets >= 0).sum()\n        ctx.save_for_backward(logits, targets, lse, n_valid)\n'),
])
BLIND["gradient written into a float32 (N, V) buffer then cast to the logits' dtype (a forbidden float32 N*V tensor for bf16/fp16)"] = edited(BASE, [
    ('    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n',
     '    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n'),
    ('        scale = (grad_out.float() / n_valid.float()).reshape(1)\n        grad = torch.empty_like(logits)\n        _ce_bwd[(n,)](logits, targets, lse, scale, grad, v, logits.stride(0), logits.stride(1),\n                      grad.stride(0), grad.stride(1), ctx.ignore_index, BLOCK=_block(v))\n        return grad, None, None\n\n',
     '        scale = (grad_out.float() / n_valid.float()).reshape(1)\n        grad = torch.empty_like(logits, dtype=torch.float32)  # accumulate in fp32\n        _ce_bwd[(n,)](logits, targets, lse, scale, grad, v, logits.stride(0), logits.stride(1),\n                      grad.stride(0), grad.stride(1), ctx.ignore_index, BLOCK=_block(v))\n        return grad.to(logits.dtype), None, None\n\n'),
])
BLIND["backward's store mask off by one (cols <= n_cols): writes one element past each row's end"] = edited(BASE, [
    ('    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n',
     '    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n'),
    ('        tl.store(gbase + cols.to(tl.int64) * g_stride_c, g.to(g_ptr.dtype.element_ty),\n                 mask=inside)\n\n',
     '        tl.store(gbase + cols.to(tl.int64) * g_stride_c, g.to(g_ptr.dtype.element_ty),\n                 mask=cols <= n_cols)\n\n'),
])
BLIND['scalar running max per chunk with no -inf guard: a whole chunk of -inf before any finite logit gives exp(-inf - -inf) = NaN'] = edited(BASE, [
    ('    offs = tl.arange(0, BLOCK)\n    m = tl.full((BLOCK,), float("-inf"), tl.float32)\n    s = tl.zeros((BLOCK,), tl.float32)\n    for start in range(0, n_cols, BLOCK):\n',
     '    offs = tl.arange(0, BLOCK)\n    m = float("-inf")\n    s = 0.0\n    for start in range(0, n_cols, BLOCK):\n'),
    ('                    other=float("-inf")).to(tl.float32)\n        m_new = tl.maximum(m, x)\n        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)\n        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)\n        m = m_new\n    mx = tl.max(m, axis=0)\n    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))\n    t = tl.load(t_ptr + row)\n    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n',
     '                    other=float("-inf")).to(tl.float32)\n        m_new = tl.maximum(m, tl.max(x, axis=0))\n        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)\n        m = m_new\n    lse = m + tl.log(s)\n    t = tl.load(t_ptr + row)\n    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n'),
])
BLIND['BLOCK = next_power_of_2(V) with no cap: one chunk of the whole row, above 4096 for a wide vocabulary'] = edited(BASE, [
    ('    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n',
     '    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n'),
    ('def _block(n_cols):\n    return min(triton.next_power_of_2(n_cols), 4096)\n\n',
     'def _block(n_cols):\n    return triton.next_power_of_2(n_cols)\n\n'),
])
BLIND['the loss summed across rows with tl.atomic_add into one float (order-dependent float sum: not the same bits run to run)'] = edited(BASE, [
    ('    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c).to(tl.float32)\n    tl.store(loss_ptr + row, tl.where(valid, lse - xt, 0.0))\n    tl.store(lse_ptr + row, lse)\n',
     '    valid = t != ignore_index\n    xt = tl.load(base + t * stride_c, mask=valid, other=0.0).to(tl.float32)\n    tl.atomic_add(loss_ptr, tl.where(valid, lse - xt, 0.0))\n    tl.store(lse_ptr + row, lse)\n'),
    ('        n, v = logits.shape\n        row_loss = torch.empty(n, dtype=torch.float32, device=logits.device)\n        lse = torch.empty(n, dtype=torch.float32, device=logits.device)\n',
     '        n, v = logits.shape\n        row_loss = torch.zeros(1, dtype=torch.float32, device=logits.device)\n        lse = torch.empty(n, dtype=torch.float32, device=logits.device)\n'),
    ('        ctx.ignore_index = ignore_index\n        return row_loss.sum() / n_valid\n\n',
     '        ctx.ignore_index = ignore_index\n        return row_loss[0] / n_valid\n\n'),
])

