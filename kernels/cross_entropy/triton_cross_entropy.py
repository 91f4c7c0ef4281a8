"""Fused cross-entropy in Triton, forward and backward, as one differentiable op.

The loss of a row is ``lse(x) - x[target]``, with ``lse(x) = log Σ exp(x)``; its gradient is
``(softmax(x) - one_hot(target)) · grad_out / n_valid`` (the mean is over the ``n_valid`` rows
whose target is not ``ignore_index``; an ignored row adds nothing to the loss and gets a zero
gradient). A language model's vocabulary is wide (GPT-2's 50257): a row does not fit in
registers, so each program walks its row in chunks of ``BLOCK`` columns.

**Forward** (:func:`forward`): one pass over the row with the *online* log-sum-exp. Each lane
keeps its own running maximum ``m`` and sum ``s`` of ``exp(x - m)``, rescaling ``s`` by
``exp(m_old - m_new)`` when its maximum grows; the lanes are combined once, after the last
chunk (one cross-warp reduction per row, not two per chunk). The maximum starts at -inf, not 0:
a row whose every logit is near -200 would otherwise sum ``exp(-200)`` terms, which underflow
to 0 in float32 (log 0 = -inf); and ``exp(x - m)`` never overflows for logits of several
hundred. Until a lane has seen a finite logit its maximum is -inf and ``exp(-inf - (-inf))``
would be NaN, so it subtracts 0 there. The forward writes the row's loss and its ``lse``
(4 bytes a row, saved for the backward).

**Backward** (:func:`backward`): the second pass over the row writes ``(exp(x - lse) -
one_hot) · grad_out / n_valid`` beside the logits, in their dtype. ``grad_out`` and ``n_valid``
stay on the device (read by the kernel through pointers): no host synchronisation, so the step
can be captured in a CUDA graph (lesson 12's ``graphed.py``).

Liger-Kernel (``src/liger_kernel/ops/cross_entropy.py``) organises it differently, for memory:
its *forward* runs both passes and writes the gradient **in place of the logits**, so the
(N, V) logits' memory is reused for the gradient and the backward only rescales it by
``grad_out`` (skipped when it is 1, which it learns with a host synchronisation). At GPT-2's
8192 x 50257 in bf16 that saves one 823 MB buffer at the peak, the reason it exists; the
price is that the caller's logits are overwritten behind autograd's back (nothing may read them
after the loss) and a ``grad_out`` other than 1 costs a third pass. Here the logits stay what
they were, the backward reads ``grad_out`` itself, and the bytes moved are the same: the
logits read twice, the gradient written once. Neither makes a float32 (N, V) tensor, where
``F.cross_entropy`` on upcast logits keeps a float32 log-softmax (1.6 GB at that size) for its
backward.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.cross_entropy.op import FLOAT_DTYPES, IGNORE_INDEX
from kernels.gelu.triton_gelu import triton_device_check
from kernels.registry import register
from kernels.triton_launch import Launcher, next_power_of_2

# Columns per chunk. A chunk is 16 floats a thread at 8 warps: enough loads in flight per
# thread, no spills. (Reasoned, not tuned: the bench measures what it reaches.)
MAX_BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def cross_entropy_fwd_kernel(logits_ptr, targets_ptr, loss_ptr, lse_ptr, n_cols, row_stride,
                             col_stride, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row · stride can pass 2^31
    row_ptr = logits_ptr + row * row_stride
    lanes = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)  # each lane's running maximum
    s = tl.zeros((BLOCK,), tl.float32)  # each lane's Σ exp(x - m)
    for start in range(0, n_cols, BLOCK):
        cols = start + lanes
        # padding reads -inf: exp(-inf - m) = 0 adds nothing
        x = tl.load(row_ptr + cols.to(tl.int64) * col_stride, mask=cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a lane that has seen only -inf keeps m = -inf: subtract 0 there, not -inf (NaN)
        m_sub = tl.where(m_new > float("-inf"), m_new, 0.0)
        s = s * tl.exp(m - m_sub) + tl.exp(x - m_sub)
        m = m_new
    row_max = tl.max(m, axis=0)  # finite: the target's logit is finite
    lse = row_max + tl.log(tl.sum(s * tl.exp(m - row_max), axis=0))  # (a -inf lane adds 0)
    target = tl.load(targets_ptr + row)
    counted = target != ignore_index
    # the target's logit (an ignored row's target is no column: nothing loaded)
    x_target = tl.load(row_ptr + target * col_stride, mask=counted, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(counted, lse - x_target, 0.0))
    tl.store(lse_ptr + row, lse)


@triton.jit
def cross_entropy_bwd_kernel(logits_ptr, targets_ptr, lse_ptr, grad_out_ptr, n_valid_ptr,
                             grad_ptr, n_cols, row_stride, col_stride, grad_row_stride,
                             grad_col_stride, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * row_stride
    grad_row = grad_ptr + row * grad_row_stride
    target = tl.load(targets_ptr + row)
    counted = target != ignore_index
    lse = tl.load(lse_ptr + row)
    # grad_out / n_valid, read here: no host sync (n_valid = 0 only when every row is ignored,
    # and then no row multiplies by it)
    scale = tl.load(grad_out_ptr).to(tl.float32) / tl.load(n_valid_ptr).to(tl.float32)
    lanes = tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        cols = start + lanes
        inside = cols < n_cols
        x = tl.load(row_ptr + cols.to(tl.int64) * col_stride, mask=inside & counted,
                    other=0.0).to(tl.float32)
        g = (tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)) * scale
        # an ignored row's gradient is 0, written, not computed (0 · inf would be NaN)
        g = tl.where(counted, g, 0.0)
        tl.store(grad_row + cols.to(tl.int64) * grad_col_stride,
                 g.to(grad_ptr.dtype.element_ty), mask=inside)


def _block(cols: int) -> int:
    return min(next_power_of_2(cols), MAX_BLOCK)


def _launch_options() -> dict:
    return {} if env.TRITON_INTERPRET else {"num_warps": NUM_WARPS}  # (no warps there)


def forward(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, lse, n_valid)``: the mean loss (float32, 0-d; NaN when every row is ignored, as
    PyTorch's), each row's log-sum-exp (float32) and the number of rows that count (a 0-d
    tensor on the device: never read on the host)."""
    rows, cols = logits.shape
    row_loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
    lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
    n_valid = (targets != ignore_index).sum()
    if rows:
        _forward_launch(
            (logits.shape, logits.stride(), ignore_index), (logits, targets, row_loss, lse),
            lambda: ((rows,), (cols, logits.stride(0), logits.stride(1), ignore_index),
                     {"BLOCK": _block(cols), **_launch_options()}))
    # a fixed-order sum of N floats (deterministic), then the mean over the rows that count
    return row_loss.sum() / n_valid, lse, n_valid


def backward(grad_out: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor,
             lse: torch.Tensor, n_valid: torch.Tensor,
             ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """The logits' gradient, in their dtype and (for a dense view) their strides."""
    rows, cols = logits.shape
    grad = torch.empty_like(logits)  # a transposed view keeps its layout; a slice gets dense
    grad_out = grad_out.to(torch.float32).reshape(())  # (0-d: one float the kernel reads)
    if rows:
        key = (logits.shape, logits.stride(), grad.stride(), ignore_index)
        _backward_launch(
            key, (logits, targets, lse, grad_out, n_valid, grad),
            lambda: ((rows,), (cols, logits.stride(0), logits.stride(1), grad.stride(0),
                               grad.stride(1), ignore_index),
                     {"BLOCK": _block(cols), **_launch_options()}))
    return grad


# a problem's grid, sizes and compiled kernel worked out once (kernels/triton_launch.py)
_forward_launch = Launcher(cross_entropy_fwd_kernel)
_backward_launch = Launcher(cross_entropy_bwd_kernel)


class CrossEntropyFunction(torch.autograd.Function):
    """The two kernels as one differentiable op:
    ``CrossEntropyFunction.apply(logits, targets, ignore_index)``."""

    @staticmethod
    def forward(ctx, logits, targets, ignore_index):
        loss, lse, n_valid = forward(logits, targets, ignore_index)
        ctx.save_for_backward(logits, targets, lse, n_valid)  # lse: 4 bytes a row
        ctx.ignore_index = ignore_index
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        logits, targets, lse, n_valid = ctx.saved_tensors
        return backward(grad_out, logits, targets, lse, n_valid, ctx.ignore_index), None, None


def reason(logits: torch.Tensor, targets: torch.Tensor,
           ignore_index: int = IGNORE_INDEX) -> str | None:
    """Why these kernels cannot run (logits, targets) here, in words; None when they can."""
    return triton_device_check(logits)  # (the op's validation puts targets beside it)


def cross_entropy_triton(logits: torch.Tensor, targets: torch.Tensor,
                         ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Triton: a chunked online log-sum-exp per row forward, the gradient in a second pass."""
    if torch.is_grad_enabled() and logits.requires_grad:
        return CrossEntropyFunction.apply(logits, targets, ignore_index)
    return forward(logits, targets, ignore_index)[0]  # no graph: lse and n_valid dropped


register("cross_entropy", "triton", fn=cross_entropy_triton, dtypes=FLOAT_DTYPES,
         needs=("triton",), check=reason,
         meta={"rows_per_program": 1, "block": MAX_BLOCK, "backward": "triton",
               "saved": "the logits (not copied) and lse, one float per row"})
