"""Elementwise add of two same-shape tensors: the smallest kernel, used to time compilers."""

# the other providers register themselves on import (nothing is compiled until first use)
from kernels.add import load_inline, nvrtc  # noqa: F401
from kernels.add.op import (  # noqa: F401 (the op's names, where its users look)
    DTYPES,
    add_eager,
)
