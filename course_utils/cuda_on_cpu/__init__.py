"""Run a CUDA kernel on the CPU, checked: for the students who have no GPU.

A kernel of the first CUDA lessons (indices, bounds, shared memory, barriers, warp shuffles,
atomics, vector loads) means the same on a CPU if the CPU runs it the way a GPU would: every
block, every thread of a block, the barriers and the warps' collectives. This module compiles
the kernel with the host compiler against :file:`device.h` (CUDA's device vocabulary) and runs
its grid with :file:`runtime.cpp`::

    from course_utils import cuda_on_cpu
    kernel = cuda_on_cpu.kernel(SOURCE, "transpose")        # the same call as nvrtc.kernel
    kernel(x, y, rows, cols, grid=(4, 4), block=(32, 8))     # x, y: CPU tensors
    kernel.launches[-1].metrics                              # sectors, wavefronts: Nsight's names
    kernel(x, y, rows, cols, grid=(257, 32768), block=(32, 8),
           blocks=[(0, 0), (0, 32767)])                      # only these blocks of the grid

and says where a GPU would have gone wrong, naming the thread, the buffer and the line
(:class:`KernelFault`): a load or store outside every buffer of the launch (one element past
the end too, and a vector load that only partly overlaps), a float4 at an address that is not a
multiple of 16, a store into a ``const`` input, two threads touching one word with no barrier
between them (a missing ``__syncthreads`` is an error even when the order happened to work), a
warp collective some lane of its mask never reaches, threads waiting for each other forever.
It also counts, per instruction, what a warp's 32 addresses cost: 32-byte sectors in global
memory, bank wavefronts in shared memory (:class:`Launch`), the quantities Nsight Compute
reports on a GPU.

**How.** Before this, two existing ways were tried on paper: HIP-CPU (ROCm's header-only
runtime: HIP, not CUDA, unmaintained since 2022, not on PyPI, and it checks nothing) and the
CUDA simulator of Numba (Python kernels, not CUDA C). Neither tells a student *why* a kernel is
wrong. What is used instead is the host compiler's ThreadSanitizer instrumentation
(``-fsanitize=thread``): it calls ``__tsan_read4(address)`` before every 4-byte load of the
student's code, and so on for each size. The course does not link ThreadSanitizer's own
runtime; :file:`runtime.cpp` implements those calls as the checks above. Threads are
coroutines (``ucontext``), run in more than one order (lowest index first, highest first,
shuffled with a switch at random loads and stores), so an answer that works only in one order
of threads is caught twice: by its values and by the race check. ``__activemask()`` promises no
convergence, and is run that way: in the ordered runs it returns the lanes of the warp that
reach the same call together (a converged warp), in the shuffled run only the calling lane (a
lane that independent thread scheduling runs alone), so a warp sum under ``__activemask()``
reads a lane its mask does not name, and is told so.

**A grid too large to run whole.** ``blocks=`` names the blocks to run (the others are skipped):
a kernel over a matrix past 2^31 elements, reserved with ``mmap(MAP_NORESERVE)`` rather than
allocated, runs on its first and last rows only, and only the pages those blocks touch are ever
committed; an offset computed in 32 bits wraps there and lands outside the tensor, which the
bounds check names.

**What it cannot run.** Inline PTX (``asm``), tensor-core instructions, TMA, ``wgmma``,
mbarriers, bfloat16 and fp8 types (``__half`` runs, as the compiler's ``_Float16``), templates as
kernels, cooperative groups: a kernel that
uses them gets :class:`Unsupported` (the exercises of lessons 15-17 stay "cannot check here").
Speed is not measured: a CPU running one thread at a time says nothing about a GPU's time.
The scheduler runs one block at a time, so a kernel that waits for another block (a spin on a
flag) never ends: it is stopped after ``limit`` loads and stores.
"""

from __future__ import annotations

import ctypes
import hashlib
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import env
from course_utils.cuda_on_cpu.faults import describe

HERE = Path(__file__).resolve().parent
ORDERS = ("lowest thread first", "highest thread first", "shuffled")
SPACES = ("global", "shared", "shared", "constant")
OPS = ("load", "store", "atomic")
RACE_WATCH_BYTES = 64 << 20  # buffers larger than this are not watched for races (memory)
DEFAULT_LIMIT = 50_000_000  # loads and stores in one launch before it is called endless
DEFAULT_SECONDS = 30.0  # and seconds (a loop with no load or store is stopped by the clock)

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


class KernelFault(RuntimeError):
    """The launch stopped where a GPU would have gone wrong; ``kind`` names the error
    ("outside", "misaligned", "race", "deadlock", ...), the message says where and why."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def unavailable_reason() -> str | None:
    """Why kernels cannot run on this CPU (None: they can)."""
    if not sys.platform.startswith("linux"):
        return f"the CPU runner needs Linux (ucontext and ELF sections), this is {sys.platform}"
    for tool in ("g++", "objdump", "addr2line"):
        if shutil.which(tool) is None:
            return f"the CPU runner needs {tool} (g++ and binutils: apt install g++)"
    return None


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


def build(source: str, name: str, defines: dict | None = None) -> tuple[Path, list[Param]]:
    """The shared library running kernel ``name`` of ``source`` (cached by its text)."""
    source = assembled(source, defines)
    params = signature(source, name)
    text = host_source(source, name, params)
    key = hashlib.sha256((text + (HERE / "device.h").read_text() + name).encode())
    runtime = _runtime_object()
    folder = env.var_dir("cuda_on_cpu")
    lib = folder / f"{name}-{key.hexdigest()[:16]}-{runtime.stem}.so"
    if not lib.exists():
        stem = f"{name}-{key.hexdigest()[:16]}-{random.randrange(1 << 30)}"
        cpp, obj, tmp = (folder / (stem + s) for s in (".cpp", ".o", ".tmp.so"))
        cpp.write_text(text)
        try:
            done = subprocess.run(["g++", *FLAGS, *INSTRUMENT, "-c", str(cpp), "-o", str(obj)],
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


def _shared_arrays(lib: Path) -> list[tuple[str, int, int]]:
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


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------


class _Error(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("op", ctypes.c_int), ("size", ctypes.c_int),
                ("region", ctypes.c_int), ("other_op", ctypes.c_int),
                ("offset", ctypes.c_longlong), ("address", ctypes.c_ulonglong),
                ("tid", ctypes.c_uint * 3), ("bid", ctypes.c_uint * 3),
                ("other_tid", ctypes.c_uint * 3), ("other_bid", ctypes.c_uint * 3),
                ("pc", ctypes.c_void_p), ("other_pc", ctypes.c_void_p),
                ("text", ctypes.c_char * 256)]


class _Stat(ctypes.Structure):
    _fields_ = [("pc", ctypes.c_void_p), ("op", ctypes.c_int), ("space", ctypes.c_int),
                ("size", ctypes.c_int), ("requests", ctypes.c_ulonglong),
                ("sectors", ctypes.c_ulonglong), ("wavefronts", ctypes.c_ulonglong),
                ("threads", ctypes.c_ulonglong), ("bytes", ctypes.c_ulonglong)]


@dataclass
class Access:
    """One load or store instruction of a launch, summed over the warps that ran it."""

    line: int  # in the student's source (0: not known)
    op: str  # "load" or "store"
    space: str  # "global" or "shared"
    size: int  # bytes a thread moves
    requests: int  # warp executions
    threads: int  # thread executions
    sectors: int  # global: 32-byte sectors moved
    wavefronts: int  # shared: bank wavefronts

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal_wavefronts(self) -> int:
        return self.requests * max(1, self.size // 4)


@dataclass
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    order: str
    accesses: list[Access] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, float]:
        """The launch's memory counters under Nsight Compute's names (what
        :mod:`exercises.access_checks` reads from a GPU's profile)."""
        m: dict[str, float] = {}

        def add(key: str, value: float) -> None:
            m[key] = m.get(key, 0.0) + float(value)

        for op in ("ld", "st"):
            for key in (f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum",
                        f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum",
                        f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum",
                        f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum",
                        f"smsp__sass_inst_executed_op_shared_{op}.sum"):
                m[key] = 0.0
        m["threads: Global Load"] = m["threads: Global Store"] = 0.0
        for a in self.accesses:
            op = "ld" if a.op == "load" else "st"
            if a.space == "global":
                add(f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum", a.requests)
                add(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum", a.sectors)
                add("threads: Global " + ("Load" if op == "ld" else "Store"), a.threads)
            else:
                add(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum", a.wavefronts)
                add(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum",
                    a.wavefronts - a.ideal_wavefronts)
                add(f"smsp__sass_inst_executed_op_shared_{op}.sum", a.requests)
        return m


class Kernel:
    """A kernel compiled for the CPU: ``kernel(*args, grid=..., block=..., shared_mem=0)``
    as :func:`course_utils.nvrtc.kernel`'s, with CPU tensors. Each call runs in the next of
    :data:`ORDERS` (or ``order=``); :attr:`launches` keeps what each launch's accesses cost."""

    def __init__(self, source: str, name: str, limit: int = DEFAULT_LIMIT,
                 seconds: float = DEFAULT_SECONDS, defines: dict | None = None):
        if reason := unavailable_reason():
            raise Unsupported(reason)
        self.name, self.source, self.limit, self.seconds = name, source, limit, seconds
        self.path, self.params = build(source, name, defines)
        self._lib = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_LOCAL)
        self._lib.cc_launch.restype = ctypes.c_int
        self._lib.cc_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_uint] * 6,
                                        ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_int, ctypes.c_ulonglong,
                                        ctypes.c_ulonglong, ctypes.c_double]
        self._lib.cc_add_region.argtypes = [ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_int,
                                            ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self._lib.cc_only_blocks.argtypes = [ctypes.POINTER(ctypes.c_longlong), ctypes.c_int]
        self._lib.cc_stat.restype = ctypes.POINTER(_Stat)
        self._lib.cc_base.restype = ctypes.c_void_p
        self._error = _Error.in_dll(self._lib, "cc_error")
        self._shared = _shared_arrays(self.path)
        self._lines: dict[int, int] = {}
        self._calls = 0
        self.launches: list[Launch] = []

    # ---- the call ----------------------------------------------------------------------------
    def __call__(self, *args, grid=1, block=1, shared_mem: int = 0, stream=None,
                 order: int | None = None, seed: int = 0, blocks=None):
        """One launch; ``blocks``: the (x, y, z) indices of the only blocks to run (a grid too
        large to run whole; each must lie inside ``grid``), or None for every block."""
        import torch

        from course_utils.nvrtc.launch import launch_shape

        grid, block = launch_shape(grid, block, shared_mem)
        only = self._only_blocks(blocks, grid)
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments "
                            f"({', '.join(p.name for p in self.params)}), got {len(args)}")
        lib = self._lib
        lib.cc_reset()
        values, names = [], []
        for i, (p, a) in enumerate(zip(self.params, args, strict=True)):
            names.append(p.name)
            if p.pointer:
                if a is None:
                    values.append(ctypes.c_void_p(0))
                    continue
                if not isinstance(a, torch.Tensor) or a.device.type != "cpu":
                    raise TypeError(f"{p.name} expected a CPU tensor, got "
                                    f"{getattr(a, 'device', type(a).__name__)}")
                if a.numel() and not a.is_contiguous():
                    raise ValueError(f"{p.name} expected a contiguous tensor (the kernel "
                                     "indexes it as one row-major block)")
                nbytes = a.numel() * a.element_size()
                lib.cc_add_region(a.data_ptr(), nbytes, i, 0, int(p.const),
                                  int(nbytes <= RACE_WATCH_BYTES))
                values.append(ctypes.c_void_p(a.data_ptr()))
            else:
                if isinstance(a, torch.Tensor):
                    raise TypeError(f"{p.name} is a {p.type}: pass a Python number, not a "
                                    "tensor")
                values.append(C_TYPES[p.element](a))
        for j, (name, offset, size) in enumerate(self._shared):
            names.append(name)
            lib.cc_add_region(offset, size, len(self.params) + j, 1, 0, 1)
        dynamic_id = len(names)
        names.append("the dynamic shared memory")
        pointers = (ctypes.c_void_p * max(1, len(values)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        which = self._calls % len(ORDERS) if order is None else order
        self._calls += 1
        if only is not None:
            lib.cc_only_blocks((ctypes.c_longlong * len(only))(*only), len(only))
        kind = lib.cc_launch(ctypes.cast(lib.cc_entry, ctypes.c_void_p), pointers, *grid, *block,
                             shared_mem, dynamic_id, which, which, int(which == 2),
                             seed or self._calls, self.limit, self.seconds)
        launch = Launch(grid, block, ORDERS[which])
        stats = [lib.cc_stat(i).contents for i in range(lib.cc_stat_count())]
        lines = self._source_lines([s.pc for s in stats] + [self._error.pc, self._error.other_pc])
        for s in stats:
            launch.accesses.append(Access(lines.get(s.pc or 0, 0), OPS[s.op], SPACES[s.space],
                                          s.size, s.requests, s.threads, s.sectors,
                                          s.wavefronts))
        launch.accesses.sort(key=lambda a: (a.line, a.op))
        self.launches.append(launch)
        if kind:
            raise KernelFault(*describe(self, self._error, names, lines, grid, block, args))

    @staticmethod
    def _only_blocks(blocks, grid) -> list[int] | None:
        """The linear indices (x fastest) of ``blocks`` in ``grid``, None for every block."""
        if blocks is None:
            return None
        linear = []
        for b in blocks:
            x, y, z = (tuple(b) + (0, 0))[:3]
            if not all(0 <= v < n for v, n in zip((x, y, z), grid, strict=True)):
                raise ValueError(f"block {(x, y, z)} is outside the grid {tuple(grid)}")
            linear.append(x + grid[0] * (y + grid[1] * z))
        if not linear:
            raise ValueError("blocks= names no block (leave it out to run every block)")
        return linear

    # ---- source lines ------------------------------------------------------------------------
    def _source_lines(self, pcs) -> dict[int, int]:
        """pc -> line of the student's source (0 where the pc is not in it)."""
        base = self._lib.cc_base() or 0
        todo = sorted({pc for pc in pcs if pc and pc not in self._lines})
        if todo:
            done = subprocess.run(["addr2line", "-e", str(self.path),
                                   *[hex(pc - base - 1) for pc in todo]],
                                  capture_output=True, text=True).stdout.splitlines()
            for pc, where in zip(todo, done, strict=False):
                file, _, line = where.rpartition(":")
                number = line.split()[0] if line else "0"
                ours = file.endswith("your kernel") and number.isdigit()
                self._lines[pc] = int(number) if ours else 0
        return {pc: self._lines.get(pc, 0) for pc in pcs if pc}

    def line_text(self, line: int) -> str:
        lines = self.source.splitlines()
        return lines[line - 1].strip() if 1 <= line <= len(lines) else ""


def kernel(source: str, name: str, limit: int = DEFAULT_LIMIT, seconds: float = DEFAULT_SECONDS,
           defines: dict | None = None, **_ignored) -> Kernel:
    """Kernel ``name`` of CUDA ``source``, compiled to run on the CPU (keyword arguments of
    :func:`course_utils.nvrtc.kernel`: ``defines`` fills a kernel file's generated header,
    others such as ``verbose`` are accepted and ignored)."""
    return Kernel(source, name, limit, seconds, defines)


__all__ = ["CompileError", "Kernel", "KernelFault", "Launch", "Unsupported", "kernel",
           "unavailable_reason"]
