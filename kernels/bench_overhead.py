"""What a call costs the host, layer by layer: lesson 11's launch-overhead table.

A small kernel is launch-bound: the GPU finishes it before Python has prepared the next one, so
the host's time per call *is* the time per call. This benchmark calls each layer back to back
(``CALLS`` calls, no sync in between, ``REPEATS`` rounds, the median round reported) at a size
where the kernel is short, and prints the time each layer adds:

* ``torch.mm`` / ``a + b``: PyTorch's own path (dispatcher, allocator, cuBLAS or a kernel
  launch), the peer;
* a raw ``cuLaunchKernel``: the driver call through ``ctypes`` with the argument array packed
  once: the floor for any launch from Python;
* ``Kernel.launcher(...)``: course_utils.nvrtc with the launch shape bound once; each call
  checks and packs the arguments;
* ``Kernel(...)``: the same with ``grid=``/``block=`` given per call;
* the op's own function (``mma.launch``, ``mma.matmul``, ``add_nvrtc``, ``nvrtc_gemm.gemm``):
  configuration lookup, output allocation, the launch;
* the registry call, ``kernels.get_kernel(...)(a, b)``: validation and ``supports()`` once
  per distinct problem, then the function;
* on a Hopper GPU, lesson 16's ``wgmma`` kernel in bf16 and fp8 (peers ``torch.mm`` and
  ``torch._scaled_mm``): ``wgmma.launch`` encodes the TMA descriptors and packs every argument
  on each call; the registered call prepares them once per problem (``Kernel.prepare``) and
  then puts the fresh output's address in and launches; a CUDA graph replays a captured call
  (no Python per kernel at all, but the same addresses every replay: the output is
  overwritten, and a new shape means a new capture);
* with Triton, lesson 09's attention (peer SDPA) and lesson 10's RMSNorm (peer
  ``F.rms_norm``, forward alone and forward + backward through autograd): the op's function,
  whose launches go through a plan made once per problem (``kernels/triton_launch.py``), and
  the registered call.

``make bench`` records every row (lesson key ``byok.launch``, the lesson's number before
the course was renumbered) with the PyTorch peer of its group measured in the same run.
Notebook 11 shows the table.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_utils import cuda_libs, env, nvrtc, plots, requirements, results, timing

LESSON = "byok.launch"
CALLS = 200
REPEATS = 5
MATMUL_SIZE = 256  # 256³ bf16: ~3 µs on an H100, far below a launch from Python
ADD_SIZE = 1 << 16
TARGET_US = 20.0  # issue 14: the registry's mma call within 20 µs of torch.mm
WGMMA_TARGET_US = 5.0  # issue 23: the registry's wgmma call within 5 µs of torch.mm
ATTENTION_SHAPE = (1, 2, 128, 64)  # (B, H, S, D): a tiny problem, the host's time only
RMSNORM_SHAPE = (64, 256)  # (rows, hidden): the RMSNorm probe's tiny problem
ATTENTION_TARGET_US = 5.0  # issue 34: the registered attention within 5 µs of SDPA


def host_us(fn: Callable[[], object], calls: int = CALLS, repeats: int = REPEATS) -> float:
    """Median over ``repeats`` rounds of the host time per call (µs) of ``calls`` back-to-back
    calls of ``fn``; the GPU is drained between rounds, not inside them."""
    for _ in range(20):  # warm-up: compiles, loads, allocator
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) * 1e6 / calls)
        torch.cuda.synchronize()
    return statistics.median(rounds)


@dataclass(frozen=True)
class Row:
    group: str  # "mma bf16 256³", "add 2^16", "fp64 GEMM 256³"
    layer: str
    us: float  # host µs per call
    peer_us: float  # the group's PyTorch call, same run
    peer_what: str

    @property
    def above_peer(self) -> float:
        return self.us - self.peer_us

    def row(self) -> dict:
        # one column for every group: each group's peer is its first row
        return {"group": self.group, "layer": self.layer, "µs per call": round(self.us, 1),
                "above the group's PyTorch call": f"{self.above_peer:+.1f}"}


def _raw_launch(kernel: nvrtc.Kernel, args: tuple, grid: int, block: int, shared: int):
    """cuLaunchKernel through ctypes with the arguments packed once: the floor."""
    pointers = kernel.pack(*args)  # valid until this kernel packs again on this thread
    launch = cuda_libs.driver_library().cuLaunchKernel
    stream = torch.cuda.current_stream().cuda_stream
    func = kernel.handle

    def call():
        launch(func, grid, 1, 1, block, 1, 1, shared, stream, pointers, None)

    return call


def _layers_mma(n: int) -> tuple[str, str, list[tuple[str, Callable]]]:
    from kernels.matmul import mma

    v = mma.VARIANTS["bf16"]
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16).t()  # column-major, as mma takes it
    out = torch.empty(n, n, dtype=v.out, device="cuda")
    config = mma.DEFAULT_CONFIG
    bt = b.t()
    kernel = mma.loaded(v, config, torch.cuda.current_device())
    grid = -(-n // config.bm) * -(-n // config.bn)
    bound = kernel.launcher(grid=grid, block=config.threads, shared_mem=config.shared_bytes)
    registered = kernels_get("matmul", "mma", "bf16")
    args = (a, bt, out, n, n, n)
    return f"mma bf16 {n}³", "torch.mm bf16", [
        ("torch.mm", lambda: torch.mm(a, b)),
        ("raw cuLaunchKernel (args packed once)",
         _raw_launch(kernel, args, grid, config.threads, config.shared_bytes)),
        ("nvrtc Kernel.launcher(...)(*args)", lambda: bound(*args)),
        ("nvrtc Kernel(*args, grid=, block=)",
         lambda: kernel(*args, grid=grid, block=config.threads,
                        shared_mem=config.shared_bytes)),
        ("mma.launch", lambda: mma.launch(v, a, bt, out, config)),
        ("mma.matmul", lambda: mma.matmul(a, b, v)),
        ("registry get_kernel(...)(a, b)", lambda: registered(a, b)),
    ]


def _layers_add(n: int) -> tuple[str, str, list[tuple[str, Callable]]]:
    from kernels.add import nvrtc as add_nvrtc

    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    kernel = add_nvrtc.loaded(torch.float32, torch.cuda.current_device())
    grid = -(-n // add_nvrtc.BLOCK)
    bound = kernel.launcher(grid=grid, block=add_nvrtc.BLOCK)
    registered = kernels_get("add", "nvrtc")
    return f"add float32 {n:,}", "a + b", [
        ("a + b", lambda: a + b),
        ("raw cuLaunchKernel (args packed once)",
         _raw_launch(kernel, (a, b, out, n), grid, add_nvrtc.BLOCK, 0)),
        ("nvrtc Kernel.launcher(...)(*args)", lambda: bound(a, b, out, n)),
        ("add_nvrtc (the op's function)", lambda: add_nvrtc.add_nvrtc(a, b)),
        ("registry get_kernel(...)(a, b)", lambda: registered(a, b)),
    ]


def _layers_fp64(n: int) -> tuple[str, str, list[tuple[str, Callable]]]:
    from kernels.matmul.fp64 import nvrtc_gemm

    a, b = torch.randn(n, n, device="cuda", dtype=torch.float64), torch.randn(
        n, n, device="cuda", dtype=torch.float64)
    registered = kernels_get("matmul", "nvrtc", "fp64 16x16")
    return f"fp64 GEMM {n}³", "torch.mm float64", [
        ("torch.mm", lambda: torch.mm(a, b)),
        ("nvrtc_gemm.gemm (the op's function)", lambda: nvrtc_gemm.gemm(a, b, (16, 16))),
        ("registry get_kernel(...)(a, b)", lambda: registered(a, b)),
    ]


def _layers_wgmma(n: int, variant: str) -> tuple[str, str, list[tuple[str, Callable]]]:
    from kernels.matmul.hopper import wgmma

    v = wgmma.variant(variant)
    a = torch.randn(n, n, device="cuda").to(v.a)
    b = torch.randn(n, n, device="cuda").to(v.b).t()  # column-major, as wgmma takes it
    out = torch.empty(n, n, dtype=v.out, device="cuda")
    registered = kernels_get("matmul", "wgmma", f"{wgmma.BEST.name}_{v.name}")
    if v.a.itemsize == 1:
        one = torch.ones((), device="cuda")
        peer_what, peer = "torch._scaled_mm unit scales", (
            "torch._scaled_mm", lambda: torch._scaled_mm(a, b, one, one,
                                                         out_dtype=torch.bfloat16))
    else:
        peer_what, peer = "torch.mm bf16", ("torch.mm", lambda: torch.mm(a, b))
    return f"wgmma {v.name} {n}³", peer_what, [
        peer,
        ("wgmma.launch (descriptors and arguments each call)",
         lambda: wgmma.launch(wgmma.BEST, v, a, b.t(), out)),
        ("wgmma.matmul (the op's function)", lambda: wgmma.matmul(a, b, v)),
        ("registry get_kernel(...)(a, b)", lambda: registered(a, b)),
        ("the registry call replayed from a CUDA graph",
         timing.capture_graph(lambda: registered(a, b))),
    ]


def _layers_attention(b: int, h: int, s: int, d: int) -> tuple[str, str, list]:
    """Lesson 09's Triton attention (issue 34's tiny problem): SDPA, the forward called
    directly (its launch plan looked up), the registered call, and forward + backward."""
    import torch.nn.functional as F

    from kernels.attention import triton_fwd

    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    registered = kernels_get("attention", "triton")
    return f"attention bf16 {b}x{h}x{s}x{d} causal", "SDPA", [
        ("F.scaled_dot_product_attention",
         lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        ("triton_fwd.forward, no lse (the launch plan per problem)",
         lambda: triton_fwd.forward(q, k, v, True, save_lse=False)),
        ("registry get_kernel(...)(q, k, v, True)", lambda: registered(q, k, v, True)),
    ]


def _backward_of(fn: Callable, inputs: tuple, grad: torch.Tensor) -> Callable:
    """A call of forward + backward through autograd (the gradients let go each time)."""
    def call():
        fn().backward(grad)
        for t in inputs:
            t.grad = None
    return call


def _layers_rmsnorm(rows: int, cols: int, backward: bool) -> tuple[str, str, list]:
    """Lesson 10's Triton RMSNorm (the RMSNorm probe's tiny problem), beside F.rms_norm:
    forward alone, or forward + backward through autograd."""
    import torch.nn.functional as F

    from kernels.rmsnorm import triton_rmsnorm

    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    registered = kernels_get("rmsnorm", "triton")
    if not backward:
        return f"rmsnorm bf16 {rows}x{cols} forward", "F.rms_norm", [
            ("F.rms_norm", lambda: F.rms_norm(x, (cols,), w, 1e-6)),
            ("triton_rmsnorm.forward (the launch plan per problem)",
             lambda: triton_rmsnorm.forward(x, w, 1e-6)),
            ("registry get_kernel(...)(x, w)", lambda: registered(x, w, 1e-6)),
        ]
    x.requires_grad_()
    w.requires_grad_()
    dy = torch.randn_like(x)
    return f"rmsnorm bf16 {rows}x{cols} forward + backward", "F.rms_norm f+b", [
        ("F.rms_norm, forward + backward",
         _backward_of(lambda: F.rms_norm(x, (cols,), w, 1e-6), (x, w), dy)),
        ("RMSNormFunction.apply, forward + backward",
         _backward_of(lambda: triton_rmsnorm.RMSNormFunction.apply(x, w, 1e-6), (x, w), dy)),
        ("registry call, forward + backward",
         _backward_of(lambda: registered(x, w, 1e-6), (x, w), dy)),
    ]


def kernels_get(*key):
    import kernels

    return kernels.get_kernel(*key)


def measure(quick: bool = False) -> list[Row]:
    """Every layer of the three groups; the first row of each group is its PyTorch peer."""
    calls, repeats = (50, 5) if quick else (CALLS, REPEATS)
    rows = []
    groups = [lambda: _layers_mma(MATMUL_SIZE), lambda: _layers_add(ADD_SIZE),
              lambda: _layers_fp64(MATMUL_SIZE)]
    if _hopper():
        groups += [lambda v=v: _layers_wgmma(MATMUL_SIZE, v) for v in ("bf16", "fp8_e4m3")]
    # the Triton kernels of lessons 09 and 10 (and 12's model)
    if not requirements.unmet("triton-gpu"):
        groups += [lambda: _layers_attention(*ATTENTION_SHAPE),
                   lambda: _layers_rmsnorm(*RMSNORM_SHAPE, backward=False),
                   lambda: _layers_rmsnorm(*RMSNORM_SHAPE, backward=True)]
    for make in groups:
        group, peer_what, layers = make()
        peer_us = host_us(layers[0][1], calls, repeats)
        rows.append(Row(group, layers[0][0], peer_us, peer_us, peer_what))
        for label, fn in layers[1:]:
            rows.append(Row(group, label, host_us(fn, calls, repeats), peer_us, peer_what))
    return rows


def _hopper() -> bool:
    from kernels.matmul.hopper import wgmma

    return wgmma.gpu_reason(nvrtc.device_capability(torch.cuda.current_device())) is None


def plot(rows: list[Row], name: str = "04_launch_overhead"):
    """Horizontal bars: host µs per call of each layer, grouped, PyTorch's call in grey."""
    fig, ax = plots.figure("Host time per call, back to back", xlabel="µs per call")
    labels = [f"{r.group}: {r.layer}" for r in rows]
    colors = ["#999999" if r.us == r.peer_us else "#1f77b4" for r in rows]
    ax.barh(range(len(rows)), [r.us for r in rows], color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    return fig, plots.save(fig, name)


def verdict(rows: list[Row]) -> str:
    """The targets, one line each: the registry's mma call within 20 µs of torch.mm, (on a
    Hopper GPU) its wgmma calls within 5 µs of their peers, and the registered Triton
    attention within 5 µs of SDPA."""
    lines = []
    for kind, target in (("mma", TARGET_US), ("wgmma", WGMMA_TARGET_US),
                         ("attention", ATTENTION_TARGET_US)):
        for registry in (r for r in rows if r.group.split(" ")[0] == kind
                         and r.layer.startswith("registry")):
            lines.append(timing.verdict(
                f"the registered {registry.group} kernel at most {target:.0f} µs per call "
                f"above {registry.peer_what.split(' ')[0]}",
                f"{registry.us:.1f} µs vs {registry.peer_us:.1f} µs "
                f"({registry.above_peer:+.1f})",
                registry.above_peer <= target, _why_over(registry, rows)))
    return "\n".join(lines)


def _why_over(registry: Row, rows: list[Row]) -> str:
    """What a registered call that misses its target spends, read from its group's rows: the
    registry's path above the op's own function (its checks, dispatch and, for attention, the
    autograd Function), or a slow host when the function itself is as slow."""
    direct = [r for r in rows if r.group == registry.group and r is not registry
              and r.us != r.peer_us and not r.layer.startswith("raw ")  # (the peer's row)
              and "graph" not in r.layer]
    below = min(direct, key=lambda r: r.us, default=None)
    if below is not None and registry.us - below.us > 1.0:
        return (f"the registry's path adds {registry.us - below.us:.1f} µs to "
                f"{below.layer.split(' (')[0]} ({below.us:.1f} µs, "
                f"{below.above_peer:+.1f} above the peer): its checks, dispatch and Python")
    return "the host is busy or slower than the H100 box this was set for"


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if not env.HAS_CUDA or nvrtc.unavailable_reason():
        print("launch overhead benchmark: needs a CUDA GPU and NVRTC; nothing measured")
        return []
    rows = measure(quick)
    print(plots.stamped_table([r.row() for r in rows],
                              title="host time per call, back to back (median of rounds)"))
    print(verdict(rows))
    return [results.Record(LESSON, f"host time per call: {r.group}, {r.layer}",
                           round(r.us, 2), "µs", peer=round(r.peer_us, 2),
                           peer_what=f"{r.peer_what}, same run")
            for r in rows]
