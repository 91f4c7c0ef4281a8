"""GeLU, tanh approximation: ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``.

Elementwise and memory-bound: each element is read once and written once, so the ceiling is
the device's copy bandwidth. Every provider of this op lives in this folder.
"""

# The providers register themselves on import (each imports the op first).
from kernels.gelu import extension, pytorch, triton_gelu  # noqa: F401
from kernels.gelu.op import (  # noqa: F401 (the op's names, where its users look)
    FLOAT_DTYPES,
    gelu_eager,
)
