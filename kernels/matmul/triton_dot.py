"""Lesson 07's bridge to Triton: a tiled matmul written with ``tl.dot``, registered as
``("matmul", "triton_dot")``.

The same tiles as the hand-written CUDA steps, said in a few lines of Python:

* **One program per output tile.** Program ``pid`` computes a ``BLOCK_M x BLOCK_N`` tile of C,
  as a thread block of ``smem_tiled.cu`` or ``mma.cu`` does; Triton spreads the tile over the
  threads of ``num_warps`` warps itself.
* **A loop over K.** Each step loads a ``BLOCK_M x BLOCK_K`` slice of A and a
  ``BLOCK_K x BLOCK_N`` slice of B and accumulates ``tl.dot`` of them in fp32. On an Ampere or
  Hopper GPU the compiler stages the slices through shared memory (``num_stages`` buffers: the
  ``cp.async`` ring of ``mma.cu``, or TMA and mbarriers on Hopper), swizzles them, and issues
  ``mma.sync`` (or ``wgmma``) on them: everything lesson 07 writes by hand.
* **Masks at the ragged edges.** Rows past M, columns past N and the K slice past K load as 0
  (they add nothing to the sum) and are not stored, so any shape works.
* **A grouped launch order for L2.** Consecutive programs walk ``GROUP_M`` tile rows column by
  column (the order of ``mma.cu`` and of lesson 16), so the tiles running together share rows
  of A and columns of B in the L2 cache.
* **Autotuned.** On a GPU ``@triton.autotune`` times a few tile configurations on the first
  call for each (M, N, K, dtypes) and keeps the fastest. Triton's interpreter (a CPU, no GPU)
  raises on more than one configuration, so there it runs one fixed tile.

Any strides (row- or column-major A and B). fp16 and bf16 accumulate in fp32 and return their
own dtype; fp32 runs on the tensor cores as tf32 (10-bit mantissa), as ``torch.mm`` does with
``allow_tf32``. On a CPU the interpreter runs fp16 and fp32; it computes bf16 ``tl.dot`` wrongly
(measured with Triton 3.8: it converts bf16 after loading, results off by orders of magnitude),
so :func:`reason` refuses bf16 there.

The Hopper matmul's Triton peer (``kernels/matmul/hopper/triton_tma.py``, lesson 17's staircase) is
this kernel made Hopper's way: TMA descriptors instead of pointer arithmetic and masks, and a
persistent grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch
import triton
import triton.language as tl

from course_utils import env
from kernels.matmul.hopper.triton_tma_kernel import tile_coordinates  # the grouped order, one copy
from kernels.matmul.problem import validate_args

PROVIDER = "triton_dot"
SOURCE = "kernels/matmul/triton_dot.py"
LESSON = "mma_matmul.triton_dot"  # its records: beside lesson 07's, not replacing them
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Tile:
    """One configuration: what a ``triton.Config`` holds."""

    block_m: int
    block_n: int
    block_k: int
    num_stages: int = 3  # shared-memory buffers of the compiler's software pipeline
    num_warps: int = 4
    group_m: int = 8

    def config(self) -> triton.Config:
        return triton.Config({"BLOCK_M": self.block_m, "BLOCK_N": self.block_n,
                              "BLOCK_K": self.block_k, "GROUP_M": self.group_m},
                             num_stages=self.num_stages, num_warps=self.num_warps)

    @property
    def short(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k}, {self.num_stages} stages, "
                f"{self.num_warps} warps")


# What the GPU autotuner chooses among: the shapes of Triton's matmul tutorial for Ampere and
# Hopper (16-bit operands). A configuration whose buffers do not fit in shared memory (fp32
# takes twice the bytes of fp16) is timed as infinitely slow by the autotuner, never chosen.
GPU_TILES = (
    Tile(128, 256, 64, num_stages=3, num_warps=8),
    Tile(128, 128, 64, num_stages=4, num_warps=8),
    Tile(128, 128, 32, num_stages=4, num_warps=4),
    Tile(64, 128, 32, num_stages=4, num_warps=4),
    Tile(64, 64, 32, num_stages=5, num_warps=2),
)
# The interpreter's one tile: it pays per program and per loop step, not per element, so
# larger tiles are cheaper there
INTERPRETER_TILE = Tile(64, 64, 32)


@triton.jit
def dot_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """C = A @ B, one BLOCK_M x BLOCK_N tile of C per program, in grouped order."""
    tile_m, tile_n = tile_coordinates(tl.program_id(0), tl.cdiv(M, BLOCK_M),
                                       tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    # 64-bit offsets: M * K elements may pass 2^31
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = k0 + ks < K  # the last slice of a K that is not a multiple of BLOCK_K
        a = tl.load(a_ptrs, mask=(rows < M)[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (cols < N)[None, :], other=0.0)
        # the whole tile product on the tensor cores, accumulated in fp32
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & (cols < N)[None, :])


@cache
def _autotuned():
    """The kernel behind ``@triton.autotune`` over :data:`GPU_TILES` (compiled Triton only),
    keyed by the problem's sizes; Triton adds the operands' dtypes to the key itself."""
    return triton.autotune(configs=[t.config() for t in GPU_TILES],
                           key=["M", "N", "K"])(dot_matmul_kernel)


# -- what a machine and a problem allow -------------------------------------------------------


def reason(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why this kernel cannot compute ``a @ b`` here (None: it can). Shapes, dtypes matching
    and devices matching are the matmul op's to validate."""
    devices = f"got a on {a.device.type}, b on {b.device.type}"
    if env.TRITON_INTERPRET:
        if a.is_cuda or b.is_cuda:
            return f"Triton's interpreter (TRITON_INTERPRET=1) reads CPU tensors; {devices}"
        if a.dtype == torch.bfloat16:
            return ("Triton's interpreter computes bf16 tl.dot wrongly (it converts bf16 after "
                    "loading; measured with Triton 3.8); on a CPU use fp16 or fp32, on a GPU "
                    "bf16 runs")
        return None
    if not a.is_cuda:
        return f"compiled Triton reads GPU memory: needs CUDA tensors; {devices}"
    major, minor = torch.cuda.get_device_capability(a.device)
    if major < 8 and a.dtype != torch.float16:
        return (f"{str(a.dtype)[6:]} tl.dot needs sm_80+ (bf16 and tf32 tensor cores); this GPU "
                f"is sm_{major}{minor}, where fp16 runs")
    return None


# -- running ------------------------------------------------------------------------------------


def matmul(a: torch.Tensor, b: torch.Tensor, *, tile: Tile | None = None) -> torch.Tensor:
    """``a @ b`` with the ``tl.dot`` kernel: fp32 (tf32 on a GPU), fp16 or bf16, any strides;
    the result in the inputs' dtype. ``tile`` fixes the configuration (otherwise the
    autotuner's choice on a GPU, :data:`INTERPRETER_TILE` under the interpreter).
    Raises ``ValueError`` with the reason when it cannot run the problem here."""
    validate_args(a, b)
    if a.dtype not in DTYPES:
        raise ValueError(f"triton_dot: a expected one of float32, float16, bfloat16, "
                         f"got {a.dtype}")
    if r := reason(a, b):
        raise ValueError(f"triton_dot: {r}")
    if tile is not None and not isinstance(tile, Tile):
        raise ValueError(f"triton_dot: tile expected a triton_dot.Tile, got {type(tile).__name__}")
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return c  # nothing to compute, no program to launch
    args = (a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride())
    # fp32 operands go through the tensor cores as tf32 (the interpreter ignores the setting)
    precision = "tf32" if a.dtype == torch.float32 else "ieee"
    if tile is None and not env.TRITON_INTERPRET:
        def grid(meta):
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

        _autotuned()[grid](*args, INPUT_PRECISION=precision)
        return c
    tile = tile or INTERPRETER_TILE
    launch = {} if env.TRITON_INTERPRET else {"num_warps": tile.num_warps,
                                              "num_stages": tile.num_stages}
    grid = (triton.cdiv(m, tile.block_m) * triton.cdiv(n, tile.block_n),)
    dot_matmul_kernel[grid](*args, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n,
                            BLOCK_K=tile.block_k, GROUP_M=tile.group_m,
                            INPUT_PRECISION=precision, **launch)
    return c


def chosen_tile(m: int, n: int, k: int, dtype: torch.dtype) -> str:
    """The configuration the autotuner picked for a problem it has run (or the fixed one)."""
    if env.TRITON_INTERPRET:
        return INTERPRETER_TILE.short + " (interpreter: fixed)"
    for key, config in _autotuned().cache.items():
        if tuple(key[:3]) == (m, n, k) and str(dtype) in map(str, key):
            kw = config.kwargs
            return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}, {config.num_stages} "
                    f"stages, {config.num_warps} warps")
    return "not tuned yet"


def register():
    """Register ``("matmul", "triton_dot")`` (called once, on import of this module); nothing
    is compiled until the first call."""
    from kernels.registry import register as register_kernel

    return register_kernel(
        "matmul", PROVIDER, fn=matmul, dtypes=DTYPES, devices=("cpu", "cuda"), needs=("triton",),
        check=reason,
        meta={"accumulator": "float32", "source": SOURCE, "autotuned": [t.short for t in GPU_TILES],
              "layout": "any strides", "tensor_cores": True,
              # fp32 runs as tf32 on a GPU: its inputs are rounded to a 10-bit mantissa
              "tolerance": {torch.float32: (2e-2, 2e-2)}},
        description="Triton tl.dot: a program per tile, masked edges, grouped order, "
                    "autotuned tiles")


KERNEL = register()


# -- measuring (make bench; notebook 07) ------------------------------------------------------


@dataclass(frozen=True)
class Point:
    dtype: str  # "bf16", "fp16", "tf32"
    n: int
    rate: float  # TFLOP/s, the registered kernel called back to back
    cublas: float  # torch.mm on the same operands, same run
    tile: str

    @property
    def of_cublas(self) -> float:
        return self.rate / self.cublas

    def row(self) -> dict:
        return {"dtype": self.dtype, "n": self.n, "tl.dot TFLOP/s": round(self.rate, 1),
                "cuBLAS TFLOP/s": round(self.cublas, 1), "of cuBLAS": f"{self.of_cublas:.2f}",
                "tile": self.tile}


MEASURED = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}


def measure(sizes=(4096, 8192), dtypes=tuple(MEASURED)) -> list[Point]:
    """The registered kernel against ``torch.mm`` (cuBLAS) on the same square operands, in
    alternating rounds (the clock drifts as the GPU heats: each side gets the median of its
    rounds); the autotuner runs first, outside the timing. Needs a CUDA GPU."""
    from course_utils import timing
    from kernels.registry import get_kernel

    kernel = get_kernel("matmul", PROVIDER)
    points = []
    for name in timing.progress(list(dtypes), "tl.dot matmul"):
        dtype = MEASURED[name]
        allow = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"  # cuBLAS as tf32 too
        try:
            for n in sizes:
                a = torch.randn(n, n, device="cuda").to(dtype)
                b = torch.randn(n, n, device="cuda").to(dtype)
                kernel(a, b)  # the autotuner's sweep, untimed
                flop = timing.matmul_flop(n, n, n)
                ours, theirs = [], []
                for _ in range(3):
                    ours.append(timing.benchmark(kernel, a, b, name=f"tl.dot {name}").median)
                    theirs.append(timing.benchmark(torch.mm, a, b, name="cuBLAS").median)
                points.append(Point(name, n, timing.tflops(flop, sorted(ours)[1]),
                                    timing.tflops(flop, sorted(theirs)[1]),
                                    chosen_tile(n, n, n, dtype)))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allow
    return points


def run(quick: bool = False) -> list:
    """``make bench``: :func:`measure` as results records (lesson ``mma_matmul.triton_dot``)."""
    from course_utils import plots, results

    if not env.HAS_CUDA:
        print("tl.dot matmul benchmark: needs a CUDA GPU; nothing measured")
        return []
    points = measure(sizes=(4096,) if quick else (4096, 8192))
    print(plots.stamped_table([p.row() for p in points], "Triton tl.dot matmul against cuBLAS"))
    return [results.Record(LESSON, f"triton tl.dot {p.dtype} {p.n}^3 (autotuned: {p.tile}), "
                                   "registered kernel, back to back",
                           round(p.rate, 1), "TFLOP/s", peer=round(p.cublas, 1),
                           peer_what=f"torch.mm{' tf32' if p.dtype == 'tf32' else ''} "
                                     "(cuBLAS), same run")
            for p in points]
