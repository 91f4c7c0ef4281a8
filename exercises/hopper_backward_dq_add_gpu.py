"""Exercise hopper_backward.dq_add on a Hopper GPU (:mod:`exercises.hopper_backward_dq_add` is the
exercise): the child process that runs version 2 of the Hopper backward with the student's epilogue
spliced in (``python -m exercises.kernel_checks hopper_backward.dq_add <program>``; a wrong address
may fault, and the fault ends the child, not the notebook's kernel).

Each case compares dQ, dK and dV with float64 autograd of the eager reference, within the
tolerance of the course's gradient checks (``gpu_run_bwd.TOL``, or twice SDPA's own error):
ragged Sq, causal with Sq != Sk both ways, Sk over several 128-key blocks (so several blocks
add into the same dQ rows at once: a plain store loses theirs), D = 64 and 128, bf16.

The guard cannot show in the values: the rows of the last query tile past Sq have dS = 0 (TMA
fills Q and dO with zeros there), so a missing guard adds +0.0 to whatever lies there, the next
head's first rows or memory past the buffer. So the buffer the kernel adds into is followed by
:data:`GUARD_ROWS` rows of -0.0: -0.0 + +0.0 = +0.0 in round-to-nearest, so an addition there,
even of zero, clears a sign bit (only an addition of -0.0 would not; a dQ_partial element is
a sum of dS · K over 64 or 128 keys, +0.0 as soon as one term is). The last head's rows past Sq
fall there; the other heads' fall into the next head's rows, where only the values could tell,
and cannot: the last head is the witness.
"""

from __future__ import annotations

import math

import torch

GUARD_ROWS = 64  # a query tile: its rows past Sq are fewer
# (B, H, Sq, Sk, D, causal): ragged Sq, causal with Sq < Sk and Sq > Sk, 2 to 5 key blocks of
# 128 adding into each dQ row, both head dims
CASES = [(1, 2, 100, 300, 64, True), (2, 2, 130, 513, 128, False), (1, 3, 77, 200, 128, True),
         (1, 2, 200, 70, 64, True), (2, 1, 257, 640, 64, False), (1, 2, 1000, 1000, 128, True)]
SMALL = 3  # the cases --small runs (under compute-sanitizer)


class _Spliced(torch.autograd.Function):
    """The Hopper forward, then version 2's backward with the spliced kernel, adding into a
    buffer with -0.0 rows after it (``ctx.found["guard"]`` keeps them to read after)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, kernel, found):
        from kernels.attention.hopper import bwd

        o, lse = bwd.forward(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.kernel, ctx.found = causal, kernel, found
        return o

    @staticmethod
    def backward(ctx, do):
        from kernels.attention.hopper import bwd

        q, k, v, o, lse = ctx.saved_tensors
        d = q.shape[-1]
        buffer = torch.zeros(q.numel() + GUARD_ROWS * d, dtype=torch.float32, device=q.device)
        buffer[q.numel():] = -0.0
        ctx.found["guard"] = buffer[q.numel():]
        dq, dk, dv = bwd.backward(q, k, v, o, lse, do, ctx.causal, version=2,
                                  kernel=ctx.kernel, dq_sum=buffer[:q.numel()].view(q.shape))
        return dq, dk, dv, None, None, None


def dq_add_child(spliced: str, small: bool) -> dict:
    """Run version 2 with the student's epilogue on the cases; the verdict."""
    import json

    from course_utils import nvrtc
    from exercises.hopper_backward_dq_add import compile_options, template
    from kernels.attention import autograd
    from kernels.attention.hopper.gpu_run_bwd import TOL

    dtype = torch.bfloat16
    built = {}
    labels = []
    for b, h, sq, sk, d, causal in CASES[:SMALL] if small else CASES:
        label = f"B={b} H={h} Sq={sq} Sk={sk} D={d}{' causal' if causal else ''}"
        print(json.dumps({"case": label}), flush=True)
        if d not in built:
            built[d] = nvrtc.load(nvrtc.compile(spliced, template(d), verbose=False,
                                                **compile_options(dtype)))
        torch.manual_seed(len(labels))
        q = torch.randn(b, h, sq, d, device="cuda").to(dtype)
        k, v = (torch.randn(b, h, sk, d, device="cuda").to(dtype) for _ in range(2))
        found: dict = {}

        def yours(q, k, v, causal, kernel=built[d], found=found):
            return _Spliced.apply(q, k, v, causal, kernel, found)

        errors = autograd.gradient_errors(q, k, v, causal, fns={"yours": yours})
        torch.cuda.synchronize()
        flipped = int((~torch.signbit(found["guard"])).sum())
        if flipped:
            return {"mismatch": f"{label}: {flipped} of the {GUARD_ROWS} · D elements of -0.0 "
                    "after dq_sum turned +0.0: your code added into rows past Sq (of the last "
                    "head, past the buffer's end; the other heads' land in the next head's "
                    "rows). Their values are zero, so dQ looks right", "hint": "guard each "
                    "row: q_row + 8h < sq"}
        ours, sdpa = errors["yours"], errors["sdpa"]
        for name in ("dQ", "dK", "dV"):
            bound = max(TOL[dtype], 2 * sdpa[name])
            if math.isnan(ours[name]) or ours[name] > bound:
                return {"mismatch": f"{label}: {name}'s largest error against float64 is "
                        f"{ours[name]:.2e} of its largest value, the bound {bound:.1e} "
                        f"(SDPA's own {sdpa[name]:.1e})",
                        "hint": "your lines do not compute dK or dV, but a wrong address of "
                        "theirs may write into dK's or dV's memory: check the row stride"
                        if name != "dQ" else "several key blocks add into each row: a plain "
                        "store loses theirs; else check the scale, the fragment layout and the "
                        "row stride"}
        labels.append(f"{label}: dQ {ours['dQ']:.1e}")
    return {"ok": True, "cases": labels}
