"""What ``mma.cu`` is generated for: a :class:`Variant` (the types and the one ``mma.sync``
instruction they take) and a :class:`Config` (tile shapes and pipeline depth).

Apart from :mod:`kernels.matmul.mma` so that the tuner's store (:mod:`kernels.matmul.tuned`),
which the kernel asks on every call, can name them without importing the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.registry import one_of

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
