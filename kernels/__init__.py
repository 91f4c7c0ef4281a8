"""Every kernel of the course, organised by op (``kernels/<op>/``), and the registry.

    import kernels
    kernels.get_kernels("gelu", x)                           # what runs x here
    kernels.get_kernels("matmul", a, b, where=lambda k: k.meta.get("accumulator") == "float32")
    kernels.get_kernel("gelu", "triton")(x)

Importing is cheap and safe on any machine: nothing is compiled until a kernel is first called.
"""

# course_utils.env first: it switches Triton to its interpreter on machines without a GPU,
# which must happen before any @triton.jit kernel is defined.
import course_utils.env  # noqa: F401  isort: skip
from kernels import (  # noqa: F401
    add,
    attention,
    cross_entropy,
    first_kernels,
    gelu,
    histogram,
    matmul,
    rmsnorm,
    row_sum,
    scaled_attention,
    scaled_matmul,
    scan,
    softmax,
    strided_copy,
)
from kernels.registry import (
    OPS,
    Kernel,
    KernelNotSupported,
    all_kernels,
    define_op,
    explain,
    get_kernel,
    get_kernels,
    reference,
    register,
    register_kernel,
    unregister,
    verify,
)

__all__ = ["OPS", "Kernel", "KernelNotSupported", "all_kernels", "define_op", "explain",
           "get_kernel", "get_kernels", "reference", "register", "register_kernel", "unregister",
           "verify"]
