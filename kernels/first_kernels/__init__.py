"""The first CUDA kernels of lesson 04, through NVRTC: one element per thread (``affine``), a
2-D grid (``add_2d``, registered as the ``add`` op's ``nvrtc [2d]`` kernel), the same 2-D sum
with threadIdx.x down a column (``add_2d_columns``: uncoalesced), warp divergence
(``branch_lane`` against ``branch_warp``) and ``printf`` from a kernel (``hello``).

Compiling needs no GPU (``compile_kernel``: any architecture, the SASS can be read anywhere);
launching does. The launches are written here in Python, one per kernel, so the notebook shows
the launch configuration next to the kernel it runs.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.registry import register

FOLDER = Path(__file__).parent
SOURCES = {"affine": "first_kernels.cu", "add_2d": "first_kernels.cu",
           "add_2d_columns": "first_kernels.cu", "branch_lane": "divergence.cu",
           "branch_warp": "divergence.cu", "hello": "hello.cu"}
ITERS = 256  # divergence.cu: steps of __sinf or __cosf per thread
BLOCK_2D = (32, 8)  # add_2d: 32 threads along a row (one warp, 128 bytes), 8 rows


def compile_kernel(name: str, arch=None, **kwargs) -> nvrtc.Compiled:
    """Compile one kernel of this folder (no GPU needed; ``arch`` defaults to this GPU or
    sm_90)."""
    if name not in SOURCES:
        raise ValueError(f"name expected one of {', '.join(SOURCES)}, got {name!r}")
    defines = {"ITERS": ITERS} if SOURCES[name] == "divergence.cu" else {}
    return nvrtc.compile(FOLDER / SOURCES[name], name, defines=defines, arch=arch, **kwargs)


@functools.cache  # compiled (or read from the cache) and loaded once per kernel and GPU
def loaded(name: str, device: int = 0) -> nvrtc.Kernel:
    return nvrtc.load(compile_kernel(name, verbose=False), device)


def _float32(name: str, t) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or not t.is_cuda:
        got = f"{t.dtype} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{name} expected a float32 CUDA tensor, got {got}")
    return t.contiguous()


def affine(x: torch.Tensor, a: float, b: float, threads: int = 256) -> torch.Tensor:
    """y = a * x + b, one element per thread: ceil(n / threads) blocks of ``threads``."""
    x = _float32("x", x)
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        loaded("affine", x.device.index or 0)(x, y, float(a), float(b), n,
                                              grid=-(-n // threads), block=threads)
    return y


def _as_rows(t: torch.Tensor) -> tuple[int, int]:
    """(rows, cols) of a tensor seen as a row-major matrix: its last dimension is the row."""
    cols = t.shape[-1] if t.dim() else 1
    return (t.numel() // cols if cols else 0), cols


def add_2d(a: torch.Tensor, b: torch.Tensor, fast_axis: str = "row") -> torch.Tensor:
    """a + b with a 2-D grid of 32 x 8 blocks. ``fast_axis``: "row" (threadIdx.x along a row:
    coalesced, ``add_2d``) or "column" (threadIdx.x down a column: ``add_2d_columns``)."""
    if fast_axis not in ("row", "column"):
        raise ValueError(f"fast_axis expected 'row' or 'column', got {fast_axis!r}")
    a, b = _float32("a", a), _float32("b", b)
    if a.shape != b.shape:
        raise ValueError(f"b expected the shape of a {tuple(a.shape)}, got {tuple(b.shape)}")
    y = torch.empty_like(a)
    rows, cols = _as_rows(a)
    if rows and cols:
        bx, by = BLOCK_2D
        along, down = (cols, rows) if fast_axis == "row" else (rows, cols)
        name = "add_2d" if fast_axis == "row" else "add_2d_columns"
        loaded(name, a.device.index or 0)(a, b, y, rows, cols, grid=(-(-along // bx),
                                                                     -(-down // by)),
                                          block=BLOCK_2D)
    return y


MAX_GRID_Y = 65535  # the grid's y (and z) dimension is at most 65535 blocks


def _add_2d_check(a: torch.Tensor, b: torch.Tensor) -> str | None:
    rows, _ = _as_rows(a)
    if -(-rows // BLOCK_2D[1]) > MAX_GRID_Y:
        return (f"{rows} rows need {-(-rows // BLOCK_2D[1])} blocks along the grid's y, "
                f"which holds at most {MAX_GRID_Y}")
    return None


def branch(x: torch.Tensor, on: str, threads: int = 256) -> torch.Tensor:
    """``divergence.cu``'s ``branch_lane`` (``on="lane"``) or ``branch_warp`` (``"warp"``) on
    ``x``: the same ITERS steps of __sinf or __cosf per element, the side chosen by the lane or
    by the warp."""
    if on not in ("lane", "warp"):
        raise ValueError(f"on expected 'lane' or 'warp', got {on!r}")
    x = _float32("x", x)
    y = torch.empty_like(x)
    if x.numel():
        loaded(f"branch_{on}", x.device.index or 0)(x, y, x.numel(),
                                                     grid=-(-x.numel() // threads), block=threads)
    return y


def branch_reference(x: torch.Tensor, on: str, threads: int = 256) -> torch.Tensor:
    """What :func:`branch` computes, in PyTorch (float32, sin/cos instead of the fast
    __sinf/__cosf: equal to about 1e-5 after ITERS steps that contract)."""
    t = torch.arange(x.numel(), device=x.device) % threads
    sine = (t % 2 == 0) if on == "lane" else ((t // 32) % 2 == 0)
    y = x.clone()
    for _ in range(ITERS):
        y = torch.where(sine, torch.sin(y), torch.cos(y)) + 0.5
    return y


def hello(x: torch.Tensor, blocks: int, threads: int) -> None:
    """Launch ``hello.cu``: every thread printf's its block, thread and element of x (the
    output reaches the process's standard output at the next synchronisation)."""
    x = _float32("x", x)
    loaded("hello", x.device.index or 0)(x, x.numel(), grid=blocks, block=threads)


def add_2d_nvrtc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """first_kernels.cu's add_2d (lesson 04): a 2-D grid over the last dimension (columns)
    and the rest (rows)."""
    return add_2d(a, b)


register("add", "nvrtc", "2d", fn=add_2d_nvrtc, dtypes=(torch.float32,),
         devices=("cuda",), needs=("cuda", "nvrtc"), check=_add_2d_check,
         meta={"source": "kernels/first_kernels/first_kernels.cu", "kernel": "add_2d",
               "block": BLOCK_2D})
