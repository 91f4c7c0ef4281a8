"""A kernel's arguments: its parameter list read from the source, and Python values checked
against it and packed into what ``cuLaunchKernel`` takes (course_utils.nvrtc.launch launches).

A wrong count or type is a Python ``TypeError`` naming the argument, before anything reaches
the GPU; a good launch takes the quick path (:class:`ArgPacker`: reused ctypes slots, no
per-argument explanation)."""

from __future__ import annotations

import ctypes
import dataclasses
import re
import threading
from collections.abc import Sequence

import torch

from course_utils.nvrtc.compiled import Compiled
from course_utils.nvrtc.source import DTYPE_CTYPES, strip_comments

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
    code = strip_comments(compiled.program)
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


_BY_VALUE = (ctypes._SimpleCData, ctypes.Structure)  # the escape hatch of check_args


class ArgPacker:
    """Packs a launch's arguments into the array of pointers ``cuLaunchKernel`` takes.

    What depends only on the parameter list is decided once, here: one small check-and-store
    function per parameter, and (per thread, so that two threads can launch at once) one
    ctypes value per parameter with the pointer array already pointing at them. A launch then
    stores each argument into its slot; nothing is parsed or allocated. Any argument the quick
    checks do not accept goes through :func:`check_args`, which raises the ``TypeError`` that
    names it (or accepts it: an ``IntEnum``, say, and the launch goes on from its values).
    A ``ctypes`` value or ``ctypes.Structure`` is passed as it is (by value), as in check_args.
    """

    def __init__(self, name: str, params: Sequence[Param], device: int | torch.device):
        self.name, self.params, self.device = name, list(params), device
        where = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        self._stores = [_store_for(param, where) for param in self.params]
        self._local = threading.local()

    def _buffers(self):
        try:
            return self._local.buffers
        except AttributeError:
            slots = [ctypes.c_void_p() if p.pointer else _SCALARS.get(p.ctype, (ctypes.c_void_p,
                                                                               ""))[0]()
                     for p in self.params]
            addresses = [ctypes.addressof(slot) for slot in slots]
            pointers = (ctypes.c_void_p * max(len(slots), 1))(*addresses)
            self._local.buffers = (slots, addresses, pointers, [])
            return self._local.buffers

    def pack(self, args: Sequence) -> ctypes.Array:
        """The pointer array for ``args``; valid until this thread's next pack. ``args`` must
        stay alive until the launch (a by-value ctypes argument is pointed at, not copied)."""
        if len(args) != len(self._stores):
            check_args(self.name, self.params, args, self.device)  # raises: the count
        slots, addresses, pointers, redirected = self._buffers()
        for i in redirected:  # the last launch pointed these at by-value arguments
            pointers[i] = addresses[i]
        redirected.clear()
        for i, (store, arg) in enumerate(zip(self._stores, args, strict=True)):
            if store(arg, slots[i]):
                continue
            if isinstance(arg, _BY_VALUE):
                pointers[i] = ctypes.addressof(arg)
                redirected.append(i)
                continue
            return self._slow(args)
        return pointers

    def _slow(self, args: Sequence) -> ctypes.Array:
        values = check_args(self.name, self.params, args, self.device)  # raises if wrong
        self._local.kept = values  # alive until this thread's next slow launch
        return (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])


def _store_for(param: Param, device: torch.device):
    """``store(arg, slot) -> bool``: put ``arg`` in ``slot`` if it is what the parameter takes
    in the common case (exactly the type check_args accepts), else False."""
    if param.pointer:
        dtype = None if param.ctype == "void" else param.dtype

        def store(arg, slot):
            if (isinstance(arg, torch.Tensor) and arg.device == device
                    and (dtype is None or arg.dtype == dtype)):
                slot.value = arg.data_ptr()
                return True
            return False

        return store
    if param.ctype not in _SCALARS:
        return lambda arg, slot: False  # only a ctypes value goes here (the escape hatch)
    ctype, kind = _SCALARS[param.ctype]
    if kind == "int":
        low, high = _int_range(ctype)

        def store(arg, slot):
            if type(arg) is int and low <= arg < high:
                slot.value = arg
                return True
            return False

        return store
    accepted = (float, int) if kind == "float" else (bool,)

    def store(arg, slot):
        if type(arg) in accepted:
            slot.value = arg
            return True
        return False

    return store


def _int_range(ctype: type) -> tuple[int, int]:
    bits = ctypes.sizeof(ctype) * 8
    if ctype in (ctypes.c_uint32, ctypes.c_uint64):
        return 0, 2**bits
    return -2**(bits - 1), 2**(bits - 1)


def check_args(name: str, params: Sequence[Param], args: tuple, device: int | torch.device
               ) -> list:
    """The ctypes values for a launch of ``name``: raises TypeError naming the argument when
    the count or a type does not match the parameter list (before anything reaches the GPU).
    ``device``: the kernel's GPU (an index) or device."""
    want = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if len(args) != len(params):
        sig = ", ".join(p.spelled for p in params)
        raise TypeError(f"{name} takes {len(params)} arguments ({sig}), "
                        f"got {len(args)}")
    values = []
    for i, (param, arg) in enumerate(zip(params, args, strict=True)):
        where = f"{name}: argument {i} ({param.spelled})"
        if isinstance(arg, _BY_VALUE):
            # escape hatch: the caller knows best (a ctypes.Structure goes by value, e.g. a
            # TMA descriptor for a `const __grid_constant__ CUtensorMap` parameter)
            values.append(arg)
        elif param.pointer:
            if not isinstance(arg, torch.Tensor):
                raise TypeError(f"{where} expected a CUDA tensor, got "
                                f"{type(arg).__name__}")
            if arg.device != want:
                raise TypeError(f"{where} expected a tensor on {want}, "
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
                low, high = _int_range(ctype)
                if not low <= arg < high:
                    raise TypeError(f"{where}: {arg} does not fit in {param.ctype}")
            values.append(ctype(arg))
    return values
