"""Lesson 16's Hopper matmul: ``wgmma.cu``'s kernels as steps, in every dtype variant.

A *variant* is a choice of types (bf16, fp16, fp8 e4m3 or e5m2; always fp32 accumulation) and
with it one ``wgmma`` instruction; a *step* is one kernel of ``wgmma.cu`` with its tile shape,
ring depth and launch (the staircase of the lesson). The types become the generated header, the
shapes the kernel's template arguments, so each (step, variant) is one NVRTC program for
``sm_90a``: compiled in about a second, cached in memory and under ``var/nvrtc_cache/``. The
variants and steps themselves, as data, are :mod:`kernels.matmul.hopper.wgmma_steps`; this
module compiles, checks, launches and registers them, and imports their names
(``wgmma.STEPS``, ``wgmma.variant``, ...) so that they are read from here as before.

Operands as lesson 07 takes them: A ``[M, K]`` row-major, B ``[K, N]`` column-major (``b.t()``
contiguous), any M and N, K a multiple of the instruction's K (16, or 32 for fp8). fp8 variants
return bf16, as ``torch._scaled_mm(..., out_dtype=torch.bfloat16)`` does with unit scales.

Each (step, variant) is registered as ``("matmul", "wgmma", "step<N>_<variant>")``;
``supports()`` says in plain words what it cannot run (not a Hopper GPU, layout, alignment, K).

Split-K (a step's ``splits`` > 1, chosen by tiles.py when the output tiles are fewer than the
SMs): ``wgmma_specialized`` divides K among blocks in the one launch and sums their fp32 partial
tiles through a workspace (:func:`workspace`), which a prepared launch keeps and reuses.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import threading
from pathlib import Path

import torch

from course_utils import nvrtc, sanitizer, syllabus
from kernels.matmul.hopper import plans, tma
from kernels.matmul.hopper.wgmma_steps import (  # noqa: F401  (the steps and variants, as data)
    BEST,
    F8_E4M3,
    F8_E5M2,
    K_TILE,
    STEPS,
    VARIANTS,
    WARPGROUP,
    Step,
    Variant,
    k_tiles,
    split_k,
    step,
    variant,
)
from kernels.matmul.problem import validate_args

SOURCE = Path(__file__).with_name("wgmma.cu")  # the kernels, one per step
PRIMITIVES = Path(__file__).with_name("hopper.cuh")  # what they are built from, included
ARCH = "sm_90a"  # the "a": wgmma and setmaxnreg exist on this one architecture only


def workspace(s: Step, m: int, n: int, device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Split-K's workspace for an M x N output (None without a split): for each output tile,
    ``splits`` fp32 partial tiles of bm x bn (each consumer's 64 x bn rows, split after split),
    and one arrival counter per tile and consumer warpgroup, zero. A launch leaves the counters
    at zero again, so the next launch on the same stream reuses the workspace as it is."""
    if s.splits == 1:
        return None
    tiles = -(-m // s.bm) * -(-n // s.bn)
    partials = torch.empty(tiles * s.splits * s.bm * s.bn, dtype=torch.float32, device=device)
    arrivals = torch.zeros(tiles * s.consumers, dtype=torch.int32, device=device)
    return partials, arrivals


# A barrier wait gives up (traps) after this many million cycles, ~2 s at the H100's clock: a
# lost arrival then costs a clear error instead of a GPU hung until the process dies. Under
# compute-sanitizer every wait is far longer (racecheck checks each shared-memory access of the
# spinning warps), so the limit grows 50 times there; the sanitizer's own timeout still ends a
# true hang.
WAIT_LIMIT_MCYCLES = 4000


def wait_limit_mcycles() -> int:
    return WAIT_LIMIT_MCYCLES * (50 if sanitizer.active() else 1)


def defines(v: str | Variant, *, timeline: bool = False) -> dict[str, object]:
    """The Python values ``wgmma.cu``'s header is generated from."""
    return {**variant(v).defines, "TIMELINE": timeline, "TIMELINE_BLOCKS": TIMELINE_BLOCKS,
            "TIMELINE_EVENTS": TIMELINE_EVENTS, "WAIT_LIMIT_MCYCLES": wait_limit_mcycles()}


TIMELINE_BLOCKS = 8  # blocks that record a timeline (timeline.py reads these back)
TIMELINE_EVENTS = 1024  # events per role and block
ROLES = 3  # producer, consumer 0, consumer 1


def compile_step(s: int | Step, v: str | Variant, *, timeline: bool = False,
                 **kwargs) -> nvrtc.Compiled:
    """Compile one step for one variant (no GPU needed; for sm_90a unless ``arch`` is given)."""
    kwargs.setdefault("arch", ARCH)
    return nvrtc.compile(SOURCE, step(s).template, defines=defines(v, timeline=timeline),
                         **kwargs)


# -- what a GPU and a problem allow -----------------------------------------------------------


def gpu_reason(capability: tuple[int, int] | None) -> str | None:
    """Why the Hopper kernels cannot run on a GPU of ``capability`` (None: they can)."""
    if capability is None:
        return "needs a CUDA GPU (wgmma and TMA: Hopper, sm_90)"
    if capability == (9, 0):
        return None
    arch = f"sm_{capability[0]}{capability[1]}"
    if capability < (9, 0):
        mma = syllabus.lesson("mma_matmul")
        return (f"wgmma and TMA exist on Hopper (sm_90) only; this GPU is {arch}: see lesson "
                f"{mma.label}'s mma.sync kernels ({mma.title})")
    return (f"wgmma is Hopper's (sm_90a) and does not run on {arch}: Blackwell multiplies with "
            "tcgen05 instead")


def reason_here() -> str | None:
    """Why the Hopper kernels cannot run on this machine's current GPU (None: they can)."""
    return gpu_reason(torch.cuda.get_device_capability() if torch.cuda.is_available() else None)


def problem_reason(v: str | Variant, a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why this variant cannot compute ``a @ b`` (None: it can). Shapes already line up."""
    v = variant(v)
    for arg, t, want in (("a", a, v.a), ("b", b, v.b)):
        if t.dtype != want:
            return f"wgmma {v.name} takes {arg} of {str(want)[6:]}, got {str(t.dtype)[6:]}"
    if not a.is_cuda or not b.is_cuda:
        return f"needs CUDA tensors, got a on {a.device.type}, b on {b.device.type}"
    m, k = a.shape
    n = b.shape[1]
    if k % v.k_step:
        return f"K must be a multiple of {v.k_step} ({v.name}'s wgmma K); got K={k}"
    if k > 1 and a.stride(1) != 1:
        return f"a must be row-major [M, K] (K contiguous); got strides {a.stride()}"
    if k > 1 and b.stride(0) != 1:
        return (f"b must be column-major [K, N] (b.t().is_contiguous(), as torch._scaled_mm "
                f"takes it); got strides {b.stride()}")
    if max(m, n) >= 2**31:
        return f"M and N must be below 2^31, got M={m}, N={n}"
    return tma.check_operand("a", a) or tma.check_operand("b.t()", b.t())


def call_reason(v: str | Variant, a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why variant ``v``'s kernels cannot compute ``a @ b`` here, the problem or the GPU it is
    on (None: they can): what a registered kernel's ``supports()`` answers."""
    return problem_reason(v, a, b) or gpu_reason(_capability(a))


# -- running ----------------------------------------------------------------------------------


def sm_count(device: int) -> int:
    """How many SMs GPU ``device`` has: the size of a persistent grid."""
    return nvrtc.device_properties(device).multi_processor_count


def _capability(t: torch.Tensor) -> tuple[int, int] | None:
    return nvrtc.device_capability(t.device.index or 0) if t.is_cuda else None


@functools.cache
def _loaded(s: Step, v: Variant, device: int, timeline: bool) -> nvrtc.Kernel:
    # one dictionary lookup per call after the first: compile (cached) and load once
    return nvrtc.load(compile_step(s, v, timeline=timeline), device)


_NULL = ctypes.c_void_p(0)
# the output's place among the arguments:
# (descriptors..., out, M, N, K[, scales, splits, workspace], timeline)
OUT_INDEX = {"wgmma_basic": 2, "wgmma_pipelined": 2, "wgmma_specialized": 3}


def _scale_arguments(s: Step, scales: tuple[torch.Tensor, torch.Tensor] | None) -> tuple:
    """wgmma_specialized's scale_a, scale_b and their steps: each scale one value (step 0) or
    one per row of A / column of B (step 1); null pointers mean unit scales."""
    if not s.specialized:
        if scales is not None:
            raise ValueError(f"{s.name} takes no scales: only wgmma_specialized (steps 3 and 4, "
                             "the tile candidates) applies them")
        return ()
    if scales is None:
        return (_NULL, _NULL, 0, 0)
    scale_a, scale_b = scales
    return (scale_a, scale_b, int(scale_a.numel() > 1), int(scale_b.numel() > 1))


def _split_arguments(s: Step, split_workspace) -> tuple:
    """wgmma_specialized's splits, partials and arrivals: K whole is (1, null, null)."""
    if not s.specialized:
        return ()
    return (1, _NULL, _NULL) if s.splits == 1 else (s.splits, *split_workspace)


def _arguments(s: Step, v: Variant, a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor,
               timeline: torch.Tensor | None, scales=None, split_workspace=None):
    """(kernel, arguments, launch shape, the step as launched) of one problem; the output is
    argument ``OUT_INDEX[kernel]``, its TMA descriptor (with a TMA store) the one before.
    ``split_workspace``: :func:`workspace` for a step with splits > 1."""
    m, n = out.shape
    device = a.device.index or 0
    if s.tma_store and tma.check_operand("out", out):
        s = dataclasses.replace(s, tma_store=False)  # rows not 16-byte aligned: plain stores
    kernel = _loaded(s, v, device, timeline is not None)
    tmaps = [tma.encode(a, s.bm, "a"), tma.encode(bt, s.b_box_rows, "b.t()")]
    if s.specialized:  # (step 3 takes C's descriptor too, and does not use it)
        tmaps.append(tma.encode(out, 64, "out") if s.tma_store else tmaps[1])
    args = (*tmaps, out, m, n, a.shape[1], *_scale_arguments(s, scales),
            *_split_arguments(s, split_workspace), _NULL if timeline is None else timeline)
    # (a cluster is declared at launch: wgmma.cu carries no __cluster_dims__, so that the other
    # steps keep the plain launch path, measured ~1 µs quicker per launch on the H100)
    shape = {"grid": s.grid(m, n, sm_count(device)), "block": s.threads,
             "shared_mem": s.shared_bytes, "cluster": s.cluster}
    return kernel, args, shape, s


def launch(s: int | Step, v: str | Variant, a: torch.Tensor, bt: torch.Tensor,
           out: torch.Tensor, timeline: torch.Tensor | None = None, scales=None) -> None:
    """Launch on already-checked operands: ``a`` [M, K], ``bt`` = ``b.t()`` [N, K], ``out``
    [M, N] (K > 0). ``timeline``: a zeroed int64 buffer for a TIMELINE build (timeline.py).
    ``scales``: (scale_a, scale_b), float32, checked by scaled.py; None: unit scales.
    A step with splits > 1 gets a fresh workspace: the caching allocator hands its memory to
    later work on this stream only, after the kernel."""
    s = step(s)
    split_workspace = workspace(s, out.shape[0], out.shape[1], out.device)
    kernel, args, shape, _ = _arguments(s, variant(v), a, bt, out, timeline, scales,
                                        split_workspace)
    kernel(*args, **shape)


# -- the registered call: one problem prepared once (plans.py says how) --------------------------


def plan(s: Step, v: Variant, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
         scales=None) -> plans.Plan:
    """The prepared launch of step ``s`` for checked operands ``a`` [M, K], ``b`` [K, N]
    (column-major) and an output like ``out``: ``plan(out)`` writes ``a @ b`` into ``out`` with
    one ``cuLaunchKernel``. Made on the first call per problem and thread, then looked up.
    ``scales``: (scale_a, scale_b) of an fp8 problem with scales (scaled.py), or None."""
    key = (id(s), id(v), *plans.tensor_key(a), *plans.tensor_key(b), a.device,
           threading.get_ident(), *(() if scales is None else (*plans.tensor_key(scales[0]),
                                                               *plans.tensor_key(scales[1]))))

    def make() -> plans.Plan:
        split_workspace = workspace(s, out.shape[0], out.shape[1], out.device)
        kernel, args, shape, launched = _arguments(s, v, a, b.t(), out, None, scales,
                                                   split_workspace)
        out_index = OUT_INDEX[launched.kernel]
        store_box = out_index - 1 if launched.specialized and launched.tma_store else None
        return plans.Plan(kernel.prepare(*args, **shape), out_index, store_box, (s, v),
                          out.data_ptr() if store_box is not None else 0, split_workspace)

    return plans.remembered(key, make)


def run_checked(a: torch.Tensor, b: torch.Tensor, s: Step, v: Variant,
                scales=None) -> torch.Tensor:
    """``a @ b`` with step ``s`` on operands already checked (problem_reason, gpu_reason; and
    scaled.scale_reason for ``scales``): what the registered kernels call."""
    out = torch.empty(a.shape[0], b.shape[1], dtype=v.out, device=a.device)
    if a.shape[1] == 0 or out.numel() == 0:
        return out.zero_()
    plan(s, v, a, b, out, scales)(out)
    return out


def matmul(a: torch.Tensor, b: torch.Tensor, v: str | Variant = "bf16",
           s: int | Step = BEST) -> torch.Tensor:
    """``a @ b`` with a step's kernel; raises ValueError with the reason if it cannot."""
    v, s = variant(v), step(s)
    validate_args(a, b)
    if reason := call_reason(v, a, b):
        raise ValueError(f"wgmma[{s.name} {v.name}]: {reason}")
    return run_checked(a, b, s, v)


def tolerance(v: str | Variant) -> dict[torch.dtype, tuple[float, float]]:
    """(atol, rtol) against a float64 reference, for inputs scaled as the op's test cases."""
    v = variant(v)
    if v.a.itemsize == 1:  # fp8 inputs are exact; the bf16 output rounds to 8 bits
        return {v.a: (3e-2, 3e-2)}
    return {v.a: (2e-2, 2e-2)}
