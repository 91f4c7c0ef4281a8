"""Inclusive scan (prefix sum) along the last dimension: ``y[i] = x[0] + ... + x[i]``.

The canonical parallel pattern that looks serial: each output depends on every input before
it, yet a block of threads computes it in log2(block) steps (lesson 21). A scan reads each
element once and writes it once, so it is memory-bound with the copy bandwidth as its ceiling;
what makes that hard is the carry, the sum of everything before a tile, which crosses tiles.

* :mod:`~kernels.scan.op`: the op (float32 and int32, 1-D or 2-D contiguous) and its reference,
  ``torch.cumsum``;
* :mod:`~kernels.scan.triton_scan`: ``tl.associative_scan`` per tile, reduce-then-scan across;
* :mod:`~kernels.scan.nvrtc` (``scan.cu``): warp shuffles, then shared memory across warps, and
  a single-pass decoupled look-back across tiles;
* :mod:`~kernels.scan.bench`: both against the copy bandwidth and ``torch.cumsum``.
"""

from kernels.scan import nvrtc, triton_scan  # noqa: F401 (they register themselves)
from kernels.scan.op import DTYPES, scan_eager  # noqa: F401
