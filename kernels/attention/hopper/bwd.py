"""The Hopper backward: ``attention_bwd.cu``'s two kernels, and the forward + backward as one
differentiable op, the peer of the Triton autograd function (``kernels/attention/autograd.py``).

* :func:`forward`: the forward's last step (``fwd.BEST``) keeping what the backward needs: ``O``
  and each query's log-sum-exp in base 2 (``lse2``, the Triton forward's convention);
* :func:`backward`: ``Δ`` from the Triton backward's ``delta_kernel`` (one kernel for it in the
  course), then the dK/dV kernel (a block per 128 keys) and the dQ kernel (a block per 128
  queries), in the input dtype; ``only`` runs one of them (a debugging switch: the other's
  gradients are NaN);
* :class:`HopperAttention`: the autograd Function, and :func:`differentiable`, what
  ``("attention", "wgmma")`` calls (the forward alone when no gradient is wanted).

Inputs as the forward takes them (``fwd.reason`` says what it refuses, in words; the backward
takes the same problems: bf16 or fp16, D = 64 or 128, contiguous, one K/V head per query head, no
window, an sm_90 GPU). Each kernel is one NVRTC program per (dtype, head dim), compiled for
``sm_90a`` on first use and cached like the forward's.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.attention.hopper import fwd
from kernels.matmul.hopper import tma

SOURCE = Path(__file__).with_name("attention_bwd.cu")
KEYS_PER_BLOCK = 128  # the dK/dV kernel: two consumer warpgroups of 64 keys
QUERY_TILE = 64  # the dK/dV kernel's query tile, and every TMA box's rows
KEY_TILE = 64  # the dQ kernel's key tile
KERNELS = ("dkdv", "dq")


@dataclass(frozen=True)
class Config:
    """The ring depths and the dQ kernel's consumer warpgroups (the tiles are fixed by the
    registers: attention_bwd.cu's header)."""

    # the defaults: the fastest of the 12 the H100 swept at S 4096, D 128, causal and not
    # (`gpu_check_bwd --only tune`; docs/results/nvidia-h100-80gb-hbm3-hopper-bwd-tune-cb58732.log)
    dkdv_stages: int = 2  # slots of (Q tile, dO tile)
    dq_stages: int = 4  # slots of (K tile, V tile)
    dq_consumers: int = 2  # warpgroups of 64 queries each

    def template(self, kernel: str, d: int) -> str:
        if kernel == "dkdv":
            return f"attention_bwd_dkdv<{d}, {QUERY_TILE}, {self.dkdv_stages}>"
        return (f"attention_bwd_dq<{d}, {KEY_TILE}, {self.dq_stages}, "
                f"{self.dq_consumers}>")

    def threads(self, kernel: str) -> int:
        # dK/dV: 8 warps, no producer warp (255 registers a thread); dQ: the forward's shape
        return 2 * fwd.WARPGROUP if kernel == "dkdv" else fwd.WARPGROUP * self.dq_consumers + 32

    def block_rows(self, kernel: str) -> int:
        """Keys (dK/dV) or queries (dQ) per block."""
        return KEYS_PER_BLOCK if kernel == "dkdv" else 64 * self.dq_consumers

    def shared_bytes(self, kernel: str, d: int) -> int:
        """K and V of the block + the ring (dK/dV), Q and dO of the block + the ring (dQ), plus
        1 KB to align to 1024."""
        tile_rows = 2 * self.dkdv_stages * QUERY_TILE if kernel == "dkdv" else (
            2 * self.dq_stages * KEY_TILE)
        return (2 * self.block_rows(kernel) + tile_rows) * d * 2 + 1024


CONFIG = Config()


def compile_kernel(kernel: str, dtype: torch.dtype = torch.bfloat16, d: int = 128,
                   config: Config = CONFIG, **kwargs) -> nvrtc.Compiled:
    """Compile one backward kernel (``"dkdv"`` or ``"dq"``) for a dtype and head dim (no GPU
    needed)."""
    kwargs.setdefault("arch", fwd.ARCH)
    if kernel not in KERNELS:
        raise ValueError(f"kernel expected one of {KERNELS}, got {kernel!r}")
    if dtype not in fwd.DTYPES:
        raise ValueError(f"dtype expected one of {', '.join(map(str, fwd.DTYPES))}, got {dtype}")
    if d not in fwd.HEAD_DIMS:
        raise ValueError(f"d expected one of {fwd.HEAD_DIMS}, got {d}")
    return nvrtc.compile(SOURCE, config.template(kernel, d), defines=fwd.defines(dtype),
                         **kwargs)


def compile_all(arch: str = fwd.ARCH, workers: int | None = None) -> list[nvrtc.Compiled]:
    """Both kernels in every dtype and head dim, in parallel threads."""
    return nvrtc.compile_in_threads(
        [lambda k=k, t=t, d=d: compile_kernel(k, t, d, arch=arch, verbose=False)
         for k in KERNELS for t in fwd.DTYPES for d in fwd.HEAD_DIMS], workers)


def reason(q, k, v, causal=False, window=None) -> str | None:
    """The backward takes the forward's dense problems (same tiles, TMA boxes, dtypes): one K/V
    head per query head and no window (the forward's variants run forward only)."""
    from kernels.attention import variant_reason

    if why := variant_reason(q, k, window, gqa=False, windows=False):
        return f"the Hopper backward takes {why} (the forward runs it: under torch.no_grad())"
    return fwd.reason(q, k, v, causal, window)


def gradient_wanted(q, k, v) -> bool:
    return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)


# -- running ----------------------------------------------------------------------------------

@functools.cache
def _loaded(kernel: str, dtype: torch.dtype, d: int, device: int, config: Config):
    return nvrtc.load(compile_kernel(kernel, dtype, d, config), device)


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(O, lse2)`` on checked inputs: the forward's last step, storing each query's
    log-sum-exp in base 2 (float32, (B, H, Sq))."""
    b, h, sq, _ = q.shape
    out = torch.empty_like(q)
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    if sq > 0 and out.numel() > 0:
        fwd.launch(fwd.BEST, q, k, v, causal, out, lse=lse)
    return out, lse


def backward(q, k, v, o, lse, do, causal: bool, *, config: Config = CONFIG,
             only: str | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dQ, dK, dV)`` from the forward's ``O`` and ``lse2`` and the output's gradient ``dO``,
    on inputs :func:`reason` accepts. ``only="dkdv"`` or ``"dq"`` launches that kernel alone
    (the other gradients come back NaN): a switch to find which kernel is wrong."""
    from kernels.attention.triton_bwd import delta_of

    if only not in (None, *KERNELS):
        raise ValueError(f"only expected None or one of {KERNELS}, got {only!r}")
    b, h, sq, d = q.shape
    sk = k.shape[2]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    do = do.contiguous()  # (a sum's gradient arrives expanded: stride 0)
    delta = delta_of(o, do)
    maps = [tma.encode(t.view(-1, d), QUERY_TILE, name)
            for name, t in (("q", q), ("k", k), ("v", v), ("do", do))]
    scale = 1.0 / math.sqrt(d)
    common = (sq, sk, int(causal), fwd.LOG2E * scale, scale)
    device = q.device.index or 0
    if only in (None, "dkdv"):
        _loaded("dkdv", q.dtype, d, device, config)(
            *maps, lse, delta, dk, dv, *common,
            grid=b * h * -(-sk // config.block_rows("dkdv")), block=config.threads("dkdv"),
            shared_mem=config.shared_bytes("dkdv", d))
    else:
        dk.fill_(float("nan")), dv.fill_(float("nan"))
    if only in (None, "dq"):
        _loaded("dq", q.dtype, d, device, config)(
            *maps, lse, delta, dq, *common,
            grid=b * h * -(-sq // config.block_rows("dq")), block=config.threads("dq"),
            shared_mem=config.shared_bytes("dq", d))
    else:
        dq.fill_(float("nan"))
    return dq, dk, dv


class HopperAttention(torch.autograd.Function):
    """The Hopper forward keeping ``O`` and ``lse2``; the Hopper backward.
    ``HopperAttention.apply(q, k, v, causal, only=None)``: ``only`` runs one backward kernel
    (:func:`backward`'s switch, for debugging)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, only=None):
        o, lse = forward(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.only = causal, only
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward(q, k, v, o, lse, do, ctx.causal, only=ctx.only)
        return dq, dk, dv, None, None


def differentiable(q, k, v, causal=False, window=None):
    """What ``("attention", "wgmma")`` runs once the registry has checked the problem: autograd
    only when a gradient is wanted (dense problems: :func:`reason`), else the forward alone (no
    lse2 stored; grouped-query attention and windows too)."""
    if gradient_wanted(q, k, v):
        # (checked here too: the registry remembers a problem by its shapes, not requires_grad)
        if why := reason(q, k, v, causal, window):
            raise ValueError(f"wgmma attention: {why}")
        return HopperAttention.apply(q, k, v, causal)
    return fwd._run(q, k, v, causal, window)


def registered_reason(q, k, v, causal=False, window=None) -> str | None:
    """``("attention", "wgmma")``'s ``supports()``: the forward's problems, and the backward's
    when a gradient is wanted."""
    return reason(q, k, v, causal, window) if gradient_wanted(q, k, v) else fwd.reason(
        q, k, v, causal, window)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              causal: bool = False) -> torch.Tensor:
    """``softmax(q kᵀ / sqrt(D)) v``, differentiable with the Hopper kernels; ValueError with
    the reason if it cannot run here."""
    from kernels.attention import _validate

    _validate(q, k, v, causal)
    if why := reason(q, k, v, causal):
        raise ValueError(f"wgmma attention: {why}")
    return differentiable(q, k, v, causal)
