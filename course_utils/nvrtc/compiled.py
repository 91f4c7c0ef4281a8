"""What a compile gives back: :class:`Compiled`, the binary and how it came to be.

Its own module so that the compiler that makes one and the caches that keep one both import it,
and neither imports the other's half.
"""

from __future__ import annotations

import dataclasses

import torch

from course_utils.nvrtc.source import DTYPE_CTYPES, Source


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A compiled kernel: the binary (PTX text or CUBIN bytes) and how it came to be."""

    name: str  # what was asked for, e.g. "add_kernel" or "scale<float, 4>"
    lowered_name: str  # the symbol in the binary (mangled for C++ names)
    arch: str
    output: str  # "ptx" or "cubin"
    binary: bytes
    log: str  # NVRTC's warnings (empty when clean)
    key: str
    seconds: float  # how long this call took (compile, or cache lookup)
    cache: str  # "built (why)", "memory hit", "disk hit"
    source: Source = dataclasses.field(repr=False)
    program: str = dataclasses.field(repr=False)  # what NVRTC compiled
    defines: tuple = dataclasses.field(default=(), repr=False)
    options: tuple[str, ...] = ()

    @property
    def ptx(self) -> str:
        if self.output != "ptx":
            raise ValueError(f"{self.name} was compiled to {self.output}; pass output='ptx'")
        return self.binary.decode()

    @property
    def aliases(self) -> dict[str, str]:
        """Type aliases of the generated header (``{"scalar_t": "__nv_bfloat16"}``)."""
        return {n: DTYPE_CTYPES[v][0] if isinstance(v, torch.dtype) else v
                for n, v in self.defines if isinstance(v, torch.dtype | str)}

    def __repr__(self) -> str:
        return (f"<Compiled {self.name} -> {self.lowered_name} for {self.arch} "
                f"({self.output}, {len(self.binary):,} bytes): {self.cache}, "
                f"{self.seconds * 1e3:.1f} ms>")
