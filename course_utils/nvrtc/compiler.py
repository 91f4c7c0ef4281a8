"""Compiling with NVRTC: a kernel source and Python values in, PTX or CUBIN out (no GPU needed).

:func:`compile` reads the source (:mod:`course_utils.nvrtc.source`), generates its header,
compiles it for one architecture through NVRTC's C API (``ctypes``; the library is found by
:mod:`course_utils.cuda_libs`) and caches the result in memory and on disk
(:mod:`course_utils.nvrtc.cache`). Errors come back as :class:`CompileError` with NVRTC's log,
its line numbers pointing into the ``.cu`` file. A (re)build prints one line saying why it built.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from course_utils import cuda_libs, env
from course_utils.nvrtc import cache as cache_store
from course_utils.nvrtc.compiled import Compiled
from course_utils.nvrtc.source import (
    Source,
    assemble,
    global_functions,
    local_includes,
    read_source,
)

DEFAULT_ARCH = "sm_90"
DEFAULT_OPTIONS = ("-std=c++17",)
CACHE_FORMAT = 1  # bump when the cache layout or what goes into a key changes
VERBOSE = True  # print one line whenever something is (re)built


class CompileError(RuntimeError):
    """NVRTC rejected the program; ``log`` holds its messages with file-relative line numbers."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def unavailable_reason() -> str | None:
    """None when NVRTC can compile on this machine (no GPU needed); otherwise why not."""
    return cuda_libs.nvrtc_unavailable_reason()


@functools.cache
def version() -> tuple[int, int]:
    """NVRTC's version, e.g. ``(13, 0)``."""
    lib = cuda_libs.nvrtc_library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def version_string() -> str:
    return ".".join(map(str, version()))


def supported_archs() -> list[str]:
    """The ``sm_XY`` targets this NVRTC can compile for."""
    lib = cuda_libs.nvrtc_library()
    count = ctypes.c_int()
    lib.nvrtcGetNumSupportedArchs(ctypes.byref(count))
    archs = (ctypes.c_int * count.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return [f"sm_{a}" for a in archs]


@functools.cache
def include_dirs() -> list[Path]:
    """Include folders added to every compile: CUDA headers and libcu++ (``cuda/std``)."""
    return cuda_libs.include_dirs()


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


def _check_name(src: Source, program: str, name: str) -> None:
    base = name.split("<", 1)[0].strip().removeprefix("&").split("::")[-1]
    if not re.fullmatch(r"[A-Za-z_]\w*", base):
        raise ValueError(f"kernel name {name!r} is not a C++ name (or template-id)")
    kernels = global_functions(program)
    if base not in kernels:
        where = src.display_name
        found = ", ".join(kernels) or "no __global__ function at all"
        raise ValueError(f"kernel {base!r} is not in {where}; its __global__ functions: {found}")


def _nvrtc_call(lib, result: int, what: str) -> None:
    if result != 0:
        raise CompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(result).decode()}")


def _run_nvrtc(program: str, filename: str, name: str, options: list[str],
               output: str) -> tuple[bytes, str, str]:
    """One NVRTC compile: (binary, lowered name, log); CompileError carries the log."""
    lib = cuda_libs.nvrtc_library()
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
    fast = cache_store.fast_key(source, name, defines, arch, output, options, default_options,
                                auto_includes, version_string()) if cache else None
    if (hit := cache_store.fast_get(fast)) is not None:
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
    local = local_includes(src)  # e.g. kernels/matmul/hopper/hopper.cuh beside wgmma.cu
    if local:
        includes.insert(0, f"-I{src.path.parent}")
    all_options = [f"--gpu-architecture={target}", *(DEFAULT_OPTIONS if default_options else ()),
                   *includes, *options]
    parts = {"source": cache_store.digest(src.body, src.display_name),
             "header": cache_store.digest(program[: len(program) - len(src.body)]),
             "options": cache_store.digest(all_options[1:]), "arch": f"{arch} {output}",
             "nvrtc": version_string(), "name": name, "format": CACHE_FORMAT}
    if local:  # (only then: the keys of files without local headers stay as they were)
        parts["local headers"] = cache_store.digest([(p.name, p.read_text()) for p in local])
    key = cache_store.digest(sorted(parts.items()))
    meta = dict(name=name, arch=arch, output=output, source=src, program=program,
                defines=tuple(defines.items()), options=tuple(all_options))

    if cache:
        if (hit := cache_store.memory_get(key)) is not None:
            cache_store.remember(key, fast, hit)
            return dataclasses.replace(hit, seconds=time.perf_counter() - start,
                                       cache="memory hit")
        if (entry := cache_store.disk_read(key)) is not None:
            binary, lowered, log = entry
            compiled = Compiled(lowered_name=lowered, binary=binary, log=log, key=key,
                                seconds=time.perf_counter() - start, cache="disk hit", **meta)
            cache_store.remember(key, fast, compiled)
            return compiled

    why = cache_store.why_rebuilt(src, name, parts) if cache else "cache=False"
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
        cache_store.disk_write(key, compiled, parts)
        cache_store.remember(key, fast, compiled)
    if verbose:
        print(f"nvrtc: built {name or 'the program'} from {src.display_name} for {arch} "
              f"({output}) in {seconds * 1e3:.0f} ms: {why}")
    return compiled


def compile_in_threads(jobs, workers: int | None = None) -> list[Compiled]:
    """Run ``jobs`` (callables of no arguments, each returning a :class:`Compiled`) in parallel
    threads and return their results in order: NVRTC is thread-safe and ctypes lets go of the
    GIL while it compiles, so a lesson's dozens of programs build in a fraction of the time
    (what ``make prepare`` does before a lecture)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda job: job(), jobs))

