"""Kernel sources: the marker split, the generated header, and the IDE header's example values.

A kernel source is an ordinary ``.cu`` file in ``kernels/`` that an editor can highlight. Above a
marker line sits a header *for the IDE* (includes and example values); below it, the kernel. At
compile time the part above the marker is replaced by a header generated from Python values (its
``#include`` lines are kept), and a ``#line`` directive keeps error line numbers pointing into
the file.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from course_utils import env

MARKER = "// ==== kernel"
"""A line starting with this separates the IDE header (above) from the kernel (below)."""

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


def global_functions(text: str) -> list[str]:
    code = strip_comments(text)
    return re.findall(r"__global__[^;{(]*?\b([A-Za-z_]\w*)\s*\(", code)


def strip_comments(text: str) -> str:
    """The code without comments and launch attributes (``__launch_bounds__(...)``)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"\b__(launch_bounds|cluster_dims|maxnreg|grid_constant)__\s*(\([^)]*\))?",
                  " ", text)


def kernel_sources(root: str | os.PathLike | None = None) -> list[Path]:
    """Every NVRTC kernel source under ``kernels/``: the ``.cu`` files with the marker line."""
    root = Path(root or env.ROOT / "kernels")
    return sorted(p for p in root.rglob("*.cu")
                  if any(ln.lstrip().startswith(MARKER) for ln in p.read_text().splitlines()))


EXAMPLE = "// nvrtc example:"
"""In the IDE header, ``// nvrtc example: axpy<float>`` names a template instantiation to test."""


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def local_includes(src: Source) -> list[Path]:
    """The headers a kernel file includes with quotes from its own folder (``#include
    "hopper.cuh"``), and the ones they include in turn. The compiler puts that folder on NVRTC's
    include path and counts these files' text in the cache key, so editing one recompiles.
    Include them below the marker: the generated header's definitions come first."""
    if src.path is None:
        return []
    found: list[Path] = []
    texts = [src.header + src.body]
    while texts:
        for name in _LOCAL_INCLUDE.findall(strip_comments(texts.pop())):
            path = src.path.parent / name
            if path.is_file() and path not in found:
                found.append(path)
                texts.append(path.read_text())
    return found


ARCH_LINE = "// nvrtc arch:"
"""In the IDE header, ``// nvrtc arch: sm_90a`` names the one architecture a file compiles for
(it uses arch-specific instructions, such as Hopper's ``wgmma``)."""


def required_arch(path: str | os.PathLike) -> str | None:
    """The architecture a kernel file's ``// nvrtc arch:`` line names, or None (any)."""
    src = read_source(Path(path))
    found = [ln.split(ARCH_LINE, 1)[1].strip() for ln in src.header.splitlines()
             if ARCH_LINE in ln]
    return found[0] if found else None


def ide_defines(src: Source) -> dict[str, object]:
    """The example values of the IDE header as ``defines``: ``using X = T;`` -> ``"T"``,
    ``constexpr int N = 4;`` -> ``4`` (bool, int and float literals)."""
    defines: dict[str, object] = {}
    code = strip_comments(src.header)
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
    code = strip_comments(src.body)
    templates = set(re.findall(r"template\s*<[^{;]*?>\s*__global__[^;{(]*?\b(\w+)\s*\(", code))
    names: list[str | None] = [n for n in global_functions(src.body) if n not in templates]
    listed = [ln.split(EXAMPLE, 1)[1].strip() for ln in src.header.splitlines()
              if EXAMPLE in ln]
    names += listed
    if templates - {n.split("<", 1)[0].strip() for n in listed}:
        names.append(None)
    return [(name, defines) for name in dict.fromkeys(names)]
