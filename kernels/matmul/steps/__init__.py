"""The steps from a naive matmul to the tensor-core kernel of lesson 07, one idea each.

Each step is a ``.cu`` file of its own (llm.c ``dev/cuda`` style: its header says what it
changes from the previous one) or a new configuration of the previous step's file (a header
constant: :func:`what_changed` shows either as a diff). In order (:data:`STEPS`), each
registered as ``("matmul", "steps", variant)``::

    1_naive           naive.cu          one thread per output, a warp covers 1 x 32 outputs
    2_naive_2x16      naive.cu          a warp covers 2 x 16 outputs (fewer cache lines a load)
    3_naive_4x8       naive.cu          a warp covers 4 x 8
    4_smem            smem_tiled.cu     tiles staged in shared memory, one output per thread
    5_smem_bk32       smem_tiled.cu     K slices of 32 instead of 8
    6_smem_2x2        smem_tiled.cu     2 x 2 outputs per thread (register blocking)
    7_smem_4x4        smem_tiled.cu     4 x 4
    8_smem_8x8        smem_tiled.cu     8 x 8, 128 x 128 tiles
    9_mma             mma_simple.cu     tensor cores: mma.sync + ldmatrix, no pipeline
    10_mma_cp_async   mma_cp_async.cu   + a multi-stage cp.async ring
    11_mma_swizzle    mma_swizzle.cu    + the swizzle, ldmatrix.x4 for B
    12_mma_warp_tile  mma_warp_tile.cu  + 64 x 64 warp tiles, double-buffered fragments

and then the full kernel of lesson 08, ``kernels/matmul/mma.cu`` (``("matmul", "mma", "bf16")``).
All take the lesson's operands: A ``[M, K]`` row-major, B ``[K, N]`` column-major (``b.t()`` is
contiguous: both operands K-major, as ``torch._scaled_mm`` and ``torch._int_mm`` take them), and
return C ``[M, N]`` row-major in the inputs' dtype. Each is compiled by NVRTC on first use per
dtype and tile configuration (:func:`compile_step` works without a GPU, for the SASS census).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.registry import OPS, one_of, register

HERE = Path(__file__).resolve().parent
MMA_FILES = ("mma_simple.cu", "mma_cp_async.cu", "mma_swizzle.cu", "mma_warp_tile.cu")


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: its source, kernel name, header values, and what it adds to the step before."""

    variant: str
    file: str
    kernel: str
    dtypes: tuple[torch.dtype, ...]
    config: dict  # the header's constants (scalar_t comes from the tensors)
    description: str  # what it adds, one line for tables

    @property
    def source(self) -> Path:
        return HERE / self.file

    @property
    def tensor_cores(self) -> bool:
        return self.file in MMA_FILES

    def block_tile(self, config: dict) -> tuple[int, int, int]:
        """(rows of C per block, columns of C per block, threads per block)."""
        if self.file == "naive.cu":
            return config["BLOCK_Y"], config["BLOCK_X"], config["BLOCK_X"] * config["BLOCK_Y"]
        if self.file == "smem_tiled.cu":
            threads = (config["BM"] // config["TM"]) * (config["BN"] // config["TN"])
            return config["BM"], config["BN"], threads
        warps = config["WARPS_M"] * config["WARPS_N"]
        return config["WARPS_M"] * config["WM"], config["WARPS_N"] * config["WN"], 32 * warps

    def dynamic_shared_bytes(self, config: dict, dtype: torch.dtype) -> int:
        """Bytes of dynamic shared memory the launch passes (0: the kernel's arrays are static)."""
        if self.file != "mma_warp_tile.cu":
            return 0
        rows, cols, _ = self.block_tile(config)
        return config["STAGES"] * (rows + cols) * config["BK"] * dtype.itemsize


FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF_DTYPES = (torch.float16, torch.bfloat16)
MMA_TILES = {"WM": 32, "WN": 32, "WARPS_M": 2, "WARPS_N": 2, "BK": 32}
STEPS = {s.variant: s for s in (
    Step("1_naive", "naive.cu", "matmul_naive", FLOAT_DTYPES, {"BLOCK_X": 32, "BLOCK_Y": 8},
         "one thread per output element, fp32 accumulate; a warp covers 1 x 32 outputs"),
    Step("2_naive_2x16", "naive.cu", "matmul_naive", FLOAT_DTYPES,
         {"BLOCK_X": 16, "BLOCK_Y": 16},
         "a warp covers 2 x 16 outputs: 18 cache lines per load instead of 33"),
    Step("3_naive_4x8", "naive.cu", "matmul_naive", FLOAT_DTYPES,
         {"BLOCK_X": 8, "BLOCK_Y": 32},
         "a warp covers 4 x 8 outputs: 12 cache lines per load"),
    Step("4_smem", "smem_tiled.cu", "matmul_smem_tiled", FLOAT_DTYPES,
         {"BM": 32, "BN": 32, "BK": 8, "TM": 1, "TN": 1},
         "32 x 32 tiles staged in shared memory, K slices of 8, one output per thread"),
    Step("5_smem_bk32", "smem_tiled.cu", "matmul_smem_tiled", FLOAT_DTYPES,
         {"BM": 32, "BN": 32, "BK": 32, "TM": 1, "TN": 1},
         "K slices of 32: a quarter of the barriers and loop trips per output"),
    Step("6_smem_2x2", "smem_tiled.cu", "matmul_smem_tiled", FLOAT_DTYPES,
         {"BM": 64, "BN": 64, "BK": 32, "TM": 2, "TN": 2},
         "2 x 2 outputs per thread (64 x 64 tiles): each shared-memory load feeds 2 FMAs"),
    Step("7_smem_4x4", "smem_tiled.cu", "matmul_smem_tiled", FLOAT_DTYPES,
         {"BM": 64, "BN": 64, "BK": 32, "TM": 4, "TN": 4},
         "4 x 4 outputs per thread: each load feeds 4 FMAs"),
    Step("8_smem_8x8", "smem_tiled.cu", "matmul_smem_tiled", FLOAT_DTYPES,
         {"BM": 128, "BN": 128, "BK": 32, "TM": 8, "TN": 8},
         "8 x 8 outputs per thread (128 x 128 tiles): each load feeds 8 FMAs"),
    Step("9_mma", "mma_simple.cu", "matmul_mma_simple", HALF_DTYPES, dict(MMA_TILES),
         "tensor cores: mma.sync m16n8k16 + ldmatrix, plain loads, no pipeline"),
    Step("10_mma_cp_async", "mma_cp_async.cu", "matmul_mma_cp_async", HALF_DTYPES,
         {**MMA_TILES, "STAGES": 3},
         "a ring of 3 shared-memory slots filled by cp.async while the tensor cores work"),
    Step("11_mma_swizzle", "mma_swizzle.cu", "matmul_mma_swizzle", HALF_DTYPES,
         {**MMA_TILES, "STAGES": 3},
         "swizzled shared memory (no bank conflicts) and ldmatrix.x4 for B"),
    Step("12_mma_warp_tile", "mma_warp_tile.cu", "matmul_mma_warp_tile", HALF_DTYPES,
         {**MMA_TILES, "WM": 64, "WN": 64, "STAGES": 4},
         "64 x 64 warp tiles in 128 x 128 blocks, fragments double-buffered"),
)}


def _step(variant: str) -> Step:
    return one_of("variant", variant, STEPS)


def previous(variant: str) -> Step | None:
    """The step before ``variant`` (None for the first)."""
    order = list(STEPS)
    index = order.index(_step(variant).variant)
    return STEPS[order[index - 1]] if index else None


def _config(step: Step, overrides: dict | None) -> dict:
    config = {**step.config, **(overrides or {})}
    unknown = set(config) - set(step.config)
    if unknown:
        raise ValueError(f"config expected keys among {', '.join(step.config)}, "
                         f"got {', '.join(sorted(unknown))}")
    if step.tensor_cores:
        wm, wn, bk = config["WM"], config["WN"], config["BK"]
        wn_step = 8 if step.file in MMA_FILES[:2] else 16  # ldmatrix.x4 loads B two n8 at a time
        swizzled = step.file in MMA_FILES[2:]  # the swizzle is written for 64-byte rows
        if (wm not in (16, 32, 48, 64) or wn % wn_step or not 0 < wn <= 64
                or (bk != 32 if swizzled else bk % 16 or bk <= 0)):
            raise ValueError(f"config expected WM in 16..64 (multiple of 16), WN in "
                             f"{wn_step}..64 (multiple of {wn_step}), BK "
                             f"{'32' if swizzled else 'a multiple of 16'}, got WM={wm} WN={wn} "
                             f"BK={bk}")
        if config.get("STAGES", 2) < 2:
            raise ValueError(f"config expected STAGES of 2 or more, got {config['STAGES']}")
    if step.block_tile(config)[2] > 1024:
        raise ValueError(f"config expected at most 1024 threads per block, "
                         f"got {step.block_tile(config)[2]}")
    return config


def defines(variant: str, dtype: torch.dtype = torch.bfloat16,
            config: dict | None = None) -> dict:
    """The generated header's values for ``variant`` in ``dtype`` (what NVRTC compiles)."""
    step = _step(variant)
    if dtype not in step.dtypes:
        raise ValueError(f"dtype expected one of {', '.join(map(str, step.dtypes))} for "
                         f"{variant}, got {dtype}")
    return {"scalar_t": dtype, **_config(step, config)}


def compile_step(variant: str, dtype: torch.dtype = torch.bfloat16, arch=None,
                 config: dict | None = None, **kwargs) -> nvrtc.Compiled:
    """Compile one step for ``dtype`` (no GPU needed; ``arch`` defaults to this GPU/sm_90)."""
    step = _step(variant)
    return nvrtc.compile(step.source, step.kernel, defines=defines(variant, dtype, config),
                         arch=arch, **kwargs)


def what_changed(variant: str, context: int = 3):
    """What ``variant`` changes from the step before it, as a :class:`course_utils.diffs.Diff`:
    the generated headers where both use the same file (a new configuration), else the files."""
    from course_utils import diffs

    step, before = _step(variant), previous(variant)
    if before is None:
        raise ValueError(f"variant expected a step after the first, got {variant!r}")
    if before.file == step.file:
        return diffs.diff(nvrtc.generate_header(defines(before.variant)),
                          nvrtc.generate_header(defines(variant)),
                          names=(f"{before.variant} (header)", f"{variant} (header)"),
                          context=context)
    return diffs.diff_files(before.source, step.source, context=context)


def layout_reason(variant: str, a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why ``variant`` cannot take these operands' layout (None: it can).

    The registry calls this through ``check=``, after the op has validated shapes and dtypes."""
    if not a.is_contiguous():
        return f"needs a row-major (contiguous) a; got strides {a.stride()} (call a.contiguous())"
    if not b.t().is_contiguous():
        return (f"needs a column-major b (b.t() contiguous, K-major as torch._int_mm takes it); "
                f"got strides {b.stride()} (pass b.t().contiguous().t())")
    if max(a.shape[0], a.shape[1], b.shape[1]) >= 2**31:
        return f"sizes must be below 2^31 (int indices); got {a.shape[0]}x{b.shape[1]}x{a.shape[1]}"
    if _step(variant).tensor_cores:
        k = a.shape[1]
        if k % 8:
            return f"needs K a multiple of 8 (16-byte rows for the vector loads), got K={k}"
        if a.data_ptr() % 16 or b.data_ptr() % 16:
            return "needs 16-byte aligned a and b (a sliced view may not be)"
    return None


def matmul_step(variant: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
                config: dict | None = None) -> torch.Tensor:
    """C = A @ B with one step's kernel; ``out`` (``[M, N]``, contiguous) may be given."""
    step = _step(variant)
    OPS["matmul"].validate(a, b)  # shapes, dtypes, devices: ValueError naming the operand
    if not a.is_cuda:
        raise ValueError(f"matmul/steps[{variant}]: a expected a CUDA tensor, got one on "
                         f"{a.device}")
    if reason := layout_reason(variant, a, b):
        raise ValueError(f"matmul/steps[{variant}]: {reason}")
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = torch.empty(m, n, dtype=a.dtype, device=a.device)
    elif (out.shape != (m, n) or out.dtype != a.dtype or out.device != a.device
          or not out.is_contiguous()):
        raise ValueError(f"out expected a contiguous [{m}, {n}] {a.dtype} tensor on "
                         f"{a.device}, got {tuple(out.shape)} {out.dtype} on {out.device}"
                         f"{'' if out.is_contiguous() else ' (not contiguous)'}")
    if m == 0 or n == 0:
        return out
    cfg = _config(step, config)
    device = a.device.index if a.device.index is not None else torch.cuda.current_device()
    kernel = nvrtc.load(compile_step(variant, a.dtype, arch=None, config=config), device)
    rows, cols, threads = step.block_tile(cfg)
    grid = (-(-n // cols), -(-m // rows))
    block = (cfg["BLOCK_X"], cfg["BLOCK_Y"]) if step.file == "naive.cu" else threads
    kernel(a, b, out, m, n, k, grid=grid, block=block,
           shared_mem=step.dynamic_shared_bytes(cfg, a.dtype))
    return out


def _register(step: Step):
    def run(a, b, out=None):
        return matmul_step(step.variant, a, b, out=out)

    run.__doc__ = f"{step.source.name}: {step.description}"
    register("matmul", "steps", step.variant, build=lambda: run, dtypes=step.dtypes,
             devices=("cuda",), needs=("cuda", "nvrtc"),
             min_capability=(8, 0) if step.tensor_cores else None,
             check=lambda a, b: layout_reason(step.variant, a, b),
             meta={"source": f"kernels/matmul/steps/{step.file}", "accumulator": "float32",
                   "layout": "A row-major, B column-major", "tensor_cores": step.tensor_cores,
                   **step.config},
             description=step.description)


for _s in STEPS.values():
    _register(_s)
