"""What a kernel compiled to: the SASS (the GPU's machine code) of a CUBIN, counted and summarised.

PTX is a virtual ISA; ``ptxas`` (inside NVRTC when it emits a CUBIN) turns it into SASS for one
architecture, and that is where a PTX instruction turns out to be native or emulated. One
``mma.sync ... bf16`` is one ``HMMA`` on sm_80 and sm_90; an ``mma.sync ... e4m3`` is a ``QMMA``
on sm_89 and sm_120 but, on sm_90, conversions (``F2FP``) followed by ``HMMA``s. No GPU is needed
to see this, only the CUBIN and a disassembler::

    k = nvrtc.compile("kernels/matmul/steps/mma_simple.cu", "mma_simple",
                      defines={...}, arch="sm_90")
    report = sass.report(k)
    report.census["HMMA"]        # instructions by opcode (modifiers dropped)
    report.groups()              # {"tensor core": {...}, "conversion": {...}, ...}
    report.resources             # registers, static shared memory, stack frame, local traffic
    sass.reports([k1, k2, ...])  # many at once: one disassembler process per core

The disassembler is ``nvdisasm`` or ``cuobjdump`` (either one does): from PATH, the CUDA
toolkit (``$CUDA_HOME/bin``), the ``nvidia-cuda-nvdisasm`` / ``nvidia-cuda-cuobjdump`` wheels
(``requirements.txt`` installs them, so a laptop without a toolkit can disassemble), or the copy
Triton ships. Registers and shared memory are read from the CUBIN itself (an ELF file), so they
need no tool at all.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

TOOLS = ("nvdisasm", "cuobjdump")

# Opcode families a matmul lesson looks for, by the question each answers.
GROUPS: dict[str, tuple[str, ...]] = {
    # the tensor-core instructions: H = half/bf16/tf32 inputs, I = integer, Q = fp8 (sm_89+),
    # D = double, B = binary; *GMMA are Hopper's warpgroup (wgmma) forms
    "tensor core": ("HMMA", "IMMA", "QMMA", "OMMA", "DMMA", "BMMA",
                    "HGMMA", "IGMMA", "QGMMA", "BGMMA"),
    # conversions and repacking around an mma: an emulated variant shows up here
    "conversion": ("F2FP", "F2F", "I2F", "F2I", "I2FP", "F2IP", "I2IP", "I2I", "PRMT",
                   "HADD2", "HMUL2", "HFMA2"),
    # moving operands: global -> shared (LDGSTS is cp.async), shared -> registers (LDSM is
    # ldmatrix), plain loads and stores, and Hopper's TMA (UBLKCP / UTMALDG)
    "memory": ("LDG", "STG", "LDGSTS", "LDS", "STS", "LDSM", "STSM", "UTMALDG", "UBLKCP"),
    # waiting: block barriers and the cp.async groups (LDGDEPBAR commits, DEPBAR waits)
    "synchronisation": ("BAR", "LDGDEPBAR", "DEPBAR", "ARRIVES", "SYNCS", "WARPSYNC"),
    # local memory: register spills (and stack arrays); zero in a healthy matmul
    "local memory": ("LDL", "STL"),
    # the scalar pipes, for scale: plain FMAs are what a kernel without tensor cores runs on
    "fp32 math": ("FFMA", "FMUL", "FADD"),
}

# One SASS instruction line, as both tools print it:
#   /*0110*/   @!P0 HMMA.16816.F32.BF16 R8, R8, R8, RZ ;    (nvdisasm, cuobjdump)
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P[T\d]+\s+)?"
                          r"(?P<op>[A-Z][A-Z0-9_]*)(?P<mods>(?:\.[\w]+)*)")


# --------------------------------------------------------------------------------------------
# Finding the tools
# --------------------------------------------------------------------------------------------


def _wheel_dirs() -> list[Path]:
    """``bin/`` folders of the NVIDIA pip wheels: ``nvidia/cu13/bin`` (CUDA 13 wheels) and
    ``nvidia/cuda_nvdisasm/bin``-style folders (CUDA 12 wheels)."""
    folders = []
    for entry in sys.path:
        root = Path(entry or ".") / "nvidia"
        if root.is_dir():
            folders += sorted(root.glob("cu*/bin")) + sorted(root.glob("cuda_*/bin"))
    return folders


def cuda_tool(name: str) -> str | None:
    """The path of a CUDA binary tool (``nvdisasm``, ``cuobjdump``, ...), or None.

    Looks on PATH, in ``$CUDA_HOME/bin`` and ``/usr/local/cuda/bin``, in the NVIDIA pip wheels,
    then in the copy Triton ships (``triton/backends/nvidia/bin``)."""
    if not re.fullmatch(r"[\w.+-]+", name or ""):
        raise ValueError(f"name expected a tool name such as 'nvdisasm', got {name!r}")
    if found := shutil.which(name):
        return found
    candidates = [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin",
                  Path("/usr/local/cuda/bin"), *_wheel_dirs()]
    with contextlib.suppress(ImportError):
        import triton

        candidates.append(Path(triton.__file__).parent / "backends" / "nvidia" / "bin")
    for folder in candidates:
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def disassembler() -> tuple[str, str] | None:
    """``(tool name, path)`` of the disassembler this machine has (nvdisasm first), or None."""
    for name in TOOLS:
        if path := cuda_tool(name):
            return name, path
    return None


def unavailable_reason() -> str | None:
    """None when SASS can be disassembled here; otherwise what to install."""
    if disassembler():
        return None
    return ("no disassembler: neither nvdisasm nor cuobjdump found (install a CUDA toolkit or "
            "`pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump`)")


# --------------------------------------------------------------------------------------------
# Disassembling and counting
# --------------------------------------------------------------------------------------------


def _cubin(compiled) -> bytes:
    """The CUBIN bytes of a :class:`course_utils.nvrtc.Compiled` (or of raw bytes)."""
    binary = getattr(compiled, "binary", compiled)
    output = getattr(compiled, "output", "cubin")
    if output != "cubin" or not isinstance(binary, bytes):
        raise ValueError(f"compiled expected a CUBIN (nvrtc.compile(..., output='cubin')), "
                         f"got {output if output != 'cubin' else type(binary).__name__}")
    if binary[:4] != b"\x7fELF":
        raise ValueError("compiled expected a CUBIN (an ELF file), got bytes that are not ELF")
    return binary


# SASS text by (disassembler, CUBIN digest): the same bytes disassemble to the same text, and a
# check that compares a student's kernel with the course's asks for the course's every time
# (one tool process each, about 0.4 s on a 2-core machine); a few hundred entries at most
_DISASSEMBLED: dict[tuple[str, str], str] = {}


def disassemble(compiled) -> str:
    """The SASS of a compiled kernel as text (one instruction per ``/*addr*/`` line)."""
    binary = _cubin(compiled)
    found = disassembler()
    if found is None:
        raise RuntimeError(unavailable_reason())
    tool, path = found
    key = (path, hashlib.sha256(binary).hexdigest())
    if (text := _DISASSEMBLED.get(key)) is None:
        text = _DISASSEMBLED[key] = _run_disassembler(tool, path, binary)
    return text


def _run_disassembler(tool: str, path: str, binary: bytes) -> str:
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(binary)
        # nvdisasm -c prints only code sections; cuobjdump -sass prints the code of every kernel
        command = [path, "-c", str(cubin)] if tool == "nvdisasm" else [path, "-sass", str(cubin)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{tool} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout


def instructions(sass: str) -> list[tuple[str, str]]:
    """``(opcode, modifiers)`` per instruction of SASS text: ``("HMMA", ".16816.F32.BF16")``."""
    return [(m.group("op"), m.group("mods")) for m in _INSTRUCTION.finditer(sass)]


def census(sass: str) -> collections.Counter:
    """Instructions counted by opcode, modifiers dropped (``HMMA.16816.F32.BF16`` -> ``HMMA``).

    A *static* count: an instruction inside a loop counts once, however often it runs."""
    return collections.Counter(op for op, _ in instructions(sass))


def variants(sass: str, opcode: str) -> collections.Counter:
    """The full spellings of one opcode: ``{"HMMA.16816.F32.BF16": 32}`` says shape and types."""
    return collections.Counter(op + mods for op, mods in instructions(sass) if op == opcode)


def local_traffic(sass: str) -> tuple[int, int]:
    """(bytes stored, bytes loaded) by the STL/LDL instructions: per thread, counted
    statically as ptxas counts "bytes spill stores/loads". Nonzero means registers ran out
    (or the kernel keeps an array in local memory)."""
    stored = loaded = 0
    for op, mods in instructions(sass):
        if op not in ("STL", "LDL"):
            continue
        width = re.search(r"\.(?:U|S)?(8|16|32|64|128)\b", mods)  # no suffix: 32 bits
        nbytes = int(width.group(1)) // 8 if width else 4
        if op == "STL":
            stored += nbytes
        else:
            loaded += nbytes
    return stored, loaded


# --------------------------------------------------------------------------------------------
# Resources, read from the CUBIN's ELF sections
# --------------------------------------------------------------------------------------------

# .nv.info attributes (an "EIATTR" is a tag, a format byte and a value) that we read
_EIATTR_FRAME_SIZE = 0x11  # per-thread stack frame: local memory, spills included
_EIATTR_REGCOUNT = 0x2F  # registers per thread


def _elf_sections(binary: bytes) -> tuple[dict[str, tuple[int, int, int, int]], list[str]]:
    """``{section name: (type, offset, size, info)}`` and the symbol names by index."""
    if binary[4] != 2 or binary[5] != 1:
        raise ValueError("compiled expected a 64-bit little-endian CUBIN")
    shoff, = struct.unpack_from("<Q", binary, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", binary, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", binary, shoff + i * shentsize)
               for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def cstring(at: int) -> str:
        return binary[at:binary.index(b"\0", at)].decode()

    sections = {cstring(names_at + h[0]): (h[1], h[4], h[5], h[7]) for h in headers}
    symbols: list[str] = []
    if ".symtab" in sections and ".strtab" in sections:
        _, offset, size, _ = sections[".symtab"]
        strtab = sections[".strtab"][1]
        symbols = [cstring(strtab + struct.unpack_from("<I", binary, at)[0])
                   for at in range(offset, offset + size, 24)]
    return sections, symbols


def _eiattrs(binary: bytes, offset: int, size: int):
    """Yield ``(attribute, payload bytes)`` of one .nv.info section."""
    at, end = offset, offset + size
    while at + 4 <= end:
        fmt, attr = binary[at], binary[at + 1]
        if fmt == 0x04:  # EIFMT_SVAL: a 16-bit length, then that many bytes
            length, = struct.unpack_from("<H", binary, at + 2)
            yield attr, binary[at + 4:at + 4 + length]
            at += 4 + length
        else:  # EIFMT_NVAL / BVAL / HVAL: the value fits in the 4-byte entry itself
            yield attr, binary[at + 2:at + 4]
            at += 4


@dataclasses.dataclass(frozen=True)
class Resources:
    """What one kernel uses per thread and per block, as the CUBIN records it."""

    kernel: str  # the symbol (mangled for C++ names)
    registers: int  # per thread; times threads per block, against the SM's 64K registers
    # static __shared__ per block, as cuobjdump reports it (sm_90+ CUBINs include 1 KiB the
    # system reserves per block); dynamic shared memory is set at launch and is not in here
    shared_bytes: int
    stack_bytes: int  # per-thread stack frame in local memory (spills live here)
    spill_store_bytes: int = 0  # STL bytes in the code (static count)
    spill_load_bytes: int = 0  # LDL bytes in the code (static count)


def resources(compiled) -> list[Resources]:
    """Registers, static shared memory and stack frame of every kernel in a CUBIN (the spill
    fields stay 0: :func:`report` fills them from the SASS). Needs no tool: it reads the ELF."""
    binary = _cubin(compiled)
    sections, symbols = _elf_sections(binary)
    per_kernel: dict[str, dict[str, int]] = {}
    for name, (_, offset, size, _) in sections.items():
        if name != ".nv.info" and not name.startswith(".nv.info."):
            continue
        for attr, payload in _eiattrs(binary, offset, size):
            if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and len(payload) == 8:
                index, value = struct.unpack("<II", payload)  # (symbol index, value)
                key = "registers" if attr == _EIATTR_REGCOUNT else "stack"
                per_kernel.setdefault(symbols[index], {})[key] = value
    kernels = [name.removeprefix(".text.") for name in sections if name.startswith(".text.")]
    out = []
    for kernel in kernels:
        info = per_kernel.get(kernel, {})
        shared = sections.get(f".nv.shared.{kernel}", (0, 0, 0, 0))[2]
        out.append(Resources(kernel, info.get("registers", 0), shared, info.get("stack", 0)))
    return out


# --------------------------------------------------------------------------------------------
# The report a notebook shows
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Report:
    """The SASS census and resources of one compiled kernel."""

    name: str
    arch: str
    census: collections.Counter
    resources: Resources
    sass: str = dataclasses.field(repr=False)

    def count(self, *opcodes: str) -> int:
        return sum(self.census[op] for op in opcodes)

    def groups(self) -> dict[str, dict[str, int]]:
        """The census by :data:`GROUPS` family, only the opcodes that occur."""
        return {group: {op: self.census[op] for op in ops if self.census[op]}
                for group, ops in GROUPS.items()}

    def row(self, *opcodes: str) -> dict[str, object]:
        """One table row: kernel, arch, a count per opcode asked for (default: the
        tensor-core and conversion opcodes that occur), registers, shared memory, stack,
        spills."""
        if not opcodes:
            families = GROUPS["tensor core"] + GROUPS["conversion"]
            opcodes = tuple(op for op in families if self.census[op])
        row: dict[str, object] = {"kernel": self.name, "arch": self.arch}
        row.update({op: self.census[op] for op in opcodes})
        res = self.resources
        row.update({"registers": res.registers, "shared B": res.shared_bytes,
                    "stack B": res.stack_bytes,
                    "spill B": res.spill_store_bytes + res.spill_load_bytes})
        return row


def functions(sass: str) -> dict[str, str]:
    """SASS text split per kernel: ``{symbol: its instructions}``. cuobjdump heads each
    kernel with ``Function : name``, nvdisasm with ``.section .text.name``."""
    heads = list(re.finditer(r"^\s*(?:Function : (\S+)|\.section\s+\.text\.([^,\s]+))", sass,
                             re.M))
    return {(h.group(1) or h.group(2)): sass[h.end():nxt.start() if nxt else len(sass)]
            for h, nxt in zip(heads, [*heads[1:], None], strict=True)}


def report(compiled) -> Report:
    """Disassemble a :class:`course_utils.nvrtc.Compiled` CUBIN and count what it holds.

    A CUBIN compiled for one kernel name holds that kernel; with several, the report is about
    the one ``compiled.lowered_name`` names (or the first)."""
    sass = disassemble(compiled)
    per_function = functions(sass)
    if not per_function:
        raise ValueError("compiled holds no kernel (no code section in its SASS)")
    lowered = getattr(compiled, "lowered_name", "") or ""
    kernel = lowered if lowered in per_function else next(iter(per_function))
    code = per_function[kernel]
    stored, loaded = local_traffic(code)
    res = next((r for r in resources(compiled) if r.kernel == kernel), None)
    if res is None:
        raise ValueError(f"no resource information for {kernel} in the CUBIN")
    res = dataclasses.replace(res, spill_store_bytes=stored, spill_load_bytes=loaded)
    return Report(getattr(compiled, "name", kernel) or kernel, getattr(compiled, "arch", ""),
                  census(code), res, code)


def reports(compiled: list) -> list[Report]:
    """:func:`report` for each CUBIN, in order, several at a time.

    Each report waits on a disassembler process (~0.3 s, most of it the tool starting up), and a
    thread waiting on a process lets go of the GIL, so the reports overlap: lesson 07's 14
    variants took 5.5 s one after another on the 2-core CPU machine, and a cell a lecture waits
    for on a GPU box took 6-9 s that way."""
    workers = min(len(compiled), os.cpu_count() or 1) or 1
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(report, compiled))
