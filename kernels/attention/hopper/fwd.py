"""Lesson 18's Hopper forward: ``attention.cu``'s kernel as five steps, in bf16 and fp16.

A *step* is one set of the kernel's template flags (consumer warpgroups, key tile, ring depth,
the overlaps), the staircase of the lesson; the head dim (64 or 128) is a template argument too
and the element type comes from the generated header (lesson 16's ``wgmma.defines``), so each
(step, head dim, dtype) is one NVRTC program for ``sm_90a``, compiled in about a second and
cached in memory and under ``var/nvrtc_cache/``. TMA descriptors come from lesson 16's
``tma.encode``, launches from ``course_utils.nvrtc``.

Inputs as the attention op takes them: ``q`` (B, H, Sq, D), ``k`` and ``v`` (B, H_kv, Sk, D),
contiguous, bf16 or fp16, D = 64 or 128; the output is (B, H, Sq, D) in their dtype. The
variants are runtime arguments of the same kernel (its header says why they cost the dense path
nothing): grouped-query attention (H a multiple of H_kv), a sliding window (``window``, with
``causal``) and, through :func:`varlen_attention`, sequences packed end to end with cumulative
offsets (:func:`kernels.attention.varlen.varlen_attention`'s arguments). Registered
(``registration.py``) as ``("attention", "wgmma")`` (the last step, differentiable: ``bwd.py``
adds the backward, for dense problems; the variants run forward only) and ``("attention",
"wgmma", "step<N>")`` for the others; ``supports()`` says in plain words what a problem or GPU
lacks.
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.attention.problem import validate_args
from kernels.matmul.hopper import tma, wgmma
from kernels.registry import one_of

SOURCE = Path(__file__).with_name("attention.cu")
PRIMITIVES = Path(__file__).with_name("attention.cuh")  # what it adds to lesson 16's hopper.cuh
ARCH = wgmma.ARCH  # sm_90a
HEAD_DIMS = (64, 128)
DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}  # -> lesson 16's variant names
WARPGROUP = 128
LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Step:
    """One step of the staircase: the kernel's template flags and what they add."""

    number: int
    idea: str
    consumers: int  # warpgroups of 64 query rows each
    bn: int  # keys per tile (at D = 128)
    stages: int  # ring slots of (K tile, V tile)
    overlap: bool  # software pipeline in a warpgroup: softmax of tile n during P V of n - 1
    pingpong: bool  # two warpgroups take turns at the tensor cores
    bn_d64: int | None = None  # keys per tile at D = 64, where it differs: O is half as big
    lazy: bool = False  # rescale O only when a row's max grows by more than 2^8 (at D = 128)

    def rescales_lazily(self, d: int) -> bool:
        """At D = 64 the rescale of O is half as long and the warp's vote costs more than it
        saves (the H100's tune, docs/results/*attention-lazy-trial-94f6b2f.log): not there."""
        return self.lazy and d == 128

    def key_tile(self, d: int) -> int:
        """Keys per tile at head dim ``d``: the registers decide it (attention.cu's header)."""
        return self.bn_d64 if d == 64 and self.bn_d64 else self.bn

    @property
    def name(self) -> str:
        return f"step{self.number}"

    @property
    def block_m(self) -> int:
        return 64 * self.consumers

    @property
    def threads(self) -> int:
        return WARPGROUP * self.consumers + 32  # the consumers, then one producer warp

    def template(self, d: int) -> str:
        flags = ", ".join(str(f).lower() for f in (self.overlap, self.pingpong,
                                                   self.rescales_lazily(d)))
        return (f"attention_fwd<{d}, {self.key_tile(d)}, {self.stages}, {self.consumers}, "
                f"{flags}>")

    def shared_bytes(self, d: int) -> int:
        """Q tile, then the ring (a K and a V tile per slot), plus 1 KB to align to 1024."""
        return (self.block_m + 2 * self.stages * self.key_tile(d)) * d * 2 + 1024

    def grid(self, heads: int, sq: int) -> int:
        return heads * -(-sq // self.block_m)


STEPS: dict[int, Step] = {s.number: s for s in (
    Step(1, "a producer warp loads K and V into a ring (TMA, mbarriers), one consumer "
         "warpgroup: QKᵀ, softmax, PV in turn", consumers=1, bn=128, stages=2, overlap=False,
         pingpong=False),
    Step(2, "two consumer warpgroups share every K and V tile: half the loads per query",
         consumers=2, bn=128, stages=2, overlap=False, pingpong=False),
    Step(3, "in each warpgroup, tile n's softmax runs while tile n-1's PV is on the tensor "
         "cores (64-key tiles at D = 128, 128 at D = 64: the registers of three tiles must "
         "fit)", consumers=2, bn=64, stages=4, overlap=True, pingpong=False, bn_d64=128),
    Step(4, "ping-pong: the two warpgroups take turns at the tensor cores, one's softmax "
         "beside the other's matmuls", consumers=2, bn=64, stages=4, overlap=True,
         pingpong=True, bn_d64=128),
    Step(5, "lazy rescaling: a row's max moves only when it grows by more than 2^8, so most "
         "tiles skip multiplying O (at D = 128; at D = 64 it is step 4)", consumers=2, bn=64,
         stages=4, overlap=True, pingpong=True, bn_d64=128, lazy=True),
)}
BEST = STEPS[max(STEPS)]


def step(number: int | Step) -> Step:
    return number if isinstance(number, Step) else one_of("step", number, STEPS)


def defines(dtype: torch.dtype, *, timeline: bool = False) -> dict[str, object]:
    """The generated header: lesson 16's (element types, timeline, bounded barrier waits)."""
    return wgmma.defines(DTYPES[dtype], timeline=timeline)


def compile_step(s: int | Step, dtype: torch.dtype = torch.bfloat16, d: int = 128, *,
                 timeline: bool = False, **kwargs) -> nvrtc.Compiled:
    """Compile one step for one dtype and head dim (no GPU needed)."""
    kwargs.setdefault("arch", ARCH)
    if dtype not in DTYPES:
        raise ValueError(f"dtype expected one of {', '.join(map(str, DTYPES))}, got {dtype}")
    if d not in HEAD_DIMS:
        raise ValueError(f"d expected one of {HEAD_DIMS}, got {d}")
    return nvrtc.compile(SOURCE, step(s).template(d), defines=defines(dtype, timeline=timeline),
                         **kwargs)


def compile_all(arch: str = ARCH, workers: int | None = None) -> list[nvrtc.Compiled]:
    """Every step, dtype and head dim, and the timeline builds the lesson draws, in parallel
    threads: what ``make prepare`` caches before a lecture."""
    jobs = [lambda s=s, t=t, d=d: compile_step(s, t, d, arch=arch, verbose=False)
            for s in STEPS.values() for t in DTYPES for d in HEAD_DIMS]
    jobs += [lambda s=s: compile_step(s, torch.bfloat16, 128, arch=arch, timeline=True,
                                      verbose=False) for s in STEPS.values()]
    return nvrtc.compile_in_threads(jobs, workers)


# -- what a GPU and a problem allow -----------------------------------------------------------

gpu_reason = wgmma.gpu_reason  # the same words as lesson 16: wgmma and TMA are Hopper's


def problem_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   causal: bool = False) -> str | None:
    """Why this kernel cannot compute ``attention(q, k, v, causal)`` (None: it can). The op's
    validation has already checked that shapes, dtypes and devices agree."""
    d = q.shape[-1]
    if q.dtype not in DTYPES:
        return f"wgmma attention takes bf16 or fp16, got {str(q.dtype)[6:]}"
    if d not in HEAD_DIMS:
        return (f"head dim D must be 64 or 128 (one or two 128-byte TMA boxes, the register "
                f"tiles of the kernel); got D = {d}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous():
            return (f"{name} must be contiguous (B, H, S, D): TMA reads it as B*H*S rows of "
                    f"D values; got strides {t.stride()} (call .contiguous())")
    if not q.is_cuda:
        return f"needs CUDA tensors, got q on {q.device.type}"
    if k.shape[2] == 0:
        return "no keys (Sk = 0): every softmax would be empty"
    if max(q.shape[0] * q.shape[1] * s for s in (q.shape[2], k.shape[2])) >= 2**31:
        return "more than 2^31 rows of q or k: TMA coordinates are 32-bit"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if reason := tma.check_operand(name, t.view(-1, d)):
            return reason
    return None


def _capability(t: torch.Tensor) -> tuple[int, int] | None:
    return nvrtc.device_capability(t.device.index or 0) if t.is_cuda else None


def reason(q, k, v, causal=False, window=None) -> str | None:
    """Why the forward cannot run the (validated) problem here: it takes grouped-query
    attention and windows, so the problem and the GPU decide."""
    return problem_reason(q, k, v, causal) or gpu_reason(_capability(q))


# -- running ----------------------------------------------------------------------------------


@functools.cache
def _loaded(s: Step, dtype: torch.dtype, d: int, device: int, timeline: bool) -> nvrtc.Kernel:
    return nvrtc.load(compile_step(s, dtype, d, timeline=timeline), device)


_NO_POINTER = ctypes.c_void_p(0)  # nullptr: no timeline, no lse, dense (no cu_seqlens)


def launch(s: int | Step, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
           out: torch.Tensor, timeline: torch.Tensor | None = None,
           lse: torch.Tensor | None = None, window: int | None = None,
           kernel: nvrtc.Kernel | None = None) -> None:
    """Launch on already-checked inputs (Sq > 0); ``out`` like ``q``. ``timeline``: a zeroed
    int64 buffer for a TIMELINE build (timeline.py). ``lse``: a float32 (B, H, Sq) tensor that
    gets each query's log-sum-exp in base 2 (what the backward needs; None: not stored).
    ``k`` and ``v`` may have fewer heads (GQA); ``window`` with ``causal``. ``kernel``: a loaded
    build of this step to launch instead of the file's (exercise hopper_attention.pingpong's, with
    the student's turns spliced in)."""
    b, h, sq, d = q.shape
    # a window as long as the queries hides nothing (query i < Sq sees every key j <= i): none
    window = 0 if window is None or window >= sq else window
    _launch(step(s), d, q.view(-1, d), k.view(-1, d), v.view(-1, d), out, lse, sq, k.shape[2],
            causal, window, h, h // k.shape[1], None, b * h, timeline, kernel)


def _launch(s: Step, d: int, q2, k2, v2, out, lse, sq, sk, causal, window, heads, group,
            cu_seqlens, query_heads, timeline=None, kernel=None) -> None:
    """The launch both layouts share: q2, k2, v2 the 2-D views TMA reads (dense: B*H*S rows
    of D; varlen: tokens rows of H*D), ``query_heads`` (B*H) of ``sq`` rows each (varlen: the
    longest sequence), ``cu_seqlens`` (cu_q, cu_k) or None (dense)."""
    if kernel is None:
        kernel = _loaded(s, q2.dtype, d, q2.device.index or 0, timeline is not None)
    bn = s.key_tile(d)
    maps = [tma.encode(q2, 64, "q"), tma.encode(k2, bn, "k"), tma.encode(v2, bn, "v")]
    cu_q, cu_k = cu_seqlens or (_NO_POINTER, _NO_POINTER)
    kernel(*maps, out, _NO_POINTER if lse is None else lse, sq, sk, int(causal),
           LOG2E / math.sqrt(d), group, window, heads, cu_q, cu_k,
           _NO_POINTER if timeline is None else timeline,
           grid=s.grid(query_heads, sq), block=s.threads, shared_mem=s.shared_bytes(d))


def run_checked(q, k, v, causal=False, window=None, *, s: Step = BEST) -> torch.Tensor:
    """The forward on a problem already checked (by the registry's ``supports()``, or by
    :func:`attention`): no check of its own, so a registered call pays none twice."""
    out = torch.empty_like(q)
    if q.shape[2] == 0 or out.numel() == 0:
        return out
    launch(s, q, k, v, causal, out, window=window)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              s: int | Step = BEST, window: int | None = None) -> torch.Tensor:
    """``softmax(q kᵀ / sqrt(D)) v`` with a step's kernel (forward only; k and v may have fewer
    heads, ``window`` with ``causal``); ValueError with the reason if it cannot run here."""
    s = step(s)
    validate_args(q, k, v, causal, window)
    if why := reason(q, k, v, causal, window):
        raise ValueError(f"wgmma attention [{s.name}]: {why}")
    return run_checked(q, k, v, causal, window, s=s)


# -- variable length: sequences packed end to end ------------------------------------------------


def varlen_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str | None:
    """Why the forward cannot run a (validated) packed problem: q (tokens, H, D), k and v
    (tokens, H_kv, D)."""
    d = q.shape[-1]
    if q.dtype not in DTYPES:
        return f"wgmma attention takes bf16 or fp16, got {str(q.dtype)[6:]}"
    if d not in HEAD_DIMS:
        return f"head dim D must be 64 or 128; got D = {d}"
    if not q.is_cuda:
        return f"needs CUDA tensors, got q on {q.device.type}"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous():
            return (f"{name} must be contiguous (tokens, H, D): TMA reads it as tokens rows of "
                    f"H*D values; got strides {t.stride()} (call .contiguous())")
        if reason := tma.check_operand(name, t.view(t.shape[0], t.shape[1] * d)):
            return reason
    return gpu_reason(_capability(q))


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int,
                     max_seqlen_k: int, causal: bool = False,
                     s: int | Step = BEST) -> torch.Tensor:
    """:func:`kernels.attention.varlen.varlen_attention`'s problem (same arguments, validated by
    the same function) on a step's kernel: q ``(total_q, H, D)``, k and v ``(total_k, H_kv, D)``,
    ``cu_seqlens_*`` int32 cumulative lengths. Forward only: ValueError when a gradient is
    wanted (varlen.varlen_attention trains), or with the reason it cannot run here."""
    from kernels.attention import varlen

    s = step(s)
    varlen.validate_args(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal)
    if why := varlen_reason(q, k, v):
        raise ValueError(f"wgmma varlen_attention [{s.name}]: {why}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise ValueError(f"wgmma varlen_attention [{s.name}]: forward only, and q, k or v "
                         "requires grad (use kernels.attention.varlen_attention to train, or "
                         "call under torch.no_grad())")
    out = torch.empty_like(q)
    if out.numel() and max_seqlen_q:
        launch_varlen(s, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, out)
    return out


def launch_varlen(s: int | Step, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                  causal: bool, out: torch.Tensor) -> None:
    """Launch on already-checked packed inputs; ``out`` like ``q``, every row written."""
    total_q, h, d = q.shape
    if k.shape[0] == 0:  # no keys in any sequence: the weighted sum of nothing
        out.zero_()
        return
    kv_width = k.shape[1] * d
    _launch(step(s), d, q.view(total_q, h * d), k.view(-1, kv_width), v.view(-1, kv_width),
            out, None, max_seqlen_q, 0, causal, 0, h, h // k.shape[1],
            (cu_seqlens_q, cu_seqlens_k), (cu_seqlens_q.numel() - 1) * h)
