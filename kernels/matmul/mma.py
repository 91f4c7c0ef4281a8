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
(:func:`kernels.matmul.tuned.best_config`), and the loaded kernel of each (variant, config,
GPU) is held here (:func:`loaded`), so no call compiles, hashes or stats anything. Edit
``mma.cu`` in a running process and call :func:`forget_loaded` to pick the edit up.

INT4 has no torch dtype: the int4 variant takes ``int8`` tensors whose values lie in [-8, 7] and
packs two per byte before the launch (:func:`pack_int4`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

from course_utils import nvrtc
from kernels.matmul import tuned
from kernels.matmul.mma_types import (  # noqa: F401 (mma.Variant, mma.Config: the lessons' names)
    DEFAULT_CONFIG,
    F8_E4M3,
    F8_E5M2,
    VARIANTS,
    Config,
    Variant,
    ptx,
    variant,
)

SOURCE = Path(__file__).with_name("mma.cu")
KERNEL = "mma_matmul"

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


def _matmul(v: Variant, a: torch.Tensor, b: torch.Tensor, config: Config | None = None
            ) -> torch.Tensor:
    """:func:`matmul` on a problem already checked (the registry's ``supports()`` did)."""
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty(m, n, dtype=v.out, device=a.device)
    if k == 0:
        return out.zero_()
    launch(v, *prepare(v, a, b), out, config or tuned.best_config(v.name, (m, n, k)))
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


