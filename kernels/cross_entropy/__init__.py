"""Cross-entropy of a language model's logits: ``mean over rows of lse(x) - x[target]``.

The last op of a training step's forward and the first of its backward. Its input is the
widest tensor of the step (N tokens x V classes: 8192 x 50257 for GPT-2 at 8 x 1024 tokens),
and an eager version makes several more of that size (a float32 copy, the log-softmax, the
gradient). A fused kernel reads the logits twice (the log-sum-exp, then the gradient) and
writes the gradient once, with one float per row in between (``triton_cross_entropy.py``).

The eager kernel is the reference: ``F.cross_entropy`` on the logits in float32.
"""

# The providers register themselves on import (after the op is defined above).
from kernels.cross_entropy import triton_cross_entropy  # noqa: F401
from kernels.cross_entropy.op import (  # noqa: F401 (the op's names, where its users look)
    FLOAT_DTYPES,
    IGNORE_INDEX,
    cross_entropy_eager,
)
