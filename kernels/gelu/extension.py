"""The CUDA GeLU extension (``gelu.cu`` + ``gelu_binding.cpp``), built two ways from the same files.

* :func:`build_setup`: the standard way, ``python setup.py build_ext`` with ``CUDAExtension``,
  into ``var/build/gelu_setup``;
* :func:`build_inline`: ``load_inline`` through :func:`course_utils.cuda_ext.build`, into
  ``var/build/gelu_cuda_inline``.

Both go through the course's one build path, :mod:`course_utils.cuda_ext` (a lock per build
directory, cold builds in private directories), and both are cached: a second call with unchanged
sources only imports the library, so the notebook and the tests share one compile. The cold build
time is written next to the library when it is compiled
(:func:`course_utils.cuda_ext.cold_build` reads it), so a later (cached) call can still say how
long compiling took, and when.

The registry's ``gelu/cuda[naive]`` and ``gelu/cuda[vectorized]`` build lazily, on first call,
through :func:`build_inline`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from course_utils import cuda_ext
from course_utils.sass import cuda_tool  # noqa: F401  (cuobjdump, nvdisasm: one lookup)
from kernels.gelu.op import FLOAT_DTYPES
from kernels.registry import register

SOURCE_DIR = Path(__file__).resolve().parent
CU_FILE = SOURCE_DIR / "gelu.cu"
CPP_FILE = SOURCE_DIR / "gelu_binding.cpp"
SETUP_FILE = SOURCE_DIR / "setup.py"
SETUP_NAME = "gelu_cuda_setup"  # the module name in setup.py
SETUP_DIR = "gelu_setup"  # var/build/gelu_setup
INLINE_NAME = "gelu_cuda_inline"


def build_setup(fresh: bool = False) -> cuda_ext.Build:
    """``python setup.py build_ext`` into ``var/build/gelu_setup``, timed; import the module.

    Skips the compile when the library is newer than ``gelu.cu``, ``gelu_binding.cpp`` and
    ``setup.py``; ``fresh=True`` compiles in a private directory (a cold build).
    """
    return cuda_ext.build_setup(SETUP_NAME, SETUP_FILE, [CU_FILE, CPP_FILE], fresh=fresh,
                                directory_name=SETUP_DIR)


def build_inline(fresh: bool = False, verbose: bool = False) -> cuda_ext.Build:
    """The same two source files through ``load_inline`` (:func:`course_utils.cuda_ext.build`).

    As they are (``no_implicit_headers``): each includes what it needs, as ``setup.py`` compiles
    them, where ``load_inline`` would put ``torch/types.h`` above ``gelu.cu`` (measured on 2 CPUs,
    torch 2.14: 5,314 headers instead of 1,385, nvcc's CPU time 34 s instead of 19 s)."""
    return cuda_ext.build(INLINE_NAME, cpp_sources=[CPP_FILE.read_text()],
                          cuda_sources=[CU_FILE.read_text()], fresh=fresh, verbose=verbose,
                          no_implicit_headers=True)


def library_path(result: cuda_ext.Build) -> Path:
    """The shared library a build produced (for ``cuobjdump``)."""
    return Path(result.module.__file__)


def machine_code(result: cuda_ext.Build, what: str = "sass") -> str:
    """``cuobjdump`` of the built library: ``"sass"``, ``"ptx"`` or ``"resources"`` (registers)."""
    cuobjdump = cuda_tool("cuobjdump")
    if cuobjdump is None:
        raise RuntimeError("cuobjdump not found (CUDA toolkit or the triton package ship it)")
    flag = {"sass": "-sass", "ptx": "-ptx", "resources": "--dump-resource-usage"}[what]
    done = subprocess.run([cuobjdump, flag, str(library_path(result))], capture_output=True,
                          text=True, check=True)
    return done.stdout


def check_launch(threads: int = 0, unroll: int = 0, blocks_per_sm: int = 0) -> None:
    """Raise ``ValueError`` naming the argument unless ``gelu_vectorized`` accepts the launch
    configuration (0 means the default). The C++ wrapper checks the same with ``TORCH_CHECK``;
    checking here first keeps a bad configuration from ever reaching the extension."""
    if not (threads == 0 or (threads > 0 and threads % 32 == 0 and threads <= 1024)):
        raise ValueError(f"gelu_vectorized: threads expected 0 (default) or a multiple of 32 "
                         f"up to 1024, got {threads}")
    if unroll not in (0, 1, 2, 4):
        raise ValueError(f"gelu_vectorized: unroll expected 0 (default), 1, 2 or 4, got {unroll}")
    if blocks_per_sm < 0:
        raise ValueError(f"gelu_vectorized: blocks_per_sm expected >= 0 (0: no cap), "
                         f"got {blocks_per_sm}")


def describe_kernel(mangled: str) -> tuple[str, str, int]:
    """(kind, dtype, unroll) of a mangled kernel name from ``cuobjdump``.

    ``..gelu_vectorized_kernelIfLi4EE..`` is ``gelu_vectorized_kernel<float, 4>``: ``f`` float,
    ``6__half`` half, ``13__nv_bfloat16`` bfloat16, ``Li4E`` the int template argument 4.
    """
    kind = "vectorized" if "gelu_vectorized_kernel" in mangled else "naive"
    dtype = ("bfloat16" if "__nv_bfloat16" in mangled else
             "float16" if "__half" in mangled else "float32")
    unroll = re.search(r"Li(\d+)E", mangled)
    return kind, dtype, int(unroll.group(1)) if unroll else 1


# -- registry entries ------------------------------------------------------------------------


def _kernel(name: str):
    def build():
        fn = getattr(build_inline().module, name)
        return fn

    return build


_COMMON = dict(dtypes=FLOAT_DTYPES, devices=("cuda",), needs=("cuda", "nvcc"), contiguous=True)

naive = register("gelu", "cuda", "naive", build=_kernel("gelu_naive"),
                 description="CUDA: one element per thread (gelu.cu)",
                 meta={"threads": 256, "elements_per_thread": 1}, **_COMMON)
vectorized = register("gelu", "cuda", "vectorized", build=_kernel("gelu_vectorized"),
                      description="CUDA: 16-byte loads/stores, grid-stride loop (gelu.cu)",
                      meta={"threads": 128, "vectors_per_thread": 2, "bytes_per_access": 16},
                      **_COMMON)
