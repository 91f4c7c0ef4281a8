"""The workload ``compute-sanitizer`` checks for the Hopper attention forward: every step on the
registry's small cases (``kernels.sanitize.workload``, the same as ``make sanitize`` runs).

    compute-sanitizer --tool synccheck python -m kernels.attention.hopper.sanitize_attention

The cases have ragged sequence lengths (77, 130, 97 keys: TMA's zero fill and the tail mask),
causal and cross shapes, and several key tiles, so every ring slot is reused and its barriers
change phase; the registry's GQA and window cases run the forward's variants. Then packed
sequences (``fwd.varlen_attention``: lengths 1, 63, 64, 65 and 130, whose ragged ends read the
next sequence's rows and must not write them) on every step, and each backward version
(``attention_bwd.cu``'s two kernels, the fused one of ``attention_bwd_fused.cu``) on the cases
it takes through the autograd of the kernel registered with it (``("attention", "wgmma")``,
``("attention", "wgmma", "fused_bwd")``), one status line each (``kernels.sanitize.part``).
"""

import os
import sys
from collections.abc import Iterator

from course_utils import sanitizer
from kernels import sanitize
from kernels.attention.sanitize_triton import VARLEN_LENGTHS  # the Triton workload's lengths


def backward_workload() -> int:
    """Forward + backward of every ``wgmma`` kernel with a backward on its small cases; 1 if
    one failed."""
    return max([sanitize.part(f"{k.name} backward", _backward(k))
                for k in sanitize.cuda_kernels(["attention/wgmma"]) if k.meta.get("backward")],
               default=0)


def _backward(kernel) -> Iterator[str]:
    import torch

    for case, dtype, args in sanitize.small_cases(kernel, "cuda"):
        q, k, v = (t.detach().clone().requires_grad_() for t in args[:3])
        if kernel.supports(q, k, v, *args[3:]) is None:  # (GQA, windows: forward only)
            yield f"{case.label} {str(dtype).removeprefix('torch.')}"
            kernel(q, k, v, *args[3:]).backward(torch.randn_like(q))


def varlen_workload() -> int:
    """Every step's forward on packed sequences, causal and not, with GQA; 1 if one failed."""
    return sanitize.part("attention/wgmma varlen", _varlen())


def _varlen() -> Iterator[str]:
    import torch

    from kernels.attention.hopper import fwd
    from kernels.attention.varlen import cumulative

    cu = cumulative(VARLEN_LENGTHS, "cuda")
    for d in fwd.HEAD_DIMS:
        q = torch.randn(int(cu[-1]), 4, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(int(cu[-1]), 2, d, device="cuda", dtype=torch.bfloat16)
                for _ in range(2))
        for s in fwd.STEPS.values():
            for causal in (False, True):
                yield f"{s.name} D={d} causal={causal}"
                fwd.varlen_attention(q, k, v, cu, cu, max(VARLEN_LENGTHS),
                                     max(VARLEN_LENGTHS), causal, s)


def main() -> int:
    os.environ.setdefault(sanitizer.VARIABLE, "by hand")  # the barrier waits' longer limit
    names = [k.name for k in sanitize.cuda_kernels(["attention/wgmma"])]
    return sanitize.workload(names) | varlen_workload() | backward_workload()


if __name__ == "__main__":
    sys.exit(main())
