"""RMSNorm over the last dimension of a 2-D tensor: ``y = x / sqrt(mean(x²) + eps) · weight``.

The normalisation of Llama-style transformers (LayerNorm without the mean subtraction and the
bias). Like softmax it is a row reduction followed by an elementwise pass: a fused kernel reads
each row once, keeps it on chip for the statistic, and writes ``y`` once. Unlike softmax it has a
learned parameter, so its backward has two parts of different shapes: ``dx`` row by row, and
``dweight``, a sum over *all* rows (``triton_rmsnorm.py`` shows how to reduce it without races).

The eager kernel is the reference: statistics in float32 (float64 for float64 input), the
output rounded once, to ``x``'s dtype.
"""

# The providers register themselves on import (after the op is defined above).
from kernels.rmsnorm import pytorch, triton_rmsnorm  # noqa: F401
from kernels.rmsnorm.op import (  # noqa: F401 (the op's names, where its users look)
    EPS,
    FLOAT_DTYPES,
    KERNEL_DTYPES,
    rmsnorm_eager,
)
