"""Loading and launching NVRTC-compiled kernels (needs a GPU).

:func:`load` puts a :class:`~course_utils.nvrtc.compiler.Compiled` kernel on a GPU through the
CUDA driver API (``cuModuleLoadData``) and returns a :class:`Kernel`. A launch checks the
arguments against the kernel's parameter list, read from its source, before calling the driver
(:mod:`course_utils.nvrtc.arguments`): a wrong count or type is a Python ``TypeError``, not a
crashed process.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Sequence

import torch

from course_utils import cuda_libs, requirements
from course_utils.nvrtc.arguments import ArgPacker, check_args, parameters
from course_utils.nvrtc.compiled import Compiled
from course_utils.nvrtc.compiler import compile

_lock = threading.Lock()


class NoGPUError(RuntimeError):
    """Loading or launching was asked for on a machine without a usable CUDA GPU."""


class Kernel:
    """A loaded kernel: ``kernel(*args, grid=..., block=..., shared_mem=0, stream=None)``.

    Tensors go to pointer parameters, Python numbers to scalar parameters; both are checked
    against the parameter list before the launch. The list is read from the source once, when
    the kernel is loaded; a launch only checks and packs the values (:class:`ArgPacker`).
    ``kernel.launcher(grid=..., block=...)`` checks the launch shape once too, for a caller that
    launches the same shape many times.
    """

    def __init__(self, compiled: Compiled, device: int):
        self.compiled = compiled
        self.device = device
        self.params = parameters(compiled)
        self._packer = ArgPacker(compiled.name, self.params, device)
        self._module, self._func = _load_function(compiled, device)
        # the ctypes function object, looked up once (its argtypes are declared by cuda_libs)
        self._cu_launch = cuda_libs.driver_library().cuLaunchKernel
        self._shared_configured = 48 * 1024

    def __repr__(self) -> str:
        sig = ", ".join(p.spelled for p in self.params)
        return f"<nvrtc.Kernel {self.compiled.name}({sig}) on cuda:{self.device}>"

    def __call__(self, *args, grid: int | Sequence[int] = 1, block: int | Sequence[int] = 1,
                 shared_mem: int = 0, stream: torch.cuda.Stream | None = None,
                 cluster: int = 1) -> None:
        grid, block = self._shape(grid, block, shared_mem, cluster)
        self._driver_launch(self._packer.pack(args), grid, block, shared_mem, stream, cluster)

    def launcher(self, grid: int | Sequence[int] = 1, block: int | Sequence[int] = 1,
                 shared_mem: int = 0, cluster: int = 1) -> Launcher:
        """This kernel bound to one launch shape, checked now: ``launcher(*args, stream=None)``
        then only checks and packs the arguments. ``cluster`` > 1 launches the blocks in
        clusters of that many along x (Hopper and newer; the grid a multiple of it)."""
        grid, block = self._shape(grid, block, shared_mem, cluster)
        return Launcher(self, grid, block, shared_mem, cluster)

    def _shape(self, grid, block, shared_mem: int, cluster: int):
        """The launch shape checked (and the shared memory opted into): (grid, block)."""
        grid, block = _dims("grid", grid), _dims("block", block)
        _check_shape(grid, block, shared_mem)
        if not isinstance(cluster, int) or cluster < 1 or grid[0] % cluster:
            raise ValueError(f"cluster expected a block count >= 1 that divides the grid's x, "
                             f"got cluster={cluster!r} for grid {grid}")
        if shared_mem > self._shared_configured:
            self.set_shared_memory(shared_mem)
        return grid, block

    def prepare(self, *args, grid: int | Sequence[int] = 1, block: int | Sequence[int] = 1,
                shared_mem: int = 0, cluster: int = 1) -> Prepared:
        """This kernel with its launch shape *and* its arguments checked and packed once:
        ``prepared()`` is one ``cuLaunchKernel``. For a caller that launches one problem many
        times (a registered op called in a loop); ``prepared.set_address``/``set_value``
        change the argument that differs from call to call (a fresh output) without checks."""
        shape = self.launcher(grid, block, shared_mem, cluster)  # the launch shape checked
        # every argument checked, each in a ctypes value of its own (a by-value ctypes argument,
        # a TMA descriptor, is kept itself): the packer's slots are reused by its next launch
        values = check_args(self.compiled.name, self.params, args, self._packer.device)
        return Prepared(self, values, shape.grid, shape.block, shape.shared_mem, cluster)

    @property
    def handle(self) -> ctypes.c_void_p:
        """The driver's ``CUfunction``, for calling the driver yourself."""
        return self._func

    def pack(self, *args) -> ctypes.Array:
        """The checked arguments as the pointer array ``cuLaunchKernel`` takes (valid until this
        kernel packs again on this thread; keep ``args`` alive until the launch)."""
        return self._packer.pack(args)

    def _driver_launch(self, pointers: ctypes.Array, grid: tuple[int, int, int],
                       block: tuple[int, int, int], shared_mem: int,
                       stream: torch.cuda.Stream | None, cluster: int = 1) -> None:
        handle = _raw_stream(self.device) if stream is None else stream.cuda_stream
        if _current_device() == self.device:
            result = self._cu_call(pointers, grid, block, shared_mem, handle, cluster)
        else:  # the function belongs to its device's context: make that one current
            with torch.cuda.device(self.device):
                result = self._cu_call(pointers, grid, block, shared_mem, handle, cluster)
        if result:
            cuda_libs.check_driver(result, f"launching {self.compiled.name}")

    def _cu_call(self, pointers, grid, block, shared_mem, handle, cluster) -> int:
        if cluster == 1:
            return self._cu_launch(self._func, *grid, *block, shared_mem, handle, pointers, None)
        attribute = cuda_libs.LaunchAttribute(cuda_libs.LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        attribute.value[:3] = (cluster, 1, 1)
        config = cuda_libs.LaunchConfig(*grid, *block, shared_mem, handle,
                                        ctypes.pointer(attribute), 1)
        return cuda_libs.driver_library().cuLaunchKernelEx(ctypes.byref(config), self._func,
                                                           pointers, None)

    def set_shared_memory(self, nbytes: int) -> None:
        """Allow ``nbytes`` of dynamic shared memory (> 48 KB needs this opt-in)."""
        limit = device_properties(self.device).shared_memory_per_block_optin
        if nbytes > limit:
            raise ValueError(f"shared_mem={nbytes} bytes exceeds this GPU's per-block limit "
                             f"of {limit} bytes")
        attribute = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        cuda_libs.check_driver(cuda_libs.driver_library().cuFuncSetAttribute(self._func, attribute,
                                                                        nbytes),
                            "setting the dynamic shared memory size")
        self._shared_configured = nbytes


class Launcher:
    """A :class:`Kernel` bound to a checked launch shape (from :meth:`Kernel.launcher`)."""

    def __init__(self, kernel: Kernel, grid: tuple[int, int, int],
                 block: tuple[int, int, int], shared_mem: int, cluster: int = 1):
        self.kernel, self.grid, self.block, self.shared_mem = kernel, grid, block, shared_mem
        self.cluster = cluster

    def __call__(self, *args, stream: torch.cuda.Stream | None = None) -> None:
        self.kernel._driver_launch(self.kernel.pack(*args), self.grid, self.block,
                                   self.shared_mem, stream, self.cluster)

    def __repr__(self) -> str:
        return (f"<launcher of {self.kernel.compiled.name}: grid {self.grid}, "
                f"block {self.block}, shared_mem {self.shared_mem}>")


class Prepared:
    """A launch packed once (:meth:`Kernel.prepare`). ``prepared(stream=None)`` launches it;
    between launches, :meth:`set_address` (a pointer argument) and :meth:`set_value` (a by-value
    ctypes argument) replace one argument, unchecked: the caller has checked the new value's
    kind (a tensor like the first, a descriptor of the same shape). One thread at a time: the
    packed values are shared, so a caller keeps one per thread."""

    def __init__(self, kernel: Kernel, values: list, grid: tuple[int, int, int],
                 block: tuple[int, int, int], shared_mem: int, cluster: int = 1):
        self.kernel, self.grid, self.block, self.shared_mem = kernel, grid, block, shared_mem
        self.cluster = cluster
        self._values = values  # kept alive: the pointer array points into them
        self._pointers = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.addressof(v) for v in values])

    def set_address(self, index: int, address: int) -> None:
        self._values[index].value = address

    def set_value(self, index: int, value: ctypes.Structure | ctypes._SimpleCData) -> None:
        self._values[index] = value
        self._pointers[index] = ctypes.addressof(value)

    def __call__(self, stream: torch.cuda.Stream | None = None) -> None:
        self.kernel._driver_launch(self._pointers, self.grid, self.block, self.shared_mem,
                                   stream, self.cluster)


def launch_shape(grid, block, shared_mem: int = 0) -> tuple[tuple[int, int, int], ...]:
    """(grid, block) as three ints each, checked against CUDA's limits (a ValueError naming
    the argument otherwise); the CPU runner (:mod:`course_utils.cuda_on_cpu`) checks the same."""
    grid, block = _dims("grid", grid), _dims("block", block)
    _check_shape(grid, block, shared_mem)
    return grid, block


def _check_shape(grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem) -> None:
    if grid[0] > 2**31 - 1 or max(grid[1:]) > 65535:
        raise ValueError(f"grid expected x < 2^31 and y, z <= 65535, got {grid}")
    if block[0] * block[1] * block[2] > 1024:
        raise ValueError(f"block expected at most 1024 threads, got {block}")
    if not isinstance(shared_mem, int) or shared_mem < 0:
        raise ValueError(f"shared_mem expected a byte count >= 0, got {shared_mem!r}")


def _current_device() -> int:
    """``torch.cuda.current_device()`` without its lazy-init check (a launch comes after the
    kernel was loaded, so CUDA is initialised): a microsecond less per launch."""
    return _GET_DEVICE()


_GET_DEVICE = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def _raw_stream(device: int) -> int:
    """The handle of the device's current stream, as ``torch.cuda.current_stream().cuda_stream``
    gives it, without building a Stream object: torch's own private getter where it has one."""
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if getter is not None:
        return getter(device)
    return torch.cuda.current_stream(device).cuda_stream


@functools.cache
def device_properties(device: int):
    """``torch.cuda.get_device_properties(device)``, read once per device and process."""
    return torch.cuda.get_device_properties(device)


@functools.cache
def device_capability(device: int) -> tuple[int, int]:
    """``torch.cuda.get_device_capability(device)``, read once per device and process."""
    return torch.cuda.get_device_capability(device)


def _load_function(compiled: Compiled, device: int) -> tuple[ctypes.c_void_p, ctypes.c_void_p]:
    """Load the binary into the device's context; (module, function) handles."""
    lib = cuda_libs.driver_library()
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    with torch.cuda.device(device):
        _ensure_context(device)
        cuda_libs.check_driver(lib.cuModuleLoadData(ctypes.byref(module), compiled.binary),
                               f"loading {compiled.name} ({compiled.output} for "
                               f"{compiled.arch})")
        cuda_libs.check_driver(lib.cuModuleGetFunction(ctypes.byref(func), module,
                                                       compiled.lowered_name.encode()),
                               f"finding {compiled.lowered_name}")
    return module, func


def _dims(what: str, value) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise ValueError(f"{what} expected 1-3 positive ints, got {value!r}")
    return (*dims, *(1,) * (3 - len(dims)))


def _ensure_context(device: int) -> None:
    """Make the device's primary context current on this thread (torch creates it lazily)."""
    torch.empty(1, device=f"cuda:{device}")
    ctx = ctypes.c_void_p()
    cuda_libs.check_driver(cuda_libs.driver_library().cuCtxGetCurrent(ctypes.byref(ctx)),
                        "getting the context")
    if not ctx.value:
        torch.cuda.synchronize(device)


_loaded: dict[tuple[str, int], Kernel] = {}


def load(compiled: Compiled, device: int | None = None) -> Kernel:
    """Load a compiled kernel onto a GPU (once per device) and return it, ready to launch."""
    if device is not None and (loaded := _loaded.get((compiled.key, device))) is not None:
        return loaded  # the common case, a dictionary lookup: checked when it was loaded
    if not torch.cuda.is_available():
        raise NoGPUError(f"cannot load {compiled.name}: {'; '.join(requirements.unmet('cuda'))}. "
                         "Compiling works without a GPU: nvrtc.compile(..., arch='sm_90').")
    if not compiled.lowered_name:
        raise ValueError("this program was compiled without a kernel name (name=None): "
                         "compile it with the kernel's name to load it")
    device = torch.cuda.current_device() if device is None else device
    cap = device_capability(device)
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
        raise NoGPUError(f"cannot launch {name}: {'; '.join(requirements.unmet('cuda'))}. "
                         "Compiling works without a GPU: nvrtc.compile(..., arch='sm_90').")
    return load(compile(source, name, **compile_kwargs))

