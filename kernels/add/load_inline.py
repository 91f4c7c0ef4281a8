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
from kernels.add.op import DTYPES
from kernels.registry import register

SOURCE = Path(__file__).with_name("add_op.cu")  # the kernel and its launcher (nvcc)
HOST_SOURCE = Path(__file__).with_name("add_op.cpp")  # the op and its checks (host compiler)
NAME = "course_add_op"  # the build directory is var/build/course_add_op


def build(fresh: bool = False, verbose: bool = False) -> cuda_ext.Build:
    """Build (or find already built) and load the op library; ``fresh=True``: a cold build."""
    return cuda_ext.build(NAME, cpp_sources=HOST_SOURCE.read_text(),
                          cuda_sources=SOURCE.read_text(),
                          is_python_module=False, fresh=fresh, verbose=verbose)


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.ops.course_add.add`` with the inputs checked in Python first.

    The op checks them too (``TORCH_CHECK`` in add_op.cpp), but on the GPU box of 2026-11
    (torch 2.11, Python 3.12) a ``TORCH_CHECK`` failing inside a load_inline extension crashed
    the process with a segmentation fault, while torch's own C++ errors were fine: validate
    before crossing into C++, and a mistake stays a Python ``ValueError``.
    """
    from kernels.add.op import validate_args

    validate_args(a, b)
    if a.dtype not in DTYPES + (torch.float64,):
        raise ValueError(f"add: a expected float32, float64, float16 or bfloat16, got {a.dtype}")
    if not a.is_cuda:
        raise ValueError(f"add: a expected a CUDA tensor, got one on {a.device}")
    return torch.ops.course_add.add(a, b)


def _load():
    build()
    return add


register("add", "load_inline", build=_load, dtypes=DTYPES, devices=("cuda",),
         needs=("cuda", "nvcc"), meta={"source": "kernels/add/add_op.cpp, add_op.cu",
                                       "op": "torch.ops.course_add.add"},
         description="TORCH_LIBRARY op built with load_inline (add_op.cpp + add_op.cu)")
