"""Compiling a student's CUDA kernel for the CPU runner: reading its signature, rewriting it
as host C++ against ``device.h`` (CUDA's headers dropped, ``extern __shared__`` arrays made the
launch's dynamic shared memory, an entry point that unpacks the arguments), and building it
with ``g++ -fsanitize=thread`` into a shared library beside the course's runtime (cached by
text). :mod:`course_utils.cuda_on_cpu` launches what this builds.
"""

from __future__ import annotations

import ctypes
import hashlib
import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from course_utils import env

HERE = Path(__file__).resolve().parent

# what the host compiler cannot run, found in the source (the first match names it)
UNSUPPORTED = (
    (re.compile(r"\basm\b|\b__asm__\b"), "inline PTX (asm)"),
    (re.compile(r"\b(__nv_bfloat162?|nv_bfloat16|__nv_fp8\w*)\b"), "bfloat16 or fp8 types"),
    (re.compile(r"\b(wmma|mma_sync|cuda::|cooperative_groups|__pipeline|cp\.async)\b"),
     "tensor-core, pipeline or cooperative-groups APIs"),
    (re.compile(r"\btemplate\s*<[^>]*>\s*(extern\s+\"C\"\s*)?__global__"), "a template kernel"),
)
CUDA_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](cuda[\w/.]*|device_\w+\.h|sm_\w+\.h|'
                          r'vector_types\.h|math_constants\.h)[>"]\s*$', re.M)
DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+((?:__align__\s*\(\s*\d+\s*\)\s*)?)([\w\s]+?)\s*(\w+)\s*\[\s*\]\s*;")

C_TYPES = {
    "int": ctypes.c_int, "signed": ctypes.c_int, "signed int": ctypes.c_int,
    "int32_t": ctypes.c_int32, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint,
    "uint32_t": ctypes.c_uint32, "long": ctypes.c_long, "long long": ctypes.c_longlong,
    "long long int": ctypes.c_longlong, "int64_t": ctypes.c_int64,
    "unsigned long": ctypes.c_ulong, "unsigned long long": ctypes.c_ulonglong,
    "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "float": ctypes.c_float,
    "double": ctypes.c_double, "bool": ctypes.c_bool, "char": ctypes.c_char,
    "short": ctypes.c_short, "unsigned short": ctypes.c_ushort,
}
ELEMENT_BYTES = {"char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "short": 2,
                 "unsigned short": 2, "int": 4, "unsigned": 4, "unsigned int": 4, "float": 4,
                 "int32_t": 4, "uint32_t": 4, "long long": 8, "unsigned long long": 8,
                 "int64_t": 8, "uint64_t": 8, "double": 8, "size_t": 8, "long": 8,
                 "float2": 8, "int2": 8, "uint2": 8, "float4": 16, "int4": 16, "uint4": 16,
                 "double2": 16, "__half": 2, "half": 2, "__half2": 4}


class CompileError(RuntimeError):
    """The host compiler refused the kernel (its messages, lines counted in your source)."""


class Unsupported(RuntimeError):
    """The kernel uses what only a GPU runs (inline PTX, tensor cores, half types, ...)."""


# --------------------------------------------------------------------------------------------
# The kernel's signature
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # as declared, without __restrict__ and the name
    pointer: bool
    const: bool  # a pointer to const: the kernel may not store through it
    element: str  # what it points to ("float") or its own type

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES.get(self.element, 1)


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "(<[" and 1 or (ch in ")>]" and -1 or 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def signature(source: str, name: str) -> list[Param]:
    """The parameters of ``__global__ void name(...)`` in ``source``."""
    bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    found = re.search(r"__global__\s+" + bounds + r"void\s+" + bounds + re.escape(name)
                      + r"\s*\(([^)]*)\)", source)
    if not found:
        raise ValueError(f"no kernel '__global__ void {name}(...)' in the source")
    params = []
    for text in _split_top(found.group(1)):
        text = re.sub(r"\b__restrict__\b|\b__restrict\b", " ", text)
        m = re.match(r"(.*?)(\w+)\s*$", text.strip(), re.S)
        if not m or not m.group(1).strip():
            raise Unsupported(f"a parameter the CPU runner cannot read: {text.strip()!r}")
        ctype, pname = " ".join(m.group(1).split()), m.group(2)
        pointer = "*" in ctype
        base = " ".join(ctype.replace("*", " ").replace("const", " ").split())
        const = pointer and "const" in ctype.split("*")[0]
        params.append(Param(pname, ctype, pointer, const, base))
        if not pointer and base not in C_TYPES:
            raise Unsupported(f"parameter {pname} has type {ctype}: the CPU runner passes "
                              f"pointers and the scalars {', '.join(sorted(C_TYPES))}")
    return params


def host_source(source: str, name: str, params: list[Param]) -> str:
    """The student's kernel as a host compiler's C++: CUDA's headers dropped (device.h stands
    for them), ``extern __shared__`` arrays turned into the launch's dynamic shared memory, and
    an entry point that unpacks the arguments (not instrumented: it is not the kernel's)."""
    from course_utils.nvrtc.source import strip_comments

    code = strip_comments(source)
    for pattern, what in UNSUPPORTED:
        if pattern.search(code):
            raise Unsupported(f"the kernel uses {what}: only a GPU runs that")
    body = CUDA_INCLUDE.sub("", source)
    body = DYNAMIC_SHARED.sub(lambda m: f"{m.group(2).strip()}* const {m.group(3)} = "
                                        f"({m.group(2).strip()}*)cc_dynamic_shared();", body)
    unpack = ", ".join(f"*({p.type}*)a[{i}]" for i, p in enumerate(params))
    return (f'#include "{HERE / "device.h"}"\n#line 1 "your kernel"\n{body}\n'
            f'#line 1 "course_utils/cuda_on_cpu (the launch)"\n'
            f'extern "C" __attribute__((no_sanitize("thread"))) void cc_entry(void** a) '
            f"{{ {name}({unpack}); }}\n")


# --------------------------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------------------------

FLAGS = ("-std=c++17", "-fPIC", "-w")
# -O0: every load the source names stays a load (an unused one too); DWARF 4: addr2line names
# the "#line" file of each instruction (with DWARF 5's file table it named the .cpp instead)
INSTRUMENT = ("-O0", "-gdwarf-4", "-fsanitize=thread", "--param",
              "tsan-instrument-func-entry-exit=0", "-fno-inline")
# build(..., bounds=True): an index past the end of an array whose size the compiler knows (a
# thread's own float acc[4][4], a __shared__ tile) traps (SIGILL) where it happens, instead of
# reading or writing a neighbour: a thread's locals are not watched otherwise
BOUNDS = ("-fsanitize=bounds", "-fsanitize-undefined-trap-on-error")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise CompileError(f"{what} failed:\n{done.stderr.strip()}")


def _runtime_object() -> Path:
    text = b"".join(p.read_bytes() for p in sorted(HERE.glob("*.[ch]*")) if p.name != "device.h")
    out = env.var_dir("cuda_on_cpu") / f"runtime-{hashlib.sha256(text).hexdigest()[:12]}.o"
    if not out.exists():
        tmp = out.with_suffix(f".{random.randrange(1 << 30)}.tmp.o")
        _run(["g++", *FLAGS, "-O2", "-c", str(HERE / "runtime.cpp"), "-o", str(tmp)],
             "compiling the CPU runner")
        tmp.replace(out)  # two processes may build it at once: each renames a whole file
    return out


def assembled(source: str, defines: dict | None) -> str:
    """``source`` as :mod:`course_utils.nvrtc` compiles it: a kernel file split at its marker
    line gets the header generated from ``defines`` (lines still count in the file)."""
    from course_utils.nvrtc import source as sources

    if not defines and sources.MARKER not in source:
        return source
    text = sources.assemble(sources.read_source(source), defines)
    return re.sub(r'^#line (\d+) "[^"]*"', r'#line \1 "your kernel"', text, flags=re.M)


def build(source: str, name: str, defines: dict | None = None,
          bounds: bool = False) -> tuple[Path, list[Param]]:
    """The shared library running kernel ``name`` of ``source`` (cached by its text);
    ``bounds``: with :data:`BOUNDS`."""
    source = assembled(source, defines)
    params = signature(source, name)
    text = host_source(source, name, params)
    flags = (*INSTRUMENT, *BOUNDS) if bounds else INSTRUMENT
    key = hashlib.sha256((text + (HERE / "device.h").read_text() + name
                          + ("bounds" if bounds else "")).encode())
    runtime = _runtime_object()
    folder = env.var_dir("cuda_on_cpu")
    lib = folder / f"{name}-{key.hexdigest()[:16]}-{runtime.stem}.so"
    if not lib.exists():
        stem = f"{name}-{key.hexdigest()[:16]}-{random.randrange(1 << 30)}"
        cpp, obj, tmp = (folder / (stem + s) for s in (".cpp", ".o", ".tmp.so"))
        cpp.write_text(text)
        try:
            done = subprocess.run(["g++", *FLAGS, *flags, "-c", str(cpp), "-o", str(obj)],
                                  capture_output=True, text=True)
            if done.returncode:
                errors = [ln for ln in done.stderr.splitlines()
                          if ln.startswith("your kernel:") and "error" in ln]
                raise CompileError("\n".join(errors[:4]) or done.stderr.strip()[-2000:])
            _run(["g++", "-shared", "-Wl,-Bsymbolic", str(obj), str(runtime), "-o", str(tmp)],
                 "linking the CPU runner")
            tmp.replace(lib)
        finally:
            for path in (cpp, obj, tmp):
                path.unlink(missing_ok=True)
    return lib, params


def shared_arrays(lib: Path) -> list[tuple[str, int, int]]:
    """(name, offset in the shared section, bytes) of each ``__shared__`` array."""
    heads = subprocess.run(["objdump", "-h", str(lib)], capture_output=True, text=True).stdout
    start = next((int(line.split()[3], 16) for line in heads.splitlines()
                  if len(line.split()) > 3 and line.split()[1] == "cc_shared"), None)
    if start is None:
        return []
    table = subprocess.run(["objdump", "-tC", str(lib)], capture_output=True, text=True).stdout
    arrays = []
    for line in table.splitlines():
        parts = line.split()
        if "cc_shared" in parts and len(parts) >= 6 and not parts[-1].startswith("__st"):
            at = parts.index("cc_shared")
            arrays.append((parts[-1].split("::")[-1], int(parts[0], 16) - start,
                           int(parts[at + 1], 16)))
    return arrays
