"""Matrix multiply ``a @ b`` of 2-D tensors: compute-bound at large sizes (2·M·N·K FLOPs on
2·(M·K + K·N + M·N) bytes), so the ceiling is the tensor-core peak for the dtype."""

# The op first (its arguments, checks, cases and reference: problem.py, re-exported here), then
# the providers, which register against it on import.
# isort: off
from kernels.matmul.problem import DTYPES, matmul_eager, validate_args  # noqa: F401

# lesson 07: the steps to a tensor-core matmul; lesson 08: mma.cu in every mma.sync variant
from kernels.matmul import mma, steps  # noqa: F401  (each registers its kernels)
# isort: on

mma.register_variants()

# lesson 11's FP64 GEMMs register themselves on import (nothing is compiled until first use)
from kernels.matmul import fp64  # noqa: E402, F401, I001

# lesson 16's Hopper kernels (TMA + wgmma) register themselves the same way
from kernels.matmul import hopper  # noqa: E402, F401, I001

# lesson 07's bridge to Triton: a tl.dot matmul, autotuned on a GPU (registers itself on import)
from kernels.matmul import triton_dot  # noqa: E402, F401, I001
