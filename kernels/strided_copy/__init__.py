"""A copy with a growing stride: ``y = x.view(m, stride).t()``, flattened, with m = n / stride.

Every element of ``x`` is read once and every element of ``y`` written once, as in a plain copy;
what changes with ``stride`` is only how far apart neighbouring threads read. Lesson 05 measures
it against the copy bandwidth to show what uncoalesced access costs (``strided_copy.cu``).
"""

from kernels.strided_copy import nvrtc  # noqa: F401
from kernels.strided_copy.op import (  # noqa: F401 (the op's names, where its users look)
    DTYPES,
    strided_copy_eager,
)
