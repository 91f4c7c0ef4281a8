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
  a wrong count or type is a Python ``TypeError``, not a crashed process. The list is read from
  the source once per loaded kernel; a launch only checks and packs values (a few microseconds),
  and ``kernel.launcher(grid=..., block=...)`` checks a launch shape once for many launches.

The package, by responsibility (import from ``course_utils.nvrtc``; the names below are its API):

* :mod:`~course_utils.nvrtc.source`: reading a ``.cu`` file, the marker split, the generated
  header, the IDE header's example values;
* :mod:`~course_utils.nvrtc.compiler`: compiling (:func:`compile`, :class:`CompileError`,
  :func:`compile_in_threads`) and what this NVRTC can do;
* :mod:`~course_utils.nvrtc.compiled`: what a compile gives back (:class:`Compiled`);
* :mod:`~course_utils.nvrtc.cache`: the memory and disk caches;
* :mod:`~course_utils.nvrtc.launch`: loading and launching (:func:`load`, :class:`Kernel`);
* :mod:`~course_utils.nvrtc.torch_compat`: PyTorch's own, private NVRTC path
  (``torch.cuda._compile_kernel``) on every torch that has it.
"""

from course_utils.cuda_libs import nvrtc_library_path as library_path
from course_utils.nvrtc import cache, compiler, launch, source, torch_compat
from course_utils.nvrtc.arguments import ArgPacker, Param, check_args, parameters
from course_utils.nvrtc.cache import cache_dir, clear_memory_cache, use_cache_dir
from course_utils.nvrtc.compiled import Compiled
from course_utils.nvrtc.compiler import (
    CACHE_FORMAT,
    DEFAULT_ARCH,
    DEFAULT_OPTIONS,
    CompileError,
    compile,
    compile_in_threads,
    include_dirs,
    normalize_arch,
    supported_archs,
    unavailable_reason,
    version,
    version_string,
)
from course_utils.nvrtc.launch import (
    Kernel,
    Launcher,
    NoGPUError,
    Prepared,
    device_capability,
    device_properties,
    kernel,
    load,
)
from course_utils.nvrtc.source import (
    ARCH_LINE,
    DTYPE_CTYPES,
    EXAMPLE,
    MARKER,
    Source,
    assemble,
    examples,
    generate_header,
    ide_defines,
    kernel_sources,
    local_includes,
    read_source,
    required_arch,
)

__all__ = [
    "ARCH_LINE", "CACHE_FORMAT", "DEFAULT_ARCH", "DEFAULT_OPTIONS", "DTYPE_CTYPES", "EXAMPLE",
    "MARKER", "local_includes", "required_arch",
    "ArgPacker", "CompileError", "Compiled", "Kernel", "Launcher", "NoGPUError", "Param",
    "Prepared", "Source",
    "assemble", "cache", "cache_dir", "check_args", "clear_memory_cache", "compile",
    "compile_in_threads", "compiler",
    "device_capability", "device_properties", "examples", "generate_header", "ide_defines",
    "include_dirs", "kernel", "kernel_sources", "launch", "library_path", "load", "normalize_arch",
    "parameters", "read_source", "source", "supported_archs", "torch_compat", "unavailable_reason",
    "use_cache_dir", "version", "version_string",
]
