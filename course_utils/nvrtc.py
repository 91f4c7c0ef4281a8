"""Run-time compilation with NVRTC: the course's one path from a ``.cu`` file to a launched kernel.

A kernel source is an ordinary ``.cu`` file in ``kernels/`` that an editor can highlight. Above a
marker line sits a header *for the IDE* (includes and example values); below it, the kernel::

    #include <cuda_bf16.h>
    using scalar_t = float;            // example value: the editor needs one
    constexpr int BLOCK = 256;
    // ==== kernel: everything above this line is replaced by the generated header ====
    extern "C" __global__ void add_kernel(const scalar_t* a, ...) { ... }

At compile time the part above the marker is replaced by a header generated from Python values
(its ``#include`` lines are kept)::

    k = nvrtc.compile("kernels/add/add.cu", "add_kernel",
                      defines={"scalar_t": torch.bfloat16, "BLOCK": 128}, arch="sm_90")
    k.ptx / k.cubin / k.lowered_name / k.seconds / k.cache   # works without a GPU
    kernel = nvrtc.load(k)                                   # needs a GPU
    kernel(a, b, out, n, grid=(blocks,), block=(128,))

* Compiling needs only ``libnvrtc`` (no GPU): PTX (``output="ptx"``) or CUBIN for any
  architecture NVRTC knows (sm_80, sm_89, sm_90, sm_120, ...).
* Errors come back as :class:`CompileError` with NVRTC's log, whose line numbers point into the
  ``.cu`` file (a ``#line`` directive after the generated header keeps them right).
* Results are cached in memory and on disk (``var/nvrtc_cache/``), keyed by everything that
  changes the binary: the final source (generated header included), options, architecture,
  output kind and NVRTC version. A (re)build prints one line saying why it built.
* Launches check the arguments against the kernel's parameter list before calling the driver, so
  a wrong count or type is a Python ``TypeError``, not a crashed process.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from course_utils import _nvrtc_compat as compat
from course_utils import env

MARKER = "// ==== kernel"
"""A line starting with this separates the IDE header (above) from the kernel (below)."""

DEFAULT_ARCH = "sm_90"
DEFAULT_OPTIONS = ("-std=c++17",)
CACHE_FORMAT = 1  # bump when the cache layout or what goes into a key changes
VERBOSE = True  # print one line whenever something is (re)built

# C++ spelling of the torch dtypes a generated header can alias, and the header each needs.
DTYPE_CTYPES: dict[torch.dtype, tuple[str, str | None]] = {
    torch.float32: ("float", None),
    torch.float64: ("double", None),
    torch.float16: ("__half", "cuda_fp16.h"),
    torch.bfloat16: ("__nv_bfloat16", "cuda_bf16.h"),
    torch.int8: ("signed char", None),
    torch.uint8: ("unsigned char", None),
    torch.int16: ("short", None),
    torch.int32: ("int", None),
    torch.int64: ("long long", None),
    torch.bool: ("bool", None),
}
for _name, _ctype in (("float8_e4m3fn", "__nv_fp8_e4m3"), ("float8_e5m2", "__nv_fp8_e5m2")):
    if hasattr(torch, _name):
        DTYPE_CTYPES[getattr(torch, _name)] = (_ctype, "cuda_fp8.h")


class CompileError(RuntimeError):
    """NVRTC rejected the program; ``log`` holds its messages with file-relative line numbers."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NoGPUError(RuntimeError):
    """Loading or launching was asked for on a machine without a usable CUDA GPU."""


# --------------------------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------------------------


def unavailable_reason() -> str | None:
    """None when NVRTC can compile on this machine (no GPU needed); otherwise why not."""
    try:
        compat.nvrtc_library()
    except OSError as err:
        return str(err)
    return None


@functools.cache
def version() -> tuple[int, int]:
    """NVRTC's version, e.g. ``(13, 0)``."""
    lib = compat.nvrtc_library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def version_string() -> str:
    return ".".join(map(str, version()))


def supported_archs() -> list[str]:
    """The ``sm_XY`` targets this NVRTC can compile for."""
    lib = compat.nvrtc_library()
    count = ctypes.c_int()
    lib.nvrtcGetNumSupportedArchs(ctypes.byref(count))
    archs = (ctypes.c_int * count.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return [f"sm_{a}" for a in archs]


@functools.cache
def include_dirs() -> list[Path]:
    """Include folders added to every compile: CUDA headers and libcu++ (``cuda/std``)."""
    return compat.include_dirs()


# --------------------------------------------------------------------------------------------
# Sources: the marker split and the generated header
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Source:
    """A kernel source split at the marker: ``header`` for the IDE, ``body`` for the compiler."""

    path: Path | None
    header: str
    body: str
    body_line: int  # 1-based line number of the body's first line in the file

    @property
    def includes(self) -> list[str]:
        return [ln.strip() for ln in self.header.splitlines() if ln.strip().startswith("#include")]

    @property
    def display_name(self) -> str:
        if self.path is None:
            return "<source>"
        try:
            return str(self.path.resolve().relative_to(env.ROOT))
        except ValueError:
            return str(self.path)


def read_source(source: str | os.PathLike) -> Source:
    """Split a kernel file (or a string holding a kernel source) at the marker line.

    A string without the marker is all body (an inline snippet); a *file* without it is an
    error, because everything in it would be sent to the compiler unreplaced.
    """
    path = None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and source.endswith((".cu", ".cuh"))):
        path = Path(source)
        if not path.is_absolute() and not path.exists():
            path = env.ROOT / path
        if not path.exists():
            raise FileNotFoundError(f"kernel source {source!s} not found")
        text = path.read_text()
    elif isinstance(source, str):
        text = source
    else:
        raise TypeError(f"source expected a path or a string of CUDA code, "
                        f"got {type(source).__name__}")
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.lstrip().startswith(MARKER):
            return Source(path, "".join(lines[:i]), "".join(lines[i + 1:]), i + 2)
    if path is not None:
        raise ValueError(f"{path}: no marker line starting with {MARKER!r}; put one between the "
                         "IDE header (includes, example values) and the kernel")
    return Source(None, "", text, 1)


def _cpp_value(name: str, value) -> tuple[str, str | None]:
    """One line of the generated header for ``name = value``, and a header it needs."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"defines: {name!r} is not a C++ identifier")
    if isinstance(value, torch.dtype):
        if value not in DTYPE_CTYPES:
            raise ValueError(f"defines[{name!r}]: no C++ type for {value}; "
                             f"known: {', '.join(str(d) for d in DTYPE_CTYPES)}")
        ctype, include = DTYPE_CTYPES[value]
        return f"using {name} = {ctype};", include
    if isinstance(value, bool):
        return f"constexpr bool {name} = {'true' if value else 'false'};", None
    if isinstance(value, int):
        kind = "int" if -2**31 <= value < 2**31 else "long long"
        return f"constexpr {kind} {name} = {value}{'' if kind == 'int' else 'LL'};", None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"defines[{name!r}]: {value} has no constexpr float literal")
        return f"constexpr float {name} = {value!r}f;", None
    if isinstance(value, str):  # a C++ type name, e.g. "float4" or "cuda::std::int8_t"
        return f"using {name} = {value};", None
    raise TypeError(f"defines[{name!r}]: expected int, bool, float, torch.dtype or a C++ type "
                    f"name (str), got {type(value).__name__}")


def generate_header(defines: Mapping[str, object] | None = None,
                    includes: Sequence[str] = ()) -> str:
    """The header that replaces the IDE section: includes, then one line per define.

    ``int`` -> ``constexpr int``, ``bool`` -> ``constexpr bool``, ``float`` -> ``constexpr
    float``, ``torch.dtype`` -> ``using`` alias (``torch.bfloat16`` -> ``__nv_bfloat16``, with
    its header), ``str`` -> ``using`` alias to that C++ type.
    """
    lines, needed = [], []
    for name, value in (defines or {}).items():
        line, include = _cpp_value(name, value)
        lines.append(line)
        if include and f"#include <{include}>" not in needed:
            needed.append(f"#include <{include}>")
    includes = [*dict.fromkeys([*includes, *needed])]
    return "\n".join(["// generated by course_utils.nvrtc", *includes, *lines]) + "\n"


def assemble(src: Source, defines: Mapping[str, object] | None = None) -> str:
    """The program NVRTC compiles: generated header, then ``#line`` and the kernel body."""
    header = generate_header(defines, src.includes)
    return f'{header}#line {src.body_line} "{src.display_name}"\n{src.body}'


# --------------------------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------------------------


def normalize_arch(arch: str | int | tuple[int, int] | None) -> str:
    """``"sm_90"`` from ``"sm_90"``, ``"90"``, ``90``, ``(9, 0)``, ``"sm_90a"``; None means
    this GPU, or sm_90 without one."""
    if arch is None:
        return env.device_info().arch or DEFAULT_ARCH
    if isinstance(arch, tuple):
        return f"sm_{arch[0]}{arch[1]}"
    match = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3}[af]?)", str(arch).strip().lower())
    if not match:
        raise ValueError(f"arch expected e.g. 'sm_90', '90' or (9, 0), got {arch!r}")
    return f"sm_{match.group(1)}"


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


_memory: dict[str, Compiled] = {}
_lock = threading.Lock()


_cache_override: Path | None = None


def cache_dir() -> Path:
    """The on-disk cache: ``var/nvrtc_cache/`` unless :func:`use_cache_dir` says otherwise."""
    return _cache_override or env.var_dir("nvrtc_cache")


@contextlib.contextmanager
def use_cache_dir(path: str | os.PathLike):
    """Cache in ``path`` inside the ``with`` block (memory cache cleared on entry and exit):
    for demos and tests that must start from an empty cache every time they run."""
    global _cache_override
    previous, _cache_override = _cache_override, Path(path)
    clear_memory_cache()
    try:
        yield Path(path)
    finally:
        _cache_override = previous
        clear_memory_cache()


def clear_memory_cache() -> None:
    """Forget compiled kernels held in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()
        _fast.clear()


_fast: dict[tuple, Compiled] = {}


def _fast_key(source, name, defines, arch, output, options, default_options,
              auto_includes) -> tuple | None:
    """A cheap key for "the same call as before": the file's path, mtime and size instead of
    its contents. None when there is no cheap key (the full path then decides)."""
    try:
        if isinstance(source, str) and "\n" in source:
            src_id = ("text", source)
        else:
            path = Path(source)
            if not path.is_absolute() and not path.exists():
                path = env.ROOT / path
            stat = path.stat()
            src_id = (str(path), stat.st_mtime_ns, stat.st_size)
        return (src_id, name, tuple((defines or {}).items()), str(arch), output, tuple(options),
                default_options, auto_includes, version_string(), str(_cache_override))
    except (OSError, TypeError):
        return None


def _remember(fast: tuple | None, compiled: Compiled) -> None:
    if fast is not None:
        with _lock:
            _fast[fast] = compiled


def _check_name(src: Source, program: str, name: str) -> None:
    base = name.split("<", 1)[0].strip().removeprefix("&").split("::")[-1]
    if not re.fullmatch(r"[A-Za-z_]\w*", base):
        raise ValueError(f"kernel name {name!r} is not a C++ name (or template-id)")
    kernels = _global_functions(program)
    if base not in kernels:
        where = src.display_name
        found = ", ".join(kernels) or "no __global__ function at all"
        raise ValueError(f"kernel {base!r} is not in {where}; its __global__ functions: {found}")


def _global_functions(text: str) -> list[str]:
    code = _strip_comments(text)
    return re.findall(r"__global__[^;{(]*?\b([A-Za-z_]\w*)\s*\(", code)


def _strip_comments(text: str) -> str:
    """The code without comments and launch attributes (``__launch_bounds__(...)``)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"\b__(launch_bounds|cluster_dims|maxnreg|grid_constant)__\s*(\([^)]*\))?",
                  " ", text)


def _nvrtc_call(lib, result: int, what: str) -> None:
    if result != 0:
        raise CompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(result).decode()}")


def _run_nvrtc(program: str, filename: str, name: str, options: list[str],
               output: str) -> tuple[bytes, str, str]:
    """One NVRTC compile: (binary, lowered name, log); CompileError carries the log."""
    lib = compat.nvrtc_library()
    prog = ctypes.c_void_p()
    _nvrtc_call(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), program.encode(),
                                            filename.encode(), 0, None, None), "create")
    try:
        if name:
            _nvrtc_call(lib, lib.nvrtcAddNameExpression(prog, name.encode()), "name expression")
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        result = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
        if result != 0:
            raise CompileError(f"NVRTC: {lib.nvrtcGetErrorString(result).decode()}", log)
        kind = "PTX" if output == "ptx" else "CUBIN"
        getattr(lib, f"nvrtcGet{kind}Size")(prog, ctypes.byref(size))
        binary = ctypes.create_string_buffer(size.value)
        _nvrtc_call(lib, getattr(lib, f"nvrtcGet{kind}")(prog, binary), f"get {kind}")
        lowered = ctypes.c_char_p(b"")
        if name:
            _nvrtc_call(lib, lib.nvrtcGetLoweredName(prog, name.encode(), ctypes.byref(lowered)),
                        "lowered name")
        data = binary.raw.rstrip(b"\0") if output == "ptx" else binary.raw
        return data, lowered.value.decode(), log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _format_error(src: Source, err: CompileError, name: str, arch: str) -> CompileError:
    """NVRTC's log (its line numbers already point into the file, thanks to ``#line``), with a
    note under each message that comes from the generated header instead."""
    out = []
    pattern = re.compile(r"^(.*?)\((\d+)\): (error|warning|catastrophic error)")
    for line in err.log.splitlines():
        out.append(line)
        match = pattern.match(line)
        if match and match.group(1) != src.display_name:
            out.append("    (the header generated from defines=; see it with "
                       "nvrtc.generate_header(defines))")
    log = "\n".join(out)
    what = name or "the program"
    return CompileError(f"compiling {what} from {src.display_name} for {arch} failed:\n{log}",
                        log)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


def compile(source: str | os.PathLike, name: str | None, *,
            defines: Mapping[str, object] | None = None,
            arch: str | int | tuple[int, int] | None = None, output: str = "cubin",
            options: Sequence[str] = (), default_options: bool = True,
            auto_includes: bool = True, cache: bool = True, verbose: bool | None = None
            ) -> Compiled:
    """Compile kernel ``name`` of ``source`` (a ``.cu`` path or a string) with NVRTC.

    ``name`` may be a template-id (``"scale<__half, 4>"``); None compiles the whole program
    without looking a kernel up (to check that a file compiles). ``defines`` generate the header
    that replaces the IDE section. ``arch`` is ``"sm_90"`` and the like (default: this GPU,
    else sm_90); ``output`` is ``"cubin"`` (machine code for exactly that arch) or ``"ptx"``.
    ``auto_includes=False`` leaves out the CUDA/libcu++ include folders (for showing what goes
    wrong without them); ``cache=False`` always compiles and stores nothing.
    """
    verbose = VERBOSE if verbose is None else verbose
    start = time.perf_counter()
    fast = _fast_key(source, name, defines, arch, output, options, default_options,
                     auto_includes) if cache else None
    if fast is not None and (hit := _fast.get(fast)) is not None:
        # same file (path, mtime, size) and arguments as a compile this process did: skip
        # reading, assembling and hashing the source
        return dataclasses.replace(hit, seconds=time.perf_counter() - start, cache="memory hit")
    if output not in ("ptx", "cubin"):
        raise ValueError(f"output expected 'ptx' or 'cubin', got {output!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name expected the kernel's name (or None), got {name!r}")
    name = name or ""  # "": compile the whole program, no kernel looked up
    if reason := unavailable_reason():
        raise RuntimeError(f"NVRTC is not available: {reason}")
    arch = normalize_arch(arch)
    target = arch if output == "cubin" else arch.replace("sm_", "compute_")
    src = read_source(source)
    defines = dict(defines or {})
    program = assemble(src, defines)
    if name:
        _check_name(src, program, name)
    includes = [f"-I{d}" for d in include_dirs()] if auto_includes else []
    all_options = [f"--gpu-architecture={target}", *(DEFAULT_OPTIONS if default_options else ()),
                   *includes, *options]
    parts = {"source": _digest(src.body, src.display_name),
             "header": _digest(program[: len(program) - len(src.body)]),
             "options": _digest(all_options[1:]), "arch": f"{arch} {output}",
             "nvrtc": version_string(), "name": name, "format": CACHE_FORMAT}
    key = _digest(sorted(parts.items()))
    meta = dict(name=name, arch=arch, output=output, source=src, program=program,
                defines=tuple(defines.items()), options=tuple(all_options))

    if cache:
        with _lock:
            hit = _memory.get(key)
        if hit is not None:
            _remember(fast, hit)
            return dataclasses.replace(hit, seconds=time.perf_counter() - start,
                                       cache="memory hit")
        if (entry := _disk_read(key)) is not None:
            binary, lowered, log = entry
            compiled = Compiled(lowered_name=lowered, binary=binary, log=log, key=key,
                                seconds=time.perf_counter() - start, cache="disk hit", **meta)
            with _lock:
                _memory[key] = compiled
            _remember(fast, compiled)
            return compiled

    why = _why_rebuilt(src, name, parts) if cache else "cache=False"
    try:
        # the program's own name labels the generated header's lines; #line relabels the rest
        binary, lowered, log = _run_nvrtc(program, f"{src.display_name} [generated header]",
                                          name, all_options, output)
    except CompileError as err:
        raise _format_error(src, err, name, arch) from None
    seconds = time.perf_counter() - start
    compiled = Compiled(lowered_name=lowered, binary=binary, log=log, key=key, seconds=seconds,
                        cache=f"built ({why})", **meta)
    if cache:
        _disk_write(key, compiled, parts)
        with _lock:
            _memory[key] = compiled
        _remember(fast, compiled)
    if verbose:
        print(f"nvrtc: built {name or 'the program'} from {src.display_name} for {arch} "
              f"({output}) in {seconds * 1e3:.0f} ms: {why}")
    return compiled


# -- the on-disk cache -----------------------------------------------------------------------


def _entry(key: str) -> tuple[Path, Path]:
    folder = cache_dir() / key[:2]
    return folder / f"{key}.bin", folder / f"{key}.json"


def _atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _disk_write(key: str, compiled: Compiled, parts: dict) -> None:
    binary_path, meta_path = _entry(key)
    meta = {"name": compiled.name, "lowered_name": compiled.lowered_name, "log": compiled.log,
            "arch": compiled.arch, "output": compiled.output, "parts": parts,
            "sha256": hashlib.sha256(compiled.binary).hexdigest(),
            "source_file": compiled.source.display_name,
            "built": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        _atomic_write(binary_path, compiled.binary)
        _atomic_write(meta_path, json.dumps(meta, indent=1).encode())  # last: marks it valid
        _atomic_write(_last_build_path(compiled.source, compiled.name),
                      json.dumps(parts).encode())
    except OSError as err:  # a read-only checkout still compiles, it just does not cache
        print(f"nvrtc: could not write the disk cache ({err}); continuing without it")


def _disk_read(key: str) -> tuple[bytes, str, str] | None:
    binary_path, meta_path = _entry(key)
    try:
        meta = json.loads(meta_path.read_text())
        binary = binary_path.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(binary).hexdigest() != meta.get("sha256"):
        return None  # damaged entry: rebuild (and overwrite it)
    return binary, meta["lowered_name"], meta.get("log", "")


def _last_build_path(src: Source, name: str) -> Path:
    return cache_dir() / "last_build" / f"{_digest(src.display_name, name)}.json"


def _why_rebuilt(src: Source, name: str, parts: dict) -> str:
    """Compare with the last build of the same kernel from the same file: what changed."""
    try:
        last = json.loads(_last_build_path(src, name).read_text())
    except (OSError, ValueError):
        return "not in the cache"
    labels = {"source": "source changed", "header": "generated header (defines) changed",
              "options": "options changed", "arch": "architecture/output changed",
              "nvrtc": "NVRTC version changed", "format": "cache format changed"}
    changed = [f"{labels[k]}"
               + (f": {last.get(k)} -> {parts[k]}" if k in ("arch", "nvrtc") else "")
               for k in labels if last.get(k) != parts[k]]
    return "; ".join(changed) or "not in the cache"


# --------------------------------------------------------------------------------------------
# Loading and launching (needs a GPU)
# --------------------------------------------------------------------------------------------

_SCALARS: dict[str, tuple[type, str]] = {
    # C++ parameter type -> (ctypes type, Python kind)
    "int": (ctypes.c_int32, "int"), "int32_t": (ctypes.c_int32, "int"),
    "signed int": (ctypes.c_int32, "int"),
    "unsigned": (ctypes.c_uint32, "int"), "unsigned int": (ctypes.c_uint32, "int"),
    "uint32_t": (ctypes.c_uint32, "int"),
    "long long": (ctypes.c_int64, "int"), "long": (ctypes.c_int64, "int"),
    "int64_t": (ctypes.c_int64, "int"), "long long int": (ctypes.c_int64, "int"),
    "unsigned long long": (ctypes.c_uint64, "int"), "uint64_t": (ctypes.c_uint64, "int"),
    "size_t": (ctypes.c_uint64, "int"),
    "float": (ctypes.c_float, "float"), "double": (ctypes.c_double, "float"),
    "bool": (ctypes.c_bool, "bool"),
}
_CTYPE_DTYPES = {ctype: dtype for dtype, (ctype, _) in DTYPE_CTYPES.items()}
_CTYPE_DTYPES.update({"half": torch.float16, "nv_bfloat16": torch.bfloat16,
                      "int32_t": torch.int32, "int64_t": torch.int64, "uint8_t": torch.uint8,
                      "int8_t": torch.int8, "char": torch.int8})


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    ctype: str  # base type after aliases, e.g. "__nv_bfloat16"
    pointer: bool
    spelled: str  # as written in the source

    @property
    def dtype(self) -> torch.dtype | None:
        return _CTYPE_DTYPES.get(self.ctype.removeprefix("cuda::std::"))


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<([" and 1 or 0
        depth -= ch in ">)]" and 1 or 0
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def parameters(compiled: Compiled) -> list[Param]:
    """The kernel's parameters, read from its source, with aliases and template arguments
    resolved. ValueError when the parameter list is beyond this simple reader."""
    code = _strip_comments(compiled.program)
    base = compiled.name.split("<", 1)[0].strip()
    match = re.search(r"(template\s*<(?P<tparams>[^{;]*?)>\s*)?__global__[^;{(]*?\b"
                      + re.escape(base) + r"\s*\((?P<params>[^)]*)\)", code, re.S)
    if not match:
        raise ValueError(f"could not find the parameter list of {base}")
    aliases = dict(compiled.aliases)
    aliases.update(re.findall(r"using\s+(\w+)\s*=\s*([^;]+);", code))
    if match.group("tparams") and "<" in compiled.name:
        names = [p.split()[-1].split("=")[0] for p in _split_top(match.group("tparams"))]
        args = _split_top(compiled.name.split("<", 1)[1].rsplit(">", 1)[0])
        aliases.update(zip(names, args, strict=False))
    params = []
    for spelled in _split_top(match.group("params")):
        words = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ",
                       spelled.replace("*", " * ").replace("&", " & ")).split()
        if not words or "&" in words or "[" in spelled:
            raise ValueError(f"{base}: cannot pass parameter {spelled!r} from Python")
        pointer = "*" in words
        words = [w for w in words if w != "*"]
        pname, ctype = words[-1], " ".join(words[:-1])
        for _ in range(8):  # follow alias chains
            ctype = aliases.get(ctype, ctype).strip()
            ctype = re.sub(r"\b(const|volatile)\b|^(cuda::)?std::|^::", "", ctype).strip()
            if "*" in ctype:
                pointer, ctype = True, ctype.replace("*", "").strip()
        params.append(Param(pname, ctype, pointer, spelled))
    return params


class Kernel:
    """A loaded kernel: ``kernel(*args, grid=..., block=..., shared_mem=0, stream=None)``.

    Tensors go to pointer parameters, Python numbers to scalar parameters; both are checked
    against the parameter list before the launch.
    """

    def __init__(self, compiled: Compiled, device: int):
        self.compiled = compiled
        self.device = device
        self.params = parameters(compiled)
        lib = compat.driver_library()
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        with torch.cuda.device(device):
            _ensure_context(device)
            compat.check_driver(lib.cuModuleLoadData(ctypes.byref(module), compiled.binary),
                                f"loading {compiled.name} ({compiled.output} for "
                                f"{compiled.arch})")
            compat.check_driver(lib.cuModuleGetFunction(ctypes.byref(func), module,
                                                        compiled.lowered_name.encode()),
                                f"finding {compiled.lowered_name}")
        self._module, self._func = module, func
        self._shared_configured = 48 * 1024

    def __repr__(self) -> str:
        sig = ", ".join(p.spelled for p in self.params)
        return f"<nvrtc.Kernel {self.compiled.name}({sig}) on cuda:{self.device}>"

    def __call__(self, *args, grid: int | Sequence[int] = 1, block: int | Sequence[int] = 1,
                 shared_mem: int = 0, stream: torch.cuda.Stream | None = None) -> None:
        grid, block = _dims("grid", grid), _dims("block", block)
        if grid[0] > 2**31 - 1 or max(grid[1:]) > 65535:
            raise ValueError(f"grid expected x < 2^31 and y, z <= 65535, got {grid}")
        if block[0] * block[1] * block[2] > 1024:
            raise ValueError(f"block expected at most 1024 threads, got {block}")
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise ValueError(f"shared_mem expected a byte count >= 0, got {shared_mem!r}")
        values = check_args(self.compiled.name, self.params, args, self.device)
        if shared_mem > self._shared_configured:
            self.set_shared_memory(shared_mem)
        lib = compat.driver_library()
        # cuLaunchKernel takes an array of pointers to the argument values (kept alive here)
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        stream = stream or torch.cuda.current_stream(self.device)
        with contextlib.ExitStack() as guard:
            if torch.cuda.current_device() != self.device:
                guard.enter_context(torch.cuda.device(self.device))
            compat.check_driver(lib.cuLaunchKernel(self._func, *grid, *block, shared_mem,
                                                   ctypes.c_void_p(stream.cuda_stream),
                                                   pointers, None),
                                f"launching {self.compiled.name}")

    def set_shared_memory(self, nbytes: int) -> None:
        """Allow ``nbytes`` of dynamic shared memory (> 48 KB needs this opt-in)."""
        limit = torch.cuda.get_device_properties(self.device).shared_memory_per_block_optin
        if nbytes > limit:
            raise ValueError(f"shared_mem={nbytes} bytes exceeds this GPU's per-block limit "
                             f"of {limit} bytes")
        attribute = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        compat.check_driver(compat.driver_library().cuFuncSetAttribute(self._func, attribute,
                                                                        nbytes),
                            "setting the dynamic shared memory size")
        self._shared_configured = nbytes


def check_args(name: str, params: Sequence[Param], args: tuple, device: int) -> list:
    """The ctypes values for a launch of ``name``: raises TypeError naming the argument when
    the count or a type does not match the parameter list (before anything reaches the GPU)."""
    if len(args) != len(params):
        sig = ", ".join(p.spelled for p in params)
        raise TypeError(f"{name} takes {len(params)} arguments ({sig}), "
                        f"got {len(args)}")
    values = []
    for i, (param, arg) in enumerate(zip(params, args, strict=True)):
        where = f"{name}: argument {i} ({param.spelled})"
        if isinstance(arg, ctypes._SimpleCData):  # escape hatch: the caller knows best
            values.append(arg)
        elif param.pointer:
            if not isinstance(arg, torch.Tensor):
                raise TypeError(f"{where} expected a CUDA tensor, got "
                                f"{type(arg).__name__}")
            if arg.device != torch.device("cuda", device):
                raise TypeError(f"{where} expected a tensor on cuda:{device}, "
                                f"got one on {arg.device}")
            if param.dtype is not None and arg.dtype != param.dtype and param.ctype != "void":
                raise TypeError(f"{where} expected a {param.dtype} tensor "
                                f"({param.ctype}), got {arg.dtype}")
            values.append(ctypes.c_void_p(arg.data_ptr()))
        else:
            if param.ctype not in _SCALARS:
                raise TypeError(f"{where}: cannot pass a {param.ctype} from Python; "
                                "pass a ctypes value")
            ctype, kind = _SCALARS[param.ctype]
            ok = {"int": isinstance(arg, int) and not isinstance(arg, bool),
                  "float": isinstance(arg, int | float) and not isinstance(arg, bool),
                  "bool": isinstance(arg, bool)}[kind]
            if not ok:
                raise TypeError(f"{where} expected a Python {kind}, got "
                                f"{type(arg).__name__}")
            if kind == "int":
                bits = ctypes.sizeof(ctype) * 8
                low = 0 if ctype in (ctypes.c_uint32, ctypes.c_uint64) else -2**(bits - 1)
                high = 2**bits if low == 0 else 2**(bits - 1)
                if not low <= arg < high:
                    raise TypeError(f"{where}: {arg} does not fit in {param.ctype}")
            values.append(ctype(arg))
    return values


def _dims(what: str, value) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise ValueError(f"{what} expected 1-3 positive ints, got {value!r}")
    return (*dims, *(1,) * (3 - len(dims)))


def _ensure_context(device: int) -> None:
    """Make the device's primary context current on this thread (torch creates it lazily)."""
    torch.empty(1, device=f"cuda:{device}")
    ctx = ctypes.c_void_p()
    compat.check_driver(compat.driver_library().cuCtxGetCurrent(ctypes.byref(ctx)),
                        "getting the context")
    if not ctx.value:
        torch.cuda.synchronize(device)


_loaded: dict[tuple[str, int], Kernel] = {}


def load(compiled: Compiled, device: int | None = None) -> Kernel:
    """Load a compiled kernel onto a GPU (once per device) and return it, ready to launch."""
    if not torch.cuda.is_available():
        raise NoGPUError(f"cannot load {compiled.name}: {'; '.join(env.unmet('cuda'))}. "
                         "Compiling works without a GPU: nvrtc.compile(..., arch='sm_90').")
    if not compiled.lowered_name:
        raise ValueError("this program was compiled without a kernel name (name=None): "
                         "compile it with the kernel's name to load it")
    device = torch.cuda.current_device() if device is None else device
    cap = torch.cuda.get_device_capability(device)
    have = f"sm_{cap[0]}{cap[1]}"
    if compiled.output == "cubin" and compiled.arch.rstrip("af") != have:
        raise ValueError(f"{compiled.name} is CUBIN for {compiled.arch}; this GPU is {have}. "
                         f"Compile with arch=None (this GPU) or output='ptx'.")
    with _lock:
        if (compiled.key, device) not in _loaded:
            _loaded[(compiled.key, device)] = Kernel(compiled, device)
        return _loaded[(compiled.key, device)]


def kernel(source: str | os.PathLike, name: str, **compile_kwargs) -> Kernel:
    """Compile for this GPU (cached) and load: the one call a notebook usually needs."""
    if not torch.cuda.is_available():
        raise NoGPUError(f"cannot launch {name}: {'; '.join(env.unmet('cuda'))}. "
                         "Compiling works without a GPU: nvrtc.compile(..., arch='sm_90').")
    return load(compile(source, name, **compile_kwargs))


def kernel_sources(root: str | os.PathLike | None = None) -> list[Path]:
    """Every NVRTC kernel source under ``kernels/``: the ``.cu`` files with the marker line."""
    root = Path(root or env.ROOT / "kernels")
    return sorted(p for p in root.rglob("*.cu")
                  if any(ln.lstrip().startswith(MARKER) for ln in p.read_text().splitlines()))


# --------------------------------------------------------------------------------------------
# The IDE header's example values: what tests compile every kernel source with
# --------------------------------------------------------------------------------------------

EXAMPLE = "// nvrtc example:"
"""In the IDE header, ``// nvrtc example: axpy<float>`` names a template instantiation to test."""


def ide_defines(src: Source) -> dict[str, object]:
    """The example values of the IDE header as ``defines``: ``using X = T;`` -> ``"T"``,
    ``constexpr int N = 4;`` -> ``4`` (bool, int and float literals)."""
    defines: dict[str, object] = {}
    code = _strip_comments(src.header)
    for alias, ctype in re.findall(r"^\s*using\s+(\w+)\s*=\s*([^;]+);", code, re.M):
        defines[alias] = ctype.strip()
    for name, value in re.findall(r"^\s*(?:static\s+)?constexpr\s+[\w: ]+?\s+(\w+)\s*=\s*"
                                  r"([^;]+);", code, re.M):
        value = value.strip()
        if value in ("true", "false"):
            defines[name] = value == "true"
        elif re.fullmatch(r"-?\d+", value):
            defines[name] = int(value)
        elif re.fullmatch(r"-?[\d.]+(e-?\d+)?f?", value):
            defines[name] = float(value.rstrip("f"))
        else:
            raise ValueError(f"{src.display_name}: cannot turn {name} = {value} into a define")
    return defines


def examples(path: str | os.PathLike) -> list[tuple[str | None, dict[str, object]]]:
    """``(kernel name, defines)`` pairs that exercise a kernel file with its IDE values: every
    non-template ``__global__`` function, every ``// nvrtc example:`` line, and None (the whole
    program) when the file has template kernels and no example line for them."""
    src = read_source(Path(path))
    defines = ide_defines(src)
    code = _strip_comments(src.body)
    templates = set(re.findall(r"template\s*<[^{;]*?>\s*__global__[^;{(]*?\b(\w+)\s*\(", code))
    names: list[str | None] = [n for n in _global_functions(src.body) if n not in templates]
    listed = [ln.split(EXAMPLE, 1)[1].strip() for ln in src.header.splitlines()
              if EXAMPLE in ln]
    names += listed
    if templates - {n.split("<", 1)[0].strip() for n in listed}:
        names.append(None)
    return [(name, defines) for name in dict.fromkeys(names)]
