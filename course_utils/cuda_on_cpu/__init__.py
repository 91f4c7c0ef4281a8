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
uses them gets :class:`Unsupported` (the exercises of lessons 16-19 stay "cannot check here").
Speed is not measured: a CPU running one thread at a time says nothing about a GPU's time.
The scheduler runs one block at a time, so a kernel that waits for another block (a spin on a
flag) never ends: it is stopped after ``limit`` loads and stores.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.cuda_on_cpu.compile import (  # noqa: F401 (the errors: cuda_on_cpu's)
    C_TYPES,
    CompileError,
    Param,
    Unsupported,
    build,
    shared_arrays,
    signature,
)
from course_utils.cuda_on_cpu.faults import describe

HERE = Path(__file__).resolve().parent
ORDERS = ("lowest thread first", "highest thread first", "shuffled")
SPACES = ("global", "shared", "shared", "constant")
OPS = ("load", "store", "atomic")
RACE_WATCH_BYTES = 64 << 20  # buffers larger than this are not watched for races (memory)
DEFAULT_LIMIT = 50_000_000  # loads and stores in one launch before it is called endless
DEFAULT_SECONDS = 30.0  # and seconds (a loop with no load or store is stopped by the clock)

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
                 seconds: float = DEFAULT_SECONDS, defines: dict | None = None,
                 bounds: bool = False):
        if reason := unavailable_reason():
            raise Unsupported(reason)
        self.name, self.source, self.limit, self.seconds = name, source, limit, seconds
        self.path, self.params = build(source, name, defines, bounds)
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
        self._shared = shared_arrays(self.path)
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
           defines: dict | None = None, bounds: bool = False, **_ignored) -> Kernel:
    """Kernel ``name`` of CUDA ``source``, compiled to run on the CPU (keyword arguments of
    :func:`course_utils.nvrtc.kernel`: ``defines`` fills a kernel file's generated header,
    others such as ``verbose`` are accepted and ignored). ``bounds``: an index past the end of
    an array of known size (a thread's own, a ``__shared__`` one) is a fault of kind "crash"
    (SIGILL) at its line, instead of an access to whatever lies beside the array."""
    return Kernel(source, name, limit, seconds, defines, bounds)


def reserved(numel: int):
    """Two float32 CPU tensors of ``numel`` elements, reserved with MAP_NORESERVE (no page
    committed until it is touched; reading an untouched one gives 0) and 8 GiB apart, so that
    an int32 element offset from one (at most 2^31 elements, 8 GiB, either way) never lands in
    the other: the operands of a problem past 2^31 elements of which only some blocks run
    (``blocks=``). An OSError where the system refuses the reservation (strict overcommit)."""
    import mmap

    import torch

    gap = 4 << 31
    # MAP_NORESERVE is 0x4000 on Linux x86-64 and arm64; Python names it from 3.12 on
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
    memory = mmap.mmap(-1, 2 * 4 * numel + gap, flags=flags)
    x = torch.frombuffer(memory, dtype=torch.float32, count=numel)
    y = torch.frombuffer(memory, dtype=torch.float32, count=numel, offset=4 * numel + gap)
    return x, y  # (each keeps the mapping alive; it is unmapped when both are gone)


__all__ = ["CompileError", "Kernel", "KernelFault", "Launch", "Unsupported", "kernel",
           "reserved", "unavailable_reason"]
