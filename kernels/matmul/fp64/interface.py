"""The interface of the FP64 GEMM: what turns three implementations into registry kernels.

The implementations (``triton_gemm.py``, ``nvrtc_gemm.py``, ``cute_gemm.py``) compute ``a @ b``
and know nothing of the registry. This file gives each of them what the CUTLASS API's "bring
your own kernel" example gives its kernel class:

* **metadata** (:func:`metadata`): dtypes, layout, tile shape, accumulator, provider, the
  requirements and GPU it needs; discovery filters on it;
* **supports** (:func:`check`, on top of the registry's own dtype/device/layout checks): a
  reason in plain words for a problem this kernel cannot run, never an exception;
* **build** (:func:`build`): compile once, on first use, cached by the registry;
* **generate** (:func:`generate`): one kernel per point of the design space (tile shapes) that
  passes a metadata filter, as ``generate_kernels(metadata_filter)`` does.

Nothing here is registered; ``kernels/matmul/fp64/__init__.py`` registers the design space, and
a notebook can :func:`generate` and register its own points.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_utils import env
from kernels.registry import Kernel, one_of

PROVIDERS = ("triton", "nvrtc", "cute_dsl")
# The design space: (rows, columns) of out per block / program.
DESIGN_SPACE: dict[str, tuple[tuple[int, ...], ...]] = {
    # one thread per output: TILE_M x TILE_N threads per block (at most 1024); the shape
    # decides how many distinct rows of a and columns of b a warp touches
    "nvrtc": ((16, 16), (8, 32), (32, 8), (4, 64), (64, 4), (32, 32)),
    # (BLOCK_M, BLOCK_N, BLOCK_K): a program per tile, its elements spread over 4 warps; the
    # broadcast product of a K step holds BLOCK_M·BLOCK_K·BLOCK_N = 8192 values (64 a thread)
    "triton": ((16, 16, 32), (32, 32, 8), (32, 64, 4), (64, 64, 2)),
    # the CUTLASS example's kernel: each compile takes a fraction of a second, keep it short
    "cute_dsl": ((16, 16), (8, 32), (32, 32)),
}
TRITON_WARPS = 4
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y, which counts tiles of M


def metadata(provider: str, tile: tuple[int, ...]) -> dict:
    """The registry fields of one point of the design space: ``KernelMetadata`` in the course."""
    one_of("provider", provider, PROVIDERS)
    dims = 3 if provider == "triton" else 2
    if (not isinstance(tile, tuple) or len(tile) != dims
            or not all(isinstance(t, int) and t > 0 for t in tile)):
        what = "(BLOCK_M, BLOCK_N, BLOCK_K)" if dims == 3 else "(rows, columns)"
        raise ValueError(f"tile expected {what} of positive ints for {provider}, got {tile!r}")
    meta = {"family": "fp64_gemm", "tile": tile, "accumulator": "float64",
            "layout": "row-major a, b, out (a K-major, b N-major)",
            "implementation": {"triton": "kernels/matmul/fp64/triton_gemm.py",
                               "nvrtc": "kernels/matmul/fp64/gemm.cu",
                               "cute_dsl": "kernels/matmul/fp64/cute_gemm.py"}[provider]}
    fields = {"dtypes": (torch.float64,), "contiguous": True, "meta": meta}
    if provider == "triton":
        # a program per tile, spread over 4 warps; compiled Triton reads GPU memory and the
        # interpreter CPU memory, which check() tells apart
        if any(t & (t - 1) for t in tile):
            raise ValueError(f"tile expected powers of two (tl.arange needs them), got {tile}")
        meta["threads"] = 32 * TRITON_WARPS
        fields["needs"] = ("triton",)
        return fields
    meta["threads"] = tile[0] * tile[1]  # one thread per output element
    if meta["threads"] > 1024:
        raise ValueError(f"tile expected at most 1024 threads (one per output), got {tile}")
    fields["devices"] = ("cuda",)
    fields["needs"] = ("nvrtc",) if provider == "nvrtc" else ("cute-dsl",)
    if provider == "cute_dsl":
        fields["min_capability"] = (8, 0)  # CuTe DSL targets sm_80 and newer
    return fields


def check(provider: str, tile: tuple[int, ...]) -> Callable[..., str | None]:
    """The kernel-specific part of ``supports()``: what the registry's generic checks (dtype,
    device, contiguity, requirements, GPU) do not know about this kernel."""

    def supports(a: torch.Tensor, b: torch.Tensor) -> str | None:
        if provider == "triton":
            # compiled Triton reads GPU memory; the interpreter (no GPU) reads CPU memory
            want = "cpu" if env.TRITON_INTERPRET else "cuda"
            if a.device.type != want:
                how = "Triton's interpreter" if want == "cpu" else "compiled Triton"
                return f"{how} needs tensors on {want}, got a on {a.device.type}"
        m, k = a.shape
        n = b.shape[1]
        if max(m, n, k) >= 2**31:
            return f"indexes with 32-bit ints: M, N, K must be < 2^31, got {m}, {n}, {k}"
        if provider != "triton" and -(-m // tile[0]) > MAX_GRID_Y:
            return (f"one block row per {tile[0]} rows of a: at most {MAX_GRID_Y * tile[0]} "
                    f"rows, got a with {m}")
        return None

    return supports


def build(provider: str, tile: tuple[int, ...]) -> Callable[[], Callable]:
    """What the registry calls once, on first use: import (and, where there is a compile step,
    compile) the implementation, and return ``fn(a, b) -> a @ b``."""

    def load() -> Callable:
        if provider == "triton":
            from kernels.matmul.fp64 import triton_gemm as impl  # Triton compiles per call shape
        elif provider == "nvrtc":
            from kernels.matmul.fp64 import nvrtc_gemm as impl

            impl.compile_gemm(tile)  # compile now (cached on disk), launch later
        else:
            from kernels.matmul.fp64 import cute_gemm as impl

            impl.compile_gemm(tile, torch.cuda.current_device())
        if provider == "triton":
            return lambda a, b: impl.gemm(a, b, tile, num_warps=TRITON_WARPS)
        return lambda a, b: impl.gemm(a, b, tile)

    return load


def make_kernel(provider: str, tile: tuple[int, ...]) -> Kernel:
    """One kernel of the family, not registered: ``kernels.register_kernel`` registers it."""
    fields = metadata(provider, tile)  # validates provider and tile first
    shape = "x".join(map(str, tile))
    per = f"program, K in steps of {tile[2]}" if provider == "triton" else "block"
    return Kernel(op="matmul", provider=provider, variant=f"fp64 {shape}",
                  build=build(provider, tile), check=check(provider, tile),
                  description=f"FP64 GEMM in {provider}: a {tile[0]}x{tile[1]} tile of out per "
                              f"{per}",
                  **fields)


def generate(provider: str, where: Callable[[Kernel], bool] | None = None,
             tiles: tuple[tuple[int, ...], ...] | None = None) -> list[Kernel]:
    """One kernel per tile shape of ``provider``'s design space (or of ``tiles``) that passes
    the metadata filter ``where``: the course's ``generate_kernels(metadata_filter)``."""
    one_of("provider", provider, PROVIDERS)
    candidates = [make_kernel(provider, tile) for tile in (tiles or DESIGN_SPACE[provider])]
    return [k for k in candidates if where is None or where(k)]
