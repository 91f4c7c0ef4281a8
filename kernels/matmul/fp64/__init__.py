"""Lesson 11's kernel: an FP64 GEMM brought into the registry, written three ways.

    triton_gemm.py   the implementation in Triton (runs under the interpreter on a CPU)
    gemm.cu          the implementation in CUDA, one output element per thread, and
    nvrtc_gemm.py    its launch, compiled by course_utils.nvrtc (compiles without a GPU)
    cute_gemm.py     the implementation in NVIDIA's CuTe DSL (optional: %%requires cute-dsl)
    interface.py     metadata, supports(), build, and the generator over tile shapes
    bench.py         the benchmark table against torch.mm float64, the autotune sweep,
                     and the results records of `make bench`

Importing this package registers every point of each provider's design space as
``("matmul", <provider>, "fp64 <M>x<N>")``; nothing is compiled until a kernel is first called.
That is all it takes for the kernels to join ``tests/test_kernel_matrix.py`` and the tables.
"""

from kernels.matmul.fp64.interface import DESIGN_SPACE, PROVIDERS, generate, make_kernel
from kernels.registry import register_kernel

KERNELS = [register_kernel(kernel) for provider in PROVIDERS for kernel in generate(provider)]

__all__ = ["DESIGN_SPACE", "KERNELS", "PROVIDERS", "generate", "make_kernel"]
