"""The add kernel as a PyTorch operator: ``add_op.cpp`` + ``add_op.cu`` built with ``load_inline``.

``add_op.cpp`` registers ``torch.ops.course_add.add`` with ``TORCH_LIBRARY`` and checks the
inputs; ``add_op.cu`` holds the kernel and its launcher. The build goes
through the course's one load_inline path, :func:`course_utils.cuda_ext.build`, with
``is_python_module=False`` (the shared library is loaded for its op registrations; there is no
Python module). A process can load one library per ``TORCH_LIBRARY`` namespace: a second,
freshly built copy would fail to register ``course_add`` again, so cold builds for timing run
in a subprocess (:func:`kernels.add.bench.time_load_inline`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from course_utils import cuda_ext
from kernels.add import DTYPES
from kernels.registry import register

SOURCE = Path(__file__).with_name("add_op.cu")  # the kernel and its launcher (nvcc)
HOST_SOURCE = Path(__file__).with_name("add_op.cpp")  # the op and its checks (host compiler)
NAME = "course_add_op"  # the build directory is var/build/course_add_op


def build(fresh: bool = False, verbose: bool = False) -> cuda_ext.Build:
    """Build (or find already built) and load the op library; ``fresh=True``: a cold build."""
    return cuda_ext.build(NAME, cpp_sources=HOST_SOURCE.read_text(),
                          cuda_sources=SOURCE.read_text(),
                          is_python_module=False, fresh=fresh, verbose=verbose)


def _load():
    build()
    return torch.ops.course_add.add


register("add", "load_inline", build=_load, dtypes=DTYPES, devices=("cuda",),
         needs=("cuda", "nvcc"), meta={"source": "kernels/add/add_op.cpp, add_op.cu",
                                       "op": "torch.ops.course_add.add"},
         description="TORCH_LIBRARY op built with load_inline (add_op.cpp + add_op.cu)")
