"""The Hopper backward, in two versions, and the forward + backward as one differentiable op,
the peer of the Triton autograd function (``kernels/attention/autograd.py``).

* version 1, ``attention_bwd.cu``: two kernels, dK/dV (a block per 128 keys, walking the
  queries) and dQ (a block per 128 queries, walking the keys), each gradient written once in the
  input dtype; 7 matmuls per (query tile, key tile) pair;
* version 2, ``attention_bwd_fused.cu``: one kernel, the dK/dV walk also summing dQ into an fp32
  buffer through atomics (FlashAttention-3's design), then a pass that rounds it; 5 matmuls per
  pair, and dQ's last bits depend on the order the blocks run in (not deterministic);
* :func:`forward`: the forward's last step (``fwd.BEST``) keeping what the backward needs: ``O``
  and each query's log-sum-exp in base 2 (``lse2``, the Triton forward's convention);
* :func:`backward`: ``Δ`` from the Triton backward's ``delta_kernel`` (one kernel for it in the
  course), then the version's kernels; ``only`` runs one kernel of version 1 (a debugging switch:
  the other's gradients are NaN);
* :class:`HopperAttention`: the autograd Function, and :func:`differentiable`, what
  ``("attention", "wgmma")`` (version :data:`BEST`) and ``("attention", "wgmma", "fused_bwd")``
  (version 2) call (the forward alone when no gradient is wanted).

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
from kernels.attention.problem import validate_args, variant_reason
from kernels.matmul.hopper import tma

SOURCE = Path(__file__).with_name("attention_bwd.cu")  # version 1
FUSED_SOURCE = Path(__file__).with_name("attention_bwd_fused.cu")  # version 2
SHARED = Path(__file__).with_name("attention_bwd.cuh")  # the dK/dV walk both versions share
KEYS_PER_BLOCK = 128  # the dK/dV and fused kernels: two consumer warpgroups of 64 keys
QUERY_TILE = 64  # the dK/dV and fused kernels' query tile, and every TMA box's rows
KEY_TILE = 64  # the dQ kernel's key tile
# each version's kernels, in launch order
VERSIONS = {1: ("dkdv", "dq"), 2: ("fused",)}
IDEAS = {1: "two kernels, dK/dV walking the queries and dQ walking the keys (7 matmuls a pair)",
         2: "one kernel, dQ summed through fp32 atomics (5 matmuls a pair, not deterministic)"}
SOURCES = {1: SOURCE, 2: FUSED_SOURCE}
KERNELS = ("dkdv", "dq", "fused")
BEST = 1  # the version ("attention", "wgmma") trains with
# the registry's variant for each version that is not BEST (registration.py)
VARIANTS = {1: "two_kernel_bwd", 2: "fused_bwd"}


@dataclass(frozen=True)
class Config:
    """The ring depths and the dQ kernel's consumer warpgroups (the tiles are fixed by the
    registers: attention_bwd.cu's header); ``fused_stages``: version 2's ring."""

    # the defaults: the fastest of the 12 the H100 swept at S 4096, D 128, causal and not
    # (the tune, now `gpu_run --only bwd-tune`; docs/results/nvidia-h100-80gb-hbm3-hopper-bwd-tune-
    # cb58732.log)
    dkdv_stages: int = 2  # slots of (Q tile, dO tile)
    dq_stages: int = 4  # slots of (K tile, V tile)
    dq_consumers: int = 2  # warpgroups of 64 queries each
    fused_stages: int = 2  # version 2: slots of (Q tile, dO tile); not tuned yet

    def template(self, kernel: str, d: int) -> str:
        if kernel == "dkdv":
            return f"attention_bwd_dkdv<{d}, {QUERY_TILE}, {self.dkdv_stages}>"
        if kernel == "fused":
            return f"attention_bwd_fused<{d}, {QUERY_TILE}, {self.fused_stages}>"
        return (f"attention_bwd_dq<{d}, {KEY_TILE}, {self.dq_stages}, "
                f"{self.dq_consumers}>")

    def threads(self, kernel: str) -> int:
        # dK/dV and fused: 8 warps, no producer warp (255 registers a thread); dQ: the
        # forward's shape
        return fwd.WARPGROUP * self.dq_consumers + 32 if kernel == "dq" else 2 * fwd.WARPGROUP

    def block_rows(self, kernel: str) -> int:
        """Keys (dK/dV, fused) or queries (dQ) per block."""
        return 64 * self.dq_consumers if kernel == "dq" else KEYS_PER_BLOCK

    def shared_bytes(self, kernel: str, d: int) -> int:
        """K and V of the block + the ring (dK/dV), Q and dO of the block + the ring (dQ); the
        fused kernel adds two tiles of dS^T (128 keys x 64 queries); plus 1 KB to align to
        1024."""
        stages = {"dkdv": self.dkdv_stages, "fused": self.fused_stages}.get(kernel)
        tile_rows = 2 * stages * QUERY_TILE if stages else 2 * self.dq_stages * KEY_TILE
        ds_tiles = 2 * KEYS_PER_BLOCK * QUERY_TILE * 2 if kernel == "fused" else 0
        return (2 * self.block_rows(kernel) + tile_rows) * d * 2 + ds_tiles + 1024


CONFIG = Config()


def compile_kernel(kernel: str, dtype: torch.dtype = torch.bfloat16, d: int = 128,
                   config: Config = CONFIG, **kwargs) -> nvrtc.Compiled:
    """Compile one backward kernel (``"dkdv"`` or ``"dq"`` of version 1, ``"fused"`` of
    version 2) for a dtype and head dim (no GPU needed)."""
    kwargs.setdefault("arch", fwd.ARCH)
    if kernel not in KERNELS:
        raise ValueError(f"kernel expected one of {KERNELS}, got {kernel!r}")
    if dtype not in fwd.DTYPES:
        raise ValueError(f"dtype expected one of {', '.join(map(str, fwd.DTYPES))}, got {dtype}")
    if d not in fwd.HEAD_DIMS:
        raise ValueError(f"d expected one of {fwd.HEAD_DIMS}, got {d}")
    return nvrtc.compile(FUSED_SOURCE if kernel == "fused" else SOURCE,
                         config.template(kernel, d), defines=fwd.defines(dtype), **kwargs)


def compile_all(arch: str = fwd.ARCH, workers: int | None = None) -> list[nvrtc.Compiled]:
    """Every kernel of both versions in every dtype and head dim, in parallel threads."""
    return nvrtc.compile_in_threads(
        [lambda k=k, t=t, d=d: compile_kernel(k, t, d, arch=arch, verbose=False)
         for k in KERNELS for t in fwd.DTYPES for d in fwd.HEAD_DIMS], workers)


def reason(q, k, v, causal=False, window=None) -> str | None:
    """The backward takes the forward's dense problems (same tiles, TMA boxes, dtypes): one K/V
    head per query head and no window (the forward's variants run forward only)."""
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


def providers() -> dict[int, str]:
    """Each version's name in the benchmark's tables (``kernels.attention.bench.measure``):
    ``{1: "wgmma", 2: "wgmma[fused_bwd]"}`` while version 1 is BEST."""
    return {v: "wgmma" if v == BEST else f"wgmma[{VARIANTS[v]}]" for v in VERSIONS}


def _version(version) -> int:
    if isinstance(version, bool) or version not in VERSIONS:
        raise ValueError(f"version expected one of {tuple(VERSIONS)}, got {version!r}")
    return version


def backward(q, k, v, o, lse, do, causal: bool, *, config: Config = CONFIG,
             only: str | None = None, version: int = BEST, kernel: nvrtc.Kernel | None = None,
             dq_sum: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dQ, dK, dV)`` from the forward's ``O`` and ``lse2`` and the output's gradient ``dO``,
    on inputs :func:`reason` accepts, by backward ``version`` 1 (two kernels) or 2 (one, dQ
    through atomics). ``only="dkdv"`` or ``"dq"`` (version 1) launches that kernel alone (the
    other gradients come back NaN): a switch to find which kernel is wrong. Version 2 only:
    ``kernel``, a loaded build of the fused kernel to launch instead of the file's, and
    ``dq_sum``, the zeroed float32 buffer (B, H, Sq, D) it adds into (None: a fresh one);
    exercise hopper_backward.dq_add passes its spliced build and a buffer with guard elements
    after it."""
    from kernels.attention.triton_bwd import delta_of

    version = _version(version)
    if only not in (None, *VERSIONS[1]):
        raise ValueError(f"only expected None or one of {VERSIONS[1]}, got {only!r}")
    if only is not None and version != 1:
        raise ValueError(f"only expected None with version {version} (one kernel), got {only!r}")
    if (kernel is not None or dq_sum is not None) and version != 2:
        raise ValueError(f"kernel and dq_sum expected None with version {version} (they are "
                         "version 2's fused kernel and its fp32 buffer)")
    if dq_sum is not None and (dq_sum.shape != q.shape or dq_sum.dtype != torch.float32
                               or not dq_sum.is_contiguous() or dq_sum.device != q.device):
        raise ValueError(f"dq_sum expected a contiguous float32 tensor of q's shape "
                         f"{tuple(q.shape)} on {q.device}, got {dq_sum.dtype} "
                         f"{tuple(dq_sum.shape)} on {dq_sum.device}")
    b, h, sq, d = q.shape
    sk = k.shape[2]
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    if q.numel() == 0 or k.numel() == 0:
        return torch.zeros_like(q), dk.zero_(), dv.zero_()
    do = do.contiguous()  # (a sum's gradient arrives expanded: stride 0)
    delta = delta_of(o, do)
    maps = [tma.encode(t.view(-1, d), QUERY_TILE, name)
            for name, t in (("q", q), ("k", k), ("v", v), ("do", do))]
    scale = 1.0 / math.sqrt(d)
    common = (sq, sk, int(causal), fwd.LOG2E * scale, scale)
    device = q.device.index or 0

    def launch(name, *outputs, rows):
        built = kernel if name == "fused" and kernel is not None else _loaded(
            name, q.dtype, d, device, config)
        built(*maps, lse, delta, *outputs, *common,
              grid=b * h * -(-rows // config.block_rows(name)), block=config.threads(name),
              shared_mem=config.shared_bytes(name, d))

    if version == 2:
        # the kernel adds every key block's part of dQ (scaled) into an fp32 buffer: zeroed
        # before, rounded to the input dtype after; the three run in order on this stream
        if dq_sum is None:
            dq_sum = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        launch("fused", dq_sum, dk, dv, rows=sk)
        return dq_sum.to(q.dtype), dk, dv
    dq = torch.empty_like(q)
    if only in (None, "dkdv"):
        launch("dkdv", dk, dv, rows=sk)
    else:
        dk.fill_(float("nan")), dv.fill_(float("nan"))
    if only in (None, "dq"):
        launch("dq", dq, rows=sq)
    else:
        dq.fill_(float("nan"))
    return dq, dk, dv


class HopperAttention(torch.autograd.Function):
    """The Hopper forward keeping ``O`` and ``lse2``; the Hopper backward.
    ``HopperAttention.apply(q, k, v, causal, only=None, version=BEST)``: ``only`` runs one
    backward kernel of version 1 (:func:`backward`'s switch, for debugging)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, only=None, version=BEST):
        o, lse = forward(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.only, ctx.version = causal, only, _version(version)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward(q, k, v, o, lse, do, ctx.causal, only=ctx.only,
                              version=ctx.version)
        return dq, dk, dv, None, None, None


def differentiable(q, k, v, causal=False, window=None, *, version: int = BEST):
    """What ``("attention", "wgmma")`` (backward :data:`BEST`) and ``("attention", "wgmma",
    "fused_bwd")`` (version 2) run once the registry has checked the problem: autograd only
    when a gradient is wanted (dense problems: :func:`reason`), else the forward alone (no lse2
    stored; grouped-query attention and windows too)."""
    if gradient_wanted(q, k, v):
        # (checked here too: the registry remembers a problem by its shapes, not requires_grad)
        if why := reason(q, k, v, causal, window):
            raise ValueError(f"wgmma attention: {why}")
        return HopperAttention.apply(q, k, v, causal, None, version)
    return fwd.run_checked(q, k, v, causal, window)


def registered_reason(q, k, v, causal=False, window=None) -> str | None:
    """The differentiable entries' ``supports()``: the forward's problems, and the backward's
    when a gradient is wanted."""
    return reason(q, k, v, causal, window) if gradient_wanted(q, k, v) else fwd.reason(
        q, k, v, causal, window)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              causal: bool = False, version: int = BEST) -> torch.Tensor:
    """``softmax(q kᵀ / sqrt(D)) v``, differentiable with the Hopper kernels (backward
    ``version`` 1 or 2); ValueError with the reason if it cannot run here."""
    validate_args(q, k, v, causal)
    version = _version(version)
    if why := reason(q, k, v, causal):
        raise ValueError(f"wgmma attention: {why}")
    return differentiable(q, k, v, causal, version=version)
