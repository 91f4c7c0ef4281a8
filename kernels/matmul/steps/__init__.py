"""The steps from a naive matmul to the tensor-core kernel of lesson 05, one ``.cu`` file each.

    ("matmul", "steps", "1_naive")       naive.cu       one thread per output, fp32 FMAs
    ("matmul", "steps", "2_smem_tiled")  smem_tiled.cu  shared-memory tiles + register blocking
    ("matmul", "steps", "3_mma_simple")  mma_simple.cu  mma.sync + ldmatrix, no pipeline

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


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: its source, kernel name, default header values and the launch they imply."""

    variant: str
    file: str
    kernel: str
    dtypes: tuple[torch.dtype, ...]
    config: dict  # the header's constants (scalar_t comes from the tensors)
    description: str

    @property
    def source(self) -> Path:
        return HERE / self.file

    def block_tile(self, config: dict) -> tuple[int, int, int]:
        """(rows of C per block, columns of C per block, threads per block)."""
        if self.variant == "1_naive":
            return config["BLOCK_Y"], config["BLOCK_X"], config["BLOCK_X"] * config["BLOCK_Y"]
        if self.variant == "2_smem_tiled":
            threads = (config["BM"] // config["TM"]) * (config["BN"] // config["TN"])
            return config["BM"], config["BN"], threads
        warps = config["WARPS_M"] * config["WARPS_N"]
        return config["WARPS_M"] * config["WM"], config["WARPS_N"] * config["WN"], 32 * warps


FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
STEPS = {
    "1_naive": Step("1_naive", "naive.cu", "matmul_naive", FLOAT_DTYPES,
                    {"BLOCK_X": 32, "BLOCK_Y": 8},
                    "one thread per output element, fp32 accumulate"),
    "2_smem_tiled": Step("2_smem_tiled", "smem_tiled.cu", "matmul_smem_tiled", FLOAT_DTYPES,
                         {"BM": 64, "BN": 64, "BK": 32, "TM": 4, "TN": 4},
                         "shared-memory tiles, 4x4 outputs per thread, fp32 FMAs"),
    "3_mma_simple": Step("3_mma_simple", "mma_simple.cu", "matmul_mma_simple",
                         (torch.float16, torch.bfloat16),
                         {"WM": 32, "WN": 32, "WARPS_M": 2, "WARPS_N": 2, "BK": 32},
                         "mma.sync m16n8k16 + ldmatrix, plain loads, no pipeline"),
}


def _step(variant: str) -> Step:
    return one_of("variant", variant, STEPS)


def _config(step: Step, overrides: dict | None) -> dict:
    config = {**step.config, **(overrides or {})}
    unknown = set(config) - set(step.config)
    if unknown:
        raise ValueError(f"config expected keys among {', '.join(step.config)}, "
                         f"got {', '.join(sorted(unknown))}")
    if step.variant == "3_mma_simple":
        wm, wn, bk = config["WM"], config["WN"], config["BK"]
        if wm not in (16, 32, 48, 64) or wn not in range(8, 65, 8) or bk % 16 or bk <= 0:
            raise ValueError(f"config expected WM in 16..64 (multiple of 16), WN in 8..64 "
                             f"(multiple of 8), BK a multiple of 16, got WM={wm} WN={wn} "
                             f"BK={bk}")
    if step.block_tile(config)[2] > 1024:
        raise ValueError(f"config expected at most 1024 threads per block, "
                         f"got {step.block_tile(config)[2]}")
    return config


def compile_step(variant: str, dtype: torch.dtype = torch.bfloat16, arch=None,
                 config: dict | None = None, **kwargs) -> nvrtc.Compiled:
    """Compile one step for ``dtype`` (no GPU needed; ``arch`` defaults to this GPU/sm_90)."""
    step = _step(variant)
    if dtype not in step.dtypes:
        raise ValueError(f"dtype expected one of {', '.join(map(str, step.dtypes))} for "
                         f"{variant}, got {dtype}")
    defines = {"scalar_t": dtype, **_config(step, config)}
    return nvrtc.compile(step.source, step.kernel, defines=defines, arch=arch, **kwargs)


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
    if variant == "3_mma_simple":
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
    block = (cfg["BLOCK_X"], cfg["BLOCK_Y"]) if variant == "1_naive" else threads
    kernel(a, b, out, m, n, k, grid=grid, block=block)
    return out


def _register(step: Step):
    def run(a, b, out=None):
        return matmul_step(step.variant, a, b, out=out)

    run.__doc__ = f"{step.source.name}: {step.description}"
    register("matmul", "steps", step.variant, build=lambda: run, dtypes=step.dtypes,
             devices=("cuda",), needs=("cuda", "nvrtc"),
             min_capability=(8, 0) if step.variant == "3_mma_simple" else None,
             check=lambda a, b: layout_reason(step.variant, a, b),
             meta={"source": f"kernels/matmul/steps/{step.file}", "accumulator": "float32",
                   "layout": "A row-major, B column-major", "tensor_cores":
                   step.variant == "3_mma_simple", **step.config},
             description=step.description)


for _s in STEPS.values():
    _register(_s)
