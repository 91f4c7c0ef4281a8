"""The workload ``compute-sanitizer`` checks for lesson 16: every step and every tile shape the
registered ``auto`` kernel chooses from (tiles.py), bf16 and fp8 (fp8 with row-wise scales where
the kernel takes them: scaled.py), once; each kernel that can split K once more with 4
splits (split-K: partial tiles in a workspace, counted in by an atomic, summed by the last);
and the block-scaled fp8 kernel (block_scaled.cu) in both tiles, with TMA stores and without.

    compute-sanitizer --tool synccheck python -m kernels.matmul.hopper.sanitize_wgmma

Small problems (the sanitizer replays slowly) that are not tile multiples, so TMA's zero fill
and the epilogue's edge predicates both run, and several K tiles, so every ring slot is reused
and its barrier changes phase. Outputs are poisoned first. Exits non-zero if a result differs
from the float64 reference. ``synccheck`` is the one that matters for mbarriers; ``memcheck``
and ``racecheck`` watch the epilogue and shared memory.
"""

import dataclasses
import os
import sys

import torch

from course_utils import sanitizer
from kernels.matmul.hopper import scaled, tiles, wgmma


def main() -> int:
    # this workload runs under compute-sanitizer, started by hand or by sanitizer.run_module:
    # either way its barrier waits get the sanitizer's longer limit (wgmma.wait_limit_mcycles)
    os.environ.setdefault(sanitizer.VARIABLE, "by hand")
    if reason := wgmma.gpu_reason(torch.cuda.get_device_capability()):
        print(f"sanitize_wgmma: {reason}")
        return 1
    failed = []
    steps = [*wgmma.STEPS.values(), *(c.step for c in tiles.CANDIDATES[1:])]
    steps += [dataclasses.replace(s, splits=4) for s in steps if s.can_split_k]
    for s in steps:
        for name in ("bf16", "fp8_e4m3"):
            v = wgmma.variant(name)
            m, n, k = 200, 300, 10 * 128 // v.a.itemsize  # 10 K tiles: every slot reused
            a = (torch.randn(m, k, device="cuda") / k**0.25).to(v.a)
            bt = (torch.randn(n, k, device="cuda") / k**0.25).to(v.b)
            out = torch.full((m, n), float("nan"), device="cuda", dtype=v.out)
            scales = None
            if s.specialized and v.a.itemsize == 1:  # the epilogue with row-wise scales
                scales = (torch.rand(m, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5)
            wgmma.launch(s, v, a, bt, out, scales=scales)
            expected = a.double() @ bt.double().t()
            if scales is not None:
                expected *= scales[0].double()[:, None] * scales[1].double()[None, :]
            err = (out.double() - expected).abs().max().item()
            if not err <= 0.03 * max(expected.abs().max().item(), 1):
                failed.append(f"{s.template} splits={s.splits} {name} {m}x{n}x{k}: max "
                              f"error {err}")
    failed += _block_scaled()
    torch.cuda.synchronize()
    print("sanitize_wgmma: " + ("; ".join(failed) if failed else
                                "every step ran and matched the float64 reference"))
    return 1 if failed else 0


def _block_scaled() -> list[str]:
    """Block-scaled fp8 in each tile: N = 264 rows are 16-byte aligned (TMA stores), N = 300
    are not (plain stores); K = 1280 is 10 K tiles, 10 scale blocks."""
    from kernels.scaled_matmul import quantize_operands, scaled_matmul_eager

    failed = []
    v = wgmma.variant("fp8_e4m3")
    for tile in scaled.BLOCK_TILES:
        for m, n, k in ((200, 264, 1280), (200, 300, 1280)):
            args = quantize_operands(torch.randn(m, k, device="cuda"),
                                     torch.randn(n, k, device="cuda"), v.a, "block")
            out = scaled.run_blocks(*args, v, tile).double()
            expected = scaled_matmul_eager(*args).double()
            err = (out - expected).abs().max().item()
            if not err <= 0.03 * max(expected.abs().max().item(), 1):
                failed.append(f"block-scaled {tile.name} {m}x{n}x{k}: max error {err}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
