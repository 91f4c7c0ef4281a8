"""Row sums of a 2-D tensor: ``y[r] = sum(x[r, :])``, accumulated and returned in float32.

A reduction reads every element once and writes one number per row: memory-bound, with the
copy bandwidth as its ceiling. The CUDA kernels (``row_sum.cu``, lesson 05) show the two levels
of a GPU reduction: 32 lanes of a warp add through register shuffles (``__shfl_down_sync``),
and the warps of a block meet in shared memory.
"""

# the CUDA kernels register themselves on import (nothing is compiled until first use)
from kernels.row_sum import nvrtc  # noqa: F401
from kernels.row_sum.op import (  # noqa: F401 (the op's names, where its users look)
    DTYPES,
    row_sum_eager,
)
