"""The workload ``compute-sanitizer`` checks for lesson 08: every mma.sync variant this GPU runs.

    compute-sanitizer --tool memcheck python -m kernels.matmul.sanitize_mma

One small configuration (so the sanitizer's slow replay stays short), shapes that are not tile
multiples (partial tiles on both edges, zero-filled K slices) and a 1 x 1 problem, each output
poisoned first. Exits non-zero if a result differs from the float64 reference.
"""

import sys

import torch

from kernels.matmul import autotune, mma

CONFIG = mma.Config(bm=64, bn=128, wm=32, wn=64, bk_bytes=64, stages=3)


def main() -> int:
    cap = torch.cuda.get_device_capability()
    failed = []
    for v in mma.VARIANTS.values():
        if mma.gpu_reason(v, cap):
            continue
        for m, n, k in ((1, 1, v.k_step), (70, 130, 5 * v.k_step)):
            a, b = autotune.operands(v, m, n, k)
            out = torch.full((m, n), -3, device="cuda").to(v.out)
            mma.launch(v, *mma.prepare(v, a, b), out, CONFIG)
            expected = a.double() @ b.double()
            err = (out.double() - expected).abs().max().item()
            if err > (0 if v.integer else 0.05 * max(expected.abs().max().item(), 1)):
                failed.append(f"{v.name} {m}x{n}x{k}: max error {err}")
    torch.cuda.synchronize()
    print("sanitize_mma: " + ("; ".join(failed) if failed else
                              "every variant ran and matched the float64 reference"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
