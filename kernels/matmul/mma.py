"""The tensor-core matmul of lesson 08: ``mma.cu``, one source, every ``mma.sync`` variant (the
climb to it is lesson 07).

A *variant* is a choice of types (A, B, accumulator, output) and with it one PTX instruction;
a *config* is a choice of tile shapes and pipeline depth. Both become the generated header
(``defines``), so each (variant, config, GPU) is its own NVRTC program: compiled in 1-2.5 s
on the H100 box (the fully unrolled tile loops are most of it), cached in memory and under
``var/nvrtc_cache/``.

Operands are taken as torch's low-precision matmuls take them (``torch._scaled_mm``,
``torch._int_mm``): A ``[M, K]`` row-major, B ``[K, N]`` column-major (``b.t()`` contiguous).
Each variant is registered as ``("matmul", "mma", <variant>)``; its ``supports()`` explains what
it cannot run (layout, dtype, K not a multiple of the instruction's K-step, the GPU).

A call costs the host only what depends on the call (lesson 11 measures each layer): the
registry checks the problem once (``supports()``), the tuned configuration comes from memory
(:func:`kernels.matmul.autotune.best_config`), and the loaded kernel of each (variant, config,
GPU) is held here (:func:`loaded`), so no call compiles, hashes or stats anything. Edit
``mma.cu`` in a running process and call :func:`forget_loaded` to pick the edit up.

INT4 has no torch dtype: the int4 variant takes ``int8`` tensors whose values lie in [-8, 7] and
packs two per byte before the launch (:func:`pack_int4`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.registry import one_of

SOURCE = Path(__file__).with_name("mma.cu")
KERNEL = "mma_matmul"

F8_E4M3 = getattr(torch, "float8_e4m3fn", None)
F8_E5M2 = getattr(torch, "float8_e5m2", None)


@dataclass(frozen=True)
class Variant:
    """One ``mma.sync`` instruction and the types around it."""

    name: str
    a: torch.dtype  # storage dtype of A (int4: int8 holding -8..7, packed before the launch)
    b: torch.dtype
    acc: str  # accumulator: "f32", "f16" or "s32"
    out: torch.dtype
    instruction: str  # the PTX instruction the kernel issues
    min_sm: tuple[int, int]  # first GPU generation with this instruction
    min_nvrtc: tuple[int, int] = (11, 0)  # first CUDA (NVRTC) whose PTX ISA has it
    int4: bool = False

    @property
    def bits(self) -> int:
        """Bits per operand element."""
        return 4 if self.int4 else self.a.itemsize * 8  # (a property: no tensor per call)

    @property
    def k_step(self) -> int:
        """K per instruction: every variant reads 32 bytes of K per mma."""
        return 256 // self.bits

    @property
    def flop_per_mma(self) -> int:
        return 2 * 16 * 8 * self.k_step

    @property
    def integer(self) -> bool:
        return self.acc == "s32"

    @property
    def defines(self) -> dict[str, object]:
        acc = {"f32": "float", "f16": "__half", "s32": "int"}[self.acc]
        return {"a_t": self.a, "b_t": self.b, "acc_t": acc, "out_t": self.out,
                "INT4": self.int4}

    @property
    def unit(self) -> str:
        return "TOP/s" if self.integer else "TFLOP/s"


def ptx(shape: str, acc: str, a: str, b: str) -> str:
    """The PTX spelling: mma.sync.aligned.<shape>.row.col.<d type>.<a type>.<b type>.<c type>."""
    return f"mma.sync.aligned.{shape}.row.col.{acc}.{a}.{b}.{acc}"


def _variants() -> dict[str, Variant]:
    bf16, f16, f32, i8, i32 = torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int32
    sm80 = (8, 0)
    found = [
        Variant("bf16", bf16, bf16, "f32", bf16, ptx("m16n8k16", "f32", "bf16", "bf16"), sm80),
        Variant("fp16", f16, f16, "f32", f16, ptx("m16n8k16", "f32", "f16", "f16"), sm80),
        Variant("fp16_f16acc", f16, f16, "f16", f16, ptx("m16n8k16", "f16", "f16", "f16"), sm80),
        Variant("tf32", f32, f32, "f32", f32, ptx("m16n8k8", "f32", "tf32", "tf32"), sm80),
        Variant("int8", i8, i8, "s32", i32, ptx("m16n8k32", "s32", "s8", "s8"), sm80),
        Variant("int4", i8, i8, "s32", i32, ptx("m16n8k64", "s32", "s4", "s4"), sm80, int4=True),
    ]
    if F8_E4M3 is not None and F8_E5M2 is not None:
        fp8 = {"e4m3": F8_E4M3, "e5m2": F8_E5M2}
        for an, at in fp8.items():
            for bn, bt in fp8.items():
                found.append(Variant(f"fp8_{an}_{bn}", at, bt, "f32", bf16,
                                     ptx("m16n8k32", "f32", an, bn), (8, 9), (12, 4)))
                # fp8 with fp16 accumulation arrived in PTX ISA 8.7 (CUDA 12.8)
                found.append(Variant(f"fp8_{an}_{bn}_f16acc", at, bt, "f16", f16,
                                     ptx("m16n8k32", "f16", an, bn), (8, 9), (12, 8)))
    return {v.name: v for v in found}


VARIANTS: dict[str, Variant] = _variants()


def variant(name: str | Variant) -> Variant:
    return name if isinstance(name, Variant) else one_of("variant", name, VARIANTS)


@dataclass(frozen=True)
class Config:
    """Tile shapes and pipeline depth: the header values the autotuner searches over."""

    bm: int = 128  # thread-block tile of C
    bn: int = 128
    wm: int = 64  # warp tile of C
    wn: int = 64
    bk_bytes: int = 64  # K slice per stage, bytes
    stages: int = 4
    group_m: int = 8

    def __post_init__(self) -> None:
        for name in ("bm", "bn", "wm", "wn", "stages", "group_m"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"Config.{name} expected a positive int, "
                                 f"got {getattr(self, name)!r}")
        if self.bm % self.wm or self.bn % self.wn or self.wm % 16 or self.wn % 16:
            raise ValueError(f"Config expected bm, bn multiples of wm, wn and wm, wn multiples "
                             f"of 16, got {self}")
        if self.bk_bytes not in (64, 128):
            raise ValueError(f"Config.bk_bytes expected 64 or 128, got {self.bk_bytes}")
        if self.stages < 2:
            raise ValueError(f"Config.stages expected at least 2, got {self.stages}")
        chunks = self.bk_bytes // 16
        if self.bm * chunks % self.threads or self.bn * chunks % self.threads:
            raise ValueError(f"Config {self}: each thread must copy the same number of 16-byte "
                             f"chunks per stage (bm*bk_bytes/16 and bn*bk_bytes/16 divisible by "
                             f"{self.threads} threads)")

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def shared_bytes(self) -> int:
        return self.stages * (self.bm + self.bn) * self.bk_bytes

    @property
    def defines(self) -> dict[str, object]:
        return {"BM": self.bm, "BN": self.bn, "WM": self.wm, "WN": self.wn,
                "BK_BYTES": self.bk_bytes, "STAGES": self.stages, "GROUP_M": self.group_m}

    def short(self) -> str:
        return (f"{self.bm}x{self.bn} warps {self.wm}x{self.wn} k{self.bk_bytes}B "
                f"s{self.stages}")


# Used until the autotuner has measured this GPU (kernels/matmul/autotune.py): 8 warps of 64x64;
# 3 stages beat 4 at 8192^3 in both same-run comparisons on the H100
# (docs/results/mma-tuning-notes.md)
DEFAULT_CONFIG = Config(bm=128, bn=256, wm=64, wn=64, bk_bytes=64, stages=3)


def swizzle(row: int, chunk: int, chunks_per_row: int) -> int:
    """The physical 16-byte chunk of logical ``(row, chunk)``: mma.cu's ``swizzled()``.

    A tile row holds one K slice (``chunks_per_row`` chunks of 16 bytes). 8 chunks span the 32
    banks, so ``8 // chunks_per_row`` consecutive rows share one 128-byte bank row. ldmatrix
    reads one chunk column of 8 consecutive rows per phase: unswizzled, those land in only
    ``chunks_per_row`` bank groups (conflicts). XOR-ing the chunk with the bank-row index
    ``(row // (8 // C)) % C`` sends the 8 rows to 8 different groups, and as a bijection within
    each row it moves data without leaving holes. Writers (cp.async) and readers (ldmatrix)
    apply the same function."""
    if chunks_per_row not in (1, 2, 4, 8):
        raise ValueError(f"chunks_per_row expected 1, 2, 4 or 8, got {chunks_per_row}")
    if row < 0 or not 0 <= chunk < chunks_per_row:
        raise ValueError(f"(row, chunk) expected row >= 0 and 0 <= chunk < {chunks_per_row}, "
                         f"got ({row}, {chunk})")
    return chunk ^ ((row // (8 // chunks_per_row)) % chunks_per_row)


def defines(v: str | Variant, config: Config = DEFAULT_CONFIG,
            vary_operands: bool = True) -> dict[str, object]:
    """The Python values mma.cu's header is generated from (``vary_operands``: the ceiling
    kernel's loop, see kernels/matmul/ceiling.py)."""
    return {**variant(v).defines, **config.defines, "VARY_OPERANDS": vary_operands}


def compile_mma(v: str | Variant, config: Config = DEFAULT_CONFIG, arch=None, *,
                name: str = KERNEL, vary_operands: bool = True, **kwargs) -> nvrtc.Compiled:
    """Compile mma.cu for a variant and config (no GPU needed; ``arch`` as in nvrtc.compile)."""
    return nvrtc.compile(SOURCE, name, defines=defines(v, config, vary_operands), arch=arch,
                         **kwargs)


def compile_many(jobs, arch=None, *, name: str = KERNEL, vary_operands: bool = True,
                 workers: int | None = None) -> list[nvrtc.Compiled]:
    """:func:`compile_mma` for each ``(variant, config)`` of ``jobs``, in parallel threads; a job
    ``(variant, config, arch)`` names its own architecture instead of ``arch``.

    NVRTC is thread-safe and ``ctypes`` lets go of the GIL during the compile, so on a 16-core
    GPU box fourteen variants compile in about the time of the slowest one instead of the sum
    (cached ones cost nothing either way). Results in the order of ``jobs``."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(variant(job[0]), job[1], job[2] if len(job) > 2 else arch) for job in jobs]
    workers = workers or min(len(jobs), os.cpu_count() or 1) or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: compile_mma(*job, name=name,
                                                     vary_operands=vary_operands,
                                                     verbose=False), jobs))


# -- what a GPU and a problem allow -----------------------------------------------------------


def gpu_reason(v: str | Variant, capability: tuple[int, int] | None) -> str | None:
    """Why this variant cannot run on a GPU of ``capability`` (None: it can)."""
    return _gpu_reason(variant(v).name, capability)


@functools.cache  # the answer depends on the GPU and this NVRTC only: work it out once
def _gpu_reason(name: str, capability: tuple[int, int] | None) -> str | None:
    v = VARIANTS[name]
    if capability is not None and capability < v.min_sm:
        major, minor = v.min_sm
        return (f"{v.name} mma.sync needs sm_{major}{minor}+; this GPU is "
                f"sm_{capability[0]}{capability[1]}")
    if nvrtc.unavailable_reason() is None and nvrtc.version() < v.min_nvrtc:
        need = ".".join(map(str, v.min_nvrtc))
        have = ".".join(map(str, nvrtc.version()))
        return f"{v.name} needs the PTX ISA of CUDA {need}+; this NVRTC is {have}"
    return None


def capability(t: torch.Tensor) -> tuple[int, int] | None:
    """The compute capability of the GPU ``t`` is on (read once per GPU), None on the CPU."""
    return nvrtc.device_capability(t.get_device()) if t.is_cuda else None


def problem_reason(v: str | Variant, a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why this variant cannot compute ``a @ b`` (None: it can). Shapes already line up."""
    v = variant(v)
    for arg, t, want in (("a", a, v.a), ("b", b, v.b)):
        if t.dtype != want:
            return f"{v.name} takes {arg} of {str(want)[6:]}, got {str(t.dtype)[6:]}"
    m, k = a.shape
    n = b.shape[1]
    if k > 1 and (a.stride(1) != 1 or (m > 1 and a.stride(0) != k)):
        return f"a must be row-major [M, K] (a.is_contiguous()); got strides {a.stride()}"
    if k > 1 and (b.stride(0) != 1 or (n > 1 and b.stride(1) != k)):
        return (f"b must be column-major [K, N] (b.t().is_contiguous(), as torch._scaled_mm "
                f"takes it); got strides {b.stride()}")
    if k % v.k_step:
        return f"K must be a multiple of {v.k_step} ({v.name}'s K-step); got K={k}"
    for arg, t in (("a", a), ("b", b)):
        if t.data_ptr() % 16:
            return f"{arg} must start on a 16-byte boundary (cp.async copies 16 bytes); it does not"
    if v.int4:
        for arg, t in (("a", a), ("b", b)):
            if t.numel() and (t.min() < -8 or t.max() > 7):
                return f"int4 takes values in [-8, 7]; {arg} has values outside"
    if max(m, n, k) >= 2**31:
        return f"sizes must be below 2^31, got M={m}, N={n}, K={k}"
    if not a.is_cuda or not b.is_cuda:
        return f"needs CUDA tensors, got a on {a.device.type}, b on {b.device.type}"
    return None


# -- running ----------------------------------------------------------------------------------


def pack_int4(x: torch.Tensor) -> torch.Tensor:
    """[R, K] int8 in [-8, 7] -> [R, K/2] int8, two values per byte, the first in the low nibble
    (PTX packs .s4 elements from the least significant bits)."""
    low, high = x[:, 0::2], x[:, 1::2]
    return ((low & 0xF) | (high << 4)).to(torch.int8)


_loaded: dict[tuple[str, Config, int], nvrtc.Kernel] = {}


def loaded(v: str | Variant, config: Config, device: int) -> nvrtc.Kernel:
    """The kernel of (variant, config) loaded on GPU ``device``: compiled (or found in the
    NVRTC cache) and loaded on first use, then one dictionary lookup per call."""
    key = (v if isinstance(v, str) else v.name, config, device)
    kernel = _loaded.get(key)
    if kernel is None:
        kernel = _loaded[key] = nvrtc.load(compile_mma(v, config), device)
    return kernel


def forget_loaded() -> None:
    """Drop the loaded kernels: the next call compiles (or finds in the cache) ``mma.cu`` again,
    picking up an edit made since."""
    _loaded.clear()


def launch(v: str | Variant, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
           config: Config = DEFAULT_CONFIG) -> None:
    """Launch the kernel on already-checked operands (``a`` [M, K'], ``bt`` = ``b.t()`` [N, K'],
    K' the stored K: K / 2 for packed int4). The benchmark calls this directly."""
    v = variant(v)
    m, n = out.shape
    if m == 0 or n == 0:
        return
    k = a.shape[1] * (2 if v.int4 else 1)
    kernel = loaded(v, config, a.get_device())
    blocks = -(-m // config.bm) * -(-n // config.bn)
    kernel(a, b, out, m, n, k, grid=blocks, block=config.threads, shared_mem=config.shared_bytes)


def prepare(v: str | Variant, a: torch.Tensor, b: torch.Tensor):
    """(a, bt) as the kernel reads them: bt = b.t() is [N, K] row-major; int4 packed."""
    v = variant(v)
    bt = b.t()
    if v.int4:
        return pack_int4(a), pack_int4(bt)
    return a, bt


def matmul(a: torch.Tensor, b: torch.Tensor, v: str | Variant = "bf16",
           config: Config | None = None) -> torch.Tensor:
    """``a @ b`` with the given variant; raises ValueError with the reason if it cannot."""
    v = variant(v)
    if reason := problem_reason(v, a, b) or gpu_reason(v, capability(a)):
        raise ValueError(f"mma[{v.name}]: {reason}")
    return _matmul(v, a, b, config)


_best_config = None  # kernels.matmul.autotune.best_config, bound on first use


def _matmul(v: Variant, a: torch.Tensor, b: torch.Tensor, config: Config | None = None
            ) -> torch.Tensor:
    """:func:`matmul` on a problem already checked (the registry's ``supports()`` did)."""
    global _best_config
    if _best_config is None:
        from kernels.matmul.autotune import best_config as _best_config  # imports this module
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty(m, n, dtype=v.out, device=a.device)
    if k == 0:
        return out.zero_()
    launch(v, *prepare(v, a, b), out, config or _best_config(v.name, (m, n, k)))
    return out


def arch_capability(arch: str) -> tuple[int, int]:
    """The compute capability an NVRTC target names: ``"sm_89"`` -> (8, 9), ``"sm_90a"`` ->
    (9, 0)."""
    digits = arch.removeprefix("sm_").rstrip("af")
    return int(digits[:-1]), int(digits[-1])


def native_sass(v: str | Variant, arch: str) -> str | None:
    """The tensor-core SASS opcode this variant compiles to on ``arch``, per the census that
    tests/test_mma.py checks: None where the instruction is emulated (converted to another)."""
    v = variant(v)
    major, minor = arch_capability(arch)
    if (major, minor) < v.min_sm:
        return None
    if v.acc == "s32":
        if v.int4 and major >= 9:
            return None  # Hopper and later emulate int4 with int8 IMMA
        return "IMMA"
    if v.a in (F8_E4M3, F8_E5M2):
        return "QMMA" if (major, minor) in ((8, 9), (12, 0)) else None
    return "HMMA"


def register_variants() -> list:
    """Register every variant as ("matmul", "mma", name); returns the registry's kernels."""
    from kernels.registry import register

    kernels = []
    for v in VARIANTS.values():
        # the registry calls supports() (with check() below) before the kernel, so the kernel
        # itself does not check again
        def run(a, b, _v=v):
            return _matmul(_v, a, b)

        def check(a, b, _v=v):
            return problem_reason(_v, a, b) or gpu_reason(_v, capability(a))

        kernels.append(register(
            "matmul", "mma", v.name, build=lambda _run=run: _run, dtypes=tuple({v.a, v.b}),
            devices=("cuda",), min_capability=v.min_sm, needs=("cuda", "nvrtc"), check=check,
            meta={"a": v.a, "b": v.b, "accumulator": v.acc, "out": v.out,
                  "instruction": v.instruction, "k_step": v.k_step, "int4": v.int4,
                  "source": "kernels/matmul/mma.cu",
                  "tolerance": tolerance(v)},
            description=f"mma.sync {v.name}: {v.instruction}"))
    return kernels


def tolerance(v: str | Variant) -> dict[torch.dtype, tuple[float, float]]:
    """(atol, rtol) against a float64 reference, for inputs scaled as the op's test cases."""
    v = variant(v)
    if v.integer:
        return {torch.int8: (0.0, 0.0)}
    if v.a == torch.float32:  # tf32: 10-bit mantissa, inputs truncated
        return {torch.float32: (2e-2, 2e-2)}
    if v.acc == "f16":
        return {v.a: (3e-2, 3e-2)}
    return {v.a: (2e-2, 2e-2)}


