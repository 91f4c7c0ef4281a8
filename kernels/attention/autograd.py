"""The Triton forward and backward as one differentiable op: a ``torch.autograd.Function``.

``forward`` runs :func:`triton_fwd.forward` (or, for few queries, :func:`triton_decode.forward`:
the query heads of a group packed into one program, the keys split across programs; see
:func:`forward_by_shape`) and keeps what the backward needs: the inputs, the
output ``O`` and the log-sum-exp per query (``B·H·Sq`` floats: linear in S, where eager
attention keeps the ``S × S`` probabilities for its backward). ``backward`` gets ``dO`` and
returns ``(dQ, dK, dV)`` from :func:`triton_bwd.backward`, and ``None`` for ``causal``.
"""

from __future__ import annotations

import torch

from kernels.attention import triton_bwd, triton_decode, triton_fwd
from kernels.attention.problem import attention_eager, visible
from kernels.registry import OPS, register


def gradients(fn, q, k, v, causal: bool, do: torch.Tensor,
              window: int | None = None) -> dict[str, torch.Tensor]:
    """``{"O", "dQ", "dK", "dV"}`` of ``fn(q, k, v, causal[, window])`` for the output gradient
    ``do``."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, causal) if window is None else fn(q, k, v, causal, window)
    out.backward(do)
    return {"O": out.detach(), "dQ": q.grad, "dK": k.grad, "dV": v.grad}


ZERO = 1e-6  # an exact result below this fraction of the problem's largest is zero (rounding)


def _scale(exact: torch.Tensor, largest: torch.Tensor) -> torch.Tensor:
    """What an error in ``exact`` is read against: its largest value, or, where it is zero up
    to float64's rounding, the problem's largest (one key makes the softmax constant, so
    dQ = dK = 0 exactly; float32 leaves ~1e-6 there, which against 0 is no ratio at all)."""
    top = exact.abs().max()
    return top if top > ZERO * largest else largest.clamp_min(1e-30)


def gradient_errors(q, k, v, causal: bool = False, window: int | None = None, *,
                    fns: dict | None = None) -> dict[str, dict[str, float]]:
    """How far Triton's and SDPA's output and gradients are from float64 eager autograd:
    ``{"triton": {"O": err, "dQ": ...}, "sdpa": {...}}``, each the largest absolute error
    relative to the largest exact value (see :func:`_scale` for a result that is exactly 0;
    SDPA: its flash, memory-efficient or math backend). ``fns``: ``{name: attention
    function}`` measured in Triton's place (the Hopper backward's checks pass theirs)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel


    do = torch.randn(q.shape, device=q.device).to(q.dtype)
    exact = gradients(attention_eager, *(t.double() for t in (q, k, v)), causal, do.double(),
                      window)

    def sdpa(a, b, c, is_causal, window=None):
        # flash, memory-efficient or math, whichever takes the problem first (cuDNN would
        # build a graph for every new shape: seconds, for the same answer); a window as an
        # explicit mask, grouped K/V heads with enable_gqa
        mask = None if window is None else visible(a.shape[2], b.shape[2], True, window, a.device)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                          SDPBackend.MATH]):
            return F.scaled_dot_product_attention(
                a, b, c, attn_mask=mask, is_causal=is_causal and mask is None,
                enable_gqa=a.shape[1] != b.shape[1])

    largest = max(t.abs().max() for t in exact.values())
    found = {}
    for name, fn in {**(fns or {"triton": attention}), "sdpa": sdpa}.items():
        got = gradients(fn, q, k, v, causal, do, window)
        found[name] = {key: ((got[key].double() - exact[key]).abs().max()
                             / _scale(exact[key], largest)).item() for key in got}
    return found


def forward_by_shape(q, k, v, causal: bool = False, window: int | None = None,
                     save_lse: bool = True):
    """``(O, lse2)`` by the path that suits the shape: decoding (``group · Sq`` packed rows fit
    one program, :func:`triton_decode.packs`) takes the packed, split-KV kernel, which loads
    each K/V block once per group; longer queries take :func:`triton_fwd.forward`. Both return
    the same layouts, so one backward serves both. ``save_lse=False`` (inference): the dense
    kernel skips the log-sum-exp (None in its place; the packed one needs it to merge its
    splits, and returns it)."""
    if triton_decode.packs(q, k):
        return triton_decode.forward(q, k, v, causal, window)
    return triton_fwd.forward(q, k, v, causal, window, save_lse=save_lse)


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, window):
        o, lse = forward_by_shape(q, k, v, causal, window)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.window = causal, window
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = triton_bwd.backward(q, k, v, o, lse, do, ctx.causal, ctx.window)
        return dq, dk, dv, None, None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              causal: bool = False, window: int | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) V with the Triton kernels, differentiable in q, k and v; k and v may
    have fewer heads than q (grouped-query attention), ``window`` makes it local (with causal:
    query i sees keys i - window < j <= i). ValueError, in words, for a problem they cannot
    run."""
    OPS["attention"].validate(q, k, v, causal, window)
    if why := triton_fwd.reason(q, k, v, causal, window):
        raise ValueError(f"attention/triton: {why}")
    return _attention(q, k, v, causal, window)


def _attention(q, k, v, causal=False, window=None):
    # What the registry calls once it has checked the problem (or found it checked before), so
    # every Python call here is paid by every call of a tiny problem: autograd only when a
    # gradient is wanted (tests/test_call_path.py counts the calls)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return FlashAttention.apply(q, k, v, causal, window)
    return forward_by_shape(q, k, v, causal, window, save_lse=False)[0]  # inference

register("attention", "triton", fn=_attention, dtypes=triton_fwd.DTYPES, needs=("triton",),
         check=triton_fwd.reason,
         meta={"fused": True, "head_dims": triton_fwd.HEAD_DIMS, "backward": "triton_bwd",
               "gqa": True, "window": True},
         description="FlashAttention-2 in Triton, forward and backward (autograd)")
