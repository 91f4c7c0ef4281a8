"""Histograms: ``counts[v]`` = how many elements of ``x`` (int32) equal ``v``, for ``v`` in
``[0, bins)``; values outside are ignored. The counts are int32.

Many threads add into a few counters, so the CUDA kernels (``histogram.cu``, lesson 04) use
atomics: one global ``atomicAdd`` per element, or a per-block histogram in shared memory
(privatised) added to the global one bin by bin. Which is faster depends on the data: the
more elements share a bin, the longer the queue at that bin's atomic (contention), which the
benchmark measures on uniform and on skewed values.
"""

# the CUDA kernels register themselves on import (nothing is compiled until first use)
from kernels.histogram import nvrtc  # noqa: F401
from kernels.histogram.op import (  # noqa: F401 (the op's names, where its users look)
    DTYPES,
    histogram_eager,
    skewed,
    uniform,
)
