"""The online softmax: a softmax computed in one pass over blocks of a row.

``softmax(x)_j = e^(x_j − m) / Σ_k e^(x_k − m)`` with ``m = max(x)`` needs the maximum before it
can sum. Streaming over blocks, keep a running maximum ``m`` and a running sum ``l`` *relative
to it*; when a block raises the maximum from ``m`` to ``m'``, every term already summed was
``e^(x − m)`` and should have been ``e^(x − m')``, which is the same term times
``α = e^(m − m')``. So, per block ``x_b``:

    m' = max(m, max(x_b))        l' = α · l + Σ e^(x_b − m')        with α = e^(m − m')

Starting from ``m = −∞, l = 0`` (``α = e^(−∞) = 0`` on the first block), after the last block
``l`` is the softmax's denominator and ``m + log l`` the row's log-sum-exp. Attention applies
the same ``α`` to its running output ``acc = Σ e^(x − m) v`` (``triton_fwd.attend_block``),
so the probabilities never have to be stored (Milakov & Gimelshein, 2018; FlashAttention).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course_utils import env


def online_update(m: torch.Tensor, l: torch.Tensor, x: torch.Tensor):  # noqa: E741
    """One step in PyTorch: fold the block ``x`` (rows × n) into the running ``(m, l)`` (rows);
    returns ``(m', l', α)``."""
    m_new = torch.maximum(m, x.max(dim=-1).values)
    # a row that has seen only -inf keeps m' = -inf: exp(-inf - -inf) would be NaN
    safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    alpha = torch.exp(m - safe)
    l_new = alpha * l + torch.exp(x - safe[:, None]).sum(dim=-1)
    return m_new, l_new, alpha


def streamed_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """softmax(x, dim=-1) of a 2-D tensor from :func:`online_update` over column blocks of
    ``block``, then one more pass to normalise: the derivation run in PyTorch."""
    m = torch.full(x.shape[:1], float("-inf"), dtype=torch.float32, device=x.device)
    l = torch.zeros_like(m)  # noqa: E741
    for start in range(0, x.shape[1], block):
        m, l, _ = online_update(m, l, x[:, start:start + block].float())  # noqa: E741
    return (torch.exp(x.float() - m[:, None]) / l[:, None]).to(x.dtype)


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    """One program per row, any row length: pass 1 keeps (m, l) online over blocks of the
    row, pass 2 writes e^(x − m) / l. Two reads and one write, whatever the length (lesson 02's
    one-block softmax holds the whole row in registers instead)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)  # per lane: combined at the end
    l = tl.zeros((BLOCK,), tl.float32)  # noqa: E741
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=start + cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have seen only padding stay at -inf; keep their exp finite (0)
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        l = l * tl.exp(m - safe) + tl.exp(x - safe)  # noqa: E741
        m = m_new
    # combine the lanes: the same update, once more, across them
    m_row = tl.max(m, 0)
    l_row = tl.sum(l * tl.exp(m - m_row), 0)
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_ptr + row * stride_x + start + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + start + cols,
                 (tl.exp(x - m_row) / l_row).to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """Row softmax of a 2-D tensor with :func:`online_softmax_kernel` (columns contiguous)."""
    if x.dim() != 2:
        raise ValueError(f"softmax: x expected a 2-D tensor, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"softmax: x expected a floating-point tensor, got {x.dtype}")
    if x.shape[1] > 1 and x.stride(1) != 1:
        x = x.contiguous()  # the kernel walks a row with unit stride
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return y
    block = min(block, triton.next_power_of_2(x.shape[1]))
    launch = {} if env.TRITON_INTERPRET else {"num_warps": 4}
    online_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                         BLOCK=block, **launch)
    return y
