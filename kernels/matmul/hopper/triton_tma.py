"""The Hopper matmul's second peer (lesson 17's staircase): a Hopper matmul in Triton, written the
way Triton's own tutorial (``09-persistent-matmul``) writes it, so that beside cuBLAS and the
hand-written ``wgmma`` kernels a student sees what a compiler makes of the same tile ideas.

The three Hopper ideas, and why each one is here:

* **TMA tensor descriptors.** On Hopper one thread can ask the Tensor Memory Accelerator to copy
  a whole 2-D box of a matrix from global into shared memory, instead of every thread computing
  addresses and issuing its own loads (lesson 07's ``cp.async``). The box is described once, on
  the host, by a descriptor (base address, shape, strides, box shape): here
  ``triton.tools.tensor_descriptor.TensorDescriptor``, passed to the kernel as an argument, and
  ``desc.load([row, col])`` inside it. Reads outside the matrix come back as zeros, so the edge
  tiles of any M and N need no masks; the price is TMA's rules: the base address and every
  stride but the last 16-byte aligned, the last stride 1. Triton then builds the rest of the
  Hopper pipeline itself: a ring of ``num_stages`` shared-memory buffers guarded by mbarriers,
  and ``tl.dot`` lowered to asynchronous ``wgmma`` reading both operands from shared memory.
* **A persistent grid.** One program per SM (132 on an H100 SXM), each walking output tiles
  ``start, start + NUM_SMS, ...``, instead of one program per tile. No block is launched or
  retired per tile, no wave of tiles ends with idle SMs waiting for the last ones, and (with
  ``flatten=True``) Triton's software pipeliner can start loading the next tile's operands while
  the current tile's epilogue is still storing.
* **A grouped tile order.** Tiles are numbered in groups of ``GROUP_M`` tile rows, column by
  column inside a group, so the 132 tiles in flight at any moment share a few rows of ``a`` and
  a few columns of ``b``: those stay in the 50 MB L2 and each byte read from HBM is used by
  several SMs. In plain row order the tiles in flight would cover one row of ``a`` and every
  column of ``b``, which does not fit in L2 at 8192³.

Operands are taken as lesson 07's and lesson 16's kernels (and ``torch._scaled_mm``) take them:
``a`` is ``[M, K]`` row-major and ``b`` is ``[K, N]`` column-major, i.e. ``b.t()`` is a
row-major ``[N, K]``: both K-major, which is what ``wgmma`` wants for fp8 and what TMA copies
best. bf16 and fp16 accumulate in fp32 and return their own dtype; fp8 e4m3 accumulates in
fp32 and returns bf16, as ``torch._scaled_mm(a, b, 1, 1, out_dtype=torch.bfloat16)`` does.

The kernel itself, the device code, is :mod:`kernels.matmul.hopper.triton_tma_kernel`; this
module is its host side. :func:`matmul` is the implementation; :func:`register` makes it the
registry's provider ``("matmul", "triton-tma", <variant>)``; the Hopper matmul's benchmark
(``bench.py``, lesson 17) measures it beside the wgmma steps and cuBLAS.
The registered kernels need a Hopper GPU (other GPUs have no ``wgmma``, older ones no TMA). On a
CPU, Triton's interpreter (``TRITON_INTERPRET=1``) runs the same kernel through :func:`matmul`
on fp16 and fp8 CPU tensors, slowly and with none of the hardware (a descriptor load becomes an
array slice), which is enough to check the tile order and the edges; bf16 it computes wrongly
(a known trap of the interpreter), so :func:`matmul` refuses bf16 there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch
import triton

from course_utils import env
from kernels.matmul.hopper.triton_tma_kernel import tma_persistent_matmul_kernel
from kernels.matmul.problem import validate_args

PROVIDER = "triton-tma"
SOURCE = "kernels/matmul/hopper/triton_tma_kernel.py"  # the kernel itself


@dataclass(frozen=True)
class Config:
    """One tile configuration: what ``triton.Config`` holds in Triton's tutorial."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8  # tile rows per group of the tile order
    num_stages: int = 3  # shared-memory buffers in the TMA ring (Triton's software pipeline)
    num_warps: int = 8  # 2 warpgroups: each wgmma is issued by a warpgroup of 4 warps
    # store the 128x256 result as two 128x128 halves: the staging buffer of the TMA store then
    # takes half the shared memory, which the operand ring can use instead
    epilogue_subtile: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 16 or value & (value - 1) or value > 256:
                # TMA boxes are at most 256 elements a side; tl.arange wants powers of two
                raise ValueError(f"Config: {name} expected a power of two in [16, 256], "
                                 f"got {value!r}")
        for name in ("group_m", "num_stages", "num_warps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"Config: {name} expected a positive int, "
                                 f"got {getattr(self, name)!r}")
        if self.num_warps % 4:
            raise ValueError(f"Config: num_warps expected a multiple of 4 (wgmma is issued by "
                             f"warpgroups of 4 warps), got {self.num_warps}")

    def shared_bytes(self, in_bytes: int, out_bytes: int) -> int:
        """Shared memory the tiles need: the operand ring plus the staging of the TMA store."""
        ring = self.num_stages * (self.block_m + self.block_n) * self.block_k * in_bytes
        store = self.block_m * self.block_n * out_bytes // (2 if self.epilogue_subtile else 1)
        return ring + store

    @property
    def short(self) -> str:
        sub = ", subtiled epilogue" if self.epilogue_subtile else ""
        return (f"{self.block_m}x{self.block_n}x{self.block_k}, {self.num_stages} stages, "
                f"{self.num_warps} warps, GROUP_M={self.group_m}{sub}")


@dataclass(frozen=True)
class Variant:
    """One dtype of the provider: its operand and output dtypes and its fixed H100 tile."""

    name: str
    dtype: torch.dtype  # both operands
    out: torch.dtype
    config: Config
    k_multiple: int  # K must be a multiple of this (see problem_reason)

    @property
    def label(self) -> str:
        return str(self.dtype).removeprefix("torch.")


# The tutorial's fixed Hopper configurations: 128x256 output tiles (a 128x256 fp32 accumulator
# is 128 registers a thread over 8 warps), 64 K-columns of 16-bit operands per stage (128 bytes,
# one 128-byte swizzle row) and 128 of fp8. Three stages of 48 KB take 144 KB of the H100's
# 227 KB of shared memory a block; the staging of the TMA store takes 64 KB more for the whole
# tile (bf16, fp16) or 32 KB for a half (fp8). Measured on an H100 (Triton 3.6): the whole-tile
# store was as fast or faster for fp16 and bf16 (up to 1.12x), the two were even for fp8.
VARIANTS: dict[str, Variant] = {
    "bf16": Variant("bf16", torch.bfloat16, torch.bfloat16, Config(128, 256, 64), 16),
    "fp16": Variant("fp16", torch.float16, torch.float16, Config(128, 256, 64), 16),
    "fp8_e4m3": Variant("fp8_e4m3", torch.float8_e4m3fn, torch.bfloat16,
                        Config(128, 256, 128, epilogue_subtile=True), 32),
}
SHARED_LIMIT = 227 * 1024  # bytes of shared memory a block may use on sm_90


def variant(name: str | torch.dtype | Variant) -> Variant:
    """The variant of a name ("bf16", "fp16", "fp8_e4m3") or of an operand dtype."""
    if isinstance(name, Variant):
        return name
    for v in VARIANTS.values():
        if name in (v.name, v.dtype):
            return v
    wanted = ", ".join(f"{v.name!r} ({v.label})" for v in VARIANTS.values())
    raise ValueError(f"triton-tma: variant expected one of {wanted}, got {name!r}")


# -- what a GPU and a problem allow ------------------------------------------------------------


def gpu_reason(capability: tuple[int, int] | None) -> str | None:
    """Why a GPU of this compute capability cannot run the kernel (None: it can)."""
    if capability is None:
        return "needs a Hopper GPU (sm_90): TMA descriptors and wgmma; no CUDA GPU here"
    major, minor = capability
    if major < 9:
        return (f"TMA descriptors need sm_90 (Hopper); this GPU is sm_{major}{minor} "
                "(lesson 07's mma.sync kernels run there)")
    if major > 9:
        return (f"the tiles are sized for Hopper (sm_90: 227 KB of shared memory a block, "
                f"wgmma); this GPU is sm_{major}{minor}, where they are untested")
    return None


def problem_reason(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why the kernel cannot compute ``a @ b`` (None: it can), apart from the GPU. The shapes
    are assumed to line up (the matmul op validates them)."""
    if a.dtype != b.dtype or a.dtype not in {v.dtype for v in VARIANTS.values()}:
        have = ", ".join(v.label for v in VARIANTS.values())
        return (f"takes a and b of one of {have}; got a of {str(a.dtype)[6:]}, "
                f"b of {str(b.dtype)[6:]}")
    v = variant(a.dtype)
    m, k = a.shape
    n = b.shape[1]
    size = a.element_size()
    if k % v.k_multiple:
        # the K-step of Hopper's wgmma (32 bytes of K): the contract of lesson 16's kernels,
        # kept here so that both peers take the same problems
        return (f"K must be a multiple of {v.k_multiple} for {v.label} (wgmma's K-step, as "
                f"lesson 16's kernels require); got K={k}")
    # an empty problem reads nothing and launches nothing: no layout to check
    empty = m == 0 or n == 0 or k == 0
    if not empty and a.stride(1) != 1:
        return (f"a must be row-major [M, K] (unit stride along K, as TMA copies rows); "
                f"got strides {a.stride()}")
    if not empty and b.stride(0) != 1:
        return (f"b must be column-major [K, N] (b.t().is_contiguous(), as torch._scaled_mm "
                f"takes it); got strides {b.stride()}")
    if not empty and m > 1 and (a.stride(0) * size) % 16:
        return (f"a's row stride must be a multiple of 16 bytes (a TMA rule); got "
                f"{a.stride(0)} elements of {size} bytes")
    if not empty and n > 1 and (b.stride(1) * size) % 16:
        return (f"b's column stride must be a multiple of 16 bytes (a TMA rule); got "
                f"{b.stride(1)} elements of {size} bytes")
    for arg, t in (("a", a), ("b", b)):
        if not empty and t.data_ptr() % 16:
            return f"{arg} must start on a 16-byte boundary (a TMA rule); it does not"
    if max(m, n, k) >= 2**31:
        return f"TMA coordinates are 32-bit: M, N, K must be below 2^31, got {m}, {n}, {k}"
    devices = f"got a on {a.device.type}, b on {b.device.type}"
    if env.TRITON_INTERPRET:
        if a.is_cuda or b.is_cuda:
            return f"Triton's interpreter (TRITON_INTERPRET=1) reads CPU tensors; {devices}"
        if v.name == "bf16":
            return ("Triton's interpreter computes bf16 wrongly (it converts after loading); "
                    "on a CPU use fp16 or fp8 e4m3")
    elif not a.is_cuda or not b.is_cuda:
        return f"needs CUDA tensors on a Hopper GPU (TMA descriptors); {devices}"
    return None


def reason(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Everything the registry's generic checks do not know: the problem, then the GPU."""
    if r := problem_reason(a, b):
        return r
    if not a.is_cuda:
        return None  # the interpreter, which problem_reason has let through
    return gpu_reason(torch.cuda.get_device_capability(a.device))


def _check_out(out: torch.Tensor, m: int, n: int, v: Variant, device: torch.device) -> None:
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"triton-tma: out expected a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != (m, n) or out.dtype != v.out or out.device != device:
        raise ValueError(f"triton-tma: out expected a [{m}, {n}] {str(v.out)[6:]} tensor on "
                         f"{device}, got {tuple(out.shape)} {str(out.dtype)[6:]} on "
                         f"{out.device}")
    if (n > 1 and out.stride(1) != 1) or (out.numel() and out.data_ptr() % 16):
        raise ValueError(f"triton-tma: out expected a row-major tensor starting on a 16-byte "
                         f"boundary, got strides {out.stride()}")


# -- running -----------------------------------------------------------------------------------


@cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _programs(device: torch.device) -> int:
    """Programs of the persistent grid: one per SM (Triton's interpreter, on a CPU: 4)."""
    if device.type != "cuda":
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def _descriptor(t: torch.Tensor, rows: int, cols: int, row_stride: int,
                block: tuple[int, int]):
    """A host-side TMA descriptor of a [rows, cols] matrix with unit column stride. The row
    stride is passed explicitly: torch may give a dimension of size 1 any stride, TMA may not."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor(t, [rows, cols], [row_stride, 1], list(block))


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: Config) -> None:
    """Launch the kernel on operands already checked (:func:`problem_reason`) with M, N, K > 0:
    what :func:`matmul` and the benchmark call."""
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    a_desc = _descriptor(a, m, k, a.stride(0) if m > 1 else k, (bm, bk))
    bt_desc = _descriptor(b.t(), n, k, b.stride(1) if n > 1 else k, (bn, bk))
    # TMA can store out only when its rows are 16-byte aligned; otherwise masked pointer stores
    row_stride = out.stride(0) if m > 1 else n
    tma_store = (row_stride * out.element_size()) % 16 == 0
    store_n = bn // 2 if config.epilogue_subtile else bn
    c_desc = _descriptor(out, m, n, row_stride, (bm, store_n)) if tma_store else None
    sms = _programs(a.device)
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    grid = (min(sms, tiles),)  # persistent: one program per SM, never more than the tiles
    tma_persistent_matmul_kernel[grid](
        a_desc, bt_desc, c_desc, out, m, n, k, row_stride,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=config.group_m, NUM_SMS=sms,
        TMA_STORE=tma_store, EPILOGUE_SUBTILE=config.epilogue_subtile,
        num_stages=config.num_stages, num_warps=config.num_warps)


def matmul(a: torch.Tensor, b: torch.Tensor, *, config: Config | None = None,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` on a Hopper GPU: ``a`` [M, K] row-major, ``b`` [K, N] column-major, both bf16,
    fp16 or fp8 e4m3; fp32 accumulation; the result in the input dtype (bf16 for fp8).

    ``config`` overrides the variant's fixed tile configuration; ``out`` (row-major, the result
    dtype) is written in place, which lets a test poison it first. Raises ``ValueError`` with
    the reason when the kernel cannot run the problem here.
    """
    validate_args(a, b)
    if r := reason(a, b):
        raise ValueError(f"triton-tma: {r}")
    v = variant(a.dtype)
    config = config or v.config
    if not isinstance(config, Config):
        raise ValueError(f"triton-tma: config expected a triton_tma.Config, "
                         f"got {type(config).__name__}")
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = torch.empty((m, n), dtype=v.out, device=a.device)
    else:
        _check_out(out, m, n, v, a.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()  # an empty sum; TMA descriptors need every dimension positive
    launch(a, b, out, config)
    return out


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The float64 product the kernel is checked against."""
    return a.double() @ b.double()


def tolerance(name: str | Variant) -> dict[torch.dtype, tuple[float, float]]:
    """(atol, rtol) against the matmul op's reference (inputs scaled as its test cases), keyed
    by the output dtype, as ``kernels.matmul.mma.tolerance`` gives them."""
    v = variant(name)
    return {v.out: (2e-2, 2e-2)}


# -- the registry ------------------------------------------------------------------------------


def register() -> list:
    """Register one kernel per variant as ``("matmul", "triton-tma", <variant>)``; returns them.

    Nothing is compiled here: Triton compiles on the first call for each shape class. Called
    once (by ``kernels/matmul/hopper/__init__.py``); a second call raises the registry's
    "already registered" ``ValueError``.
    """
    from kernels.registry import register as register_kernel

    registered = []
    for v in VARIANTS.values():
        registered.append(register_kernel(
            "matmul", PROVIDER, v.name, build=lambda: matmul, dtypes=(v.dtype,),
            devices=("cuda",), min_capability=(9, 0), needs=("triton-gpu",),
            check=reason,
            meta={"a": v.dtype, "b": v.dtype, "out": v.out, "accumulator": "f32",
                  "tile": (v.config.block_m, v.config.block_n, v.config.block_k),
                  "stages": v.config.num_stages, "warps": v.config.num_warps,
                  "group_m": v.config.group_m, "persistent": True, "loads": "TMA",
                  "layout": "a row-major [M, K], b column-major [K, N] (both K-major)",
                  "k_multiple": v.k_multiple, "source": SOURCE, "tolerance": tolerance(v)},
            description=f"Triton {v.label}: TMA descriptors, persistent grid, grouped order, "
                        f"{v.config.block_m}x{v.config.block_n}x{v.config.block_k} tiles"))
    return registered


# -- measuring ---------------------------------------------------------------------------------


def operands(name: str | Variant, m: int, n: int, k: int, device: str = "cuda"
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random ``a`` [M, K] row-major and ``b`` [K, N] column-major, scaled so that a sum
    of K products stays O(1) in every dtype (fp8 e4m3 keeps 3 mantissa bits)."""
    v = variant(name)
    scale = max(k, 1) ** 0.25
    a = (torch.randn(m, k, device=device) / scale).to(v.dtype)
    b = (torch.randn(n, k, device=device) / scale).to(v.dtype).t()
    return a, b
