"""Softmax over the last dimension of a 2-D tensor: ``exp(x - max) / sum(exp(x - max))``.

Subtracting the row maximum first keeps ``exp`` from overflowing; a fused kernel reads each row
once, where the naive version reads it several times.
"""

# The providers register themselves on import (after the op is defined above).
from kernels.softmax import pytorch, triton_softmax  # noqa: F401
from kernels.softmax.op import (  # noqa: F401 (the op's names, where its users look)
    FLOAT_DTYPES,
    softmax_eager,
)
