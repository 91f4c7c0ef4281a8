"""Exercise hopper_attention.pingpong on a Hopper GPU (:mod:`exercises.hopper_attention` is the
exercise): the child process that runs step 4 with the student's turns, and the order of the turns
read from its TIMELINE build (:func:`turn_order_error`, a pure function:
``tests/test_pingpong_exercise.py`` runs it on the H100's recorded timeline, where step 4 alternates
and step 3 does not).
"""

from __future__ import annotations

import torch

from exercises import Mismatch, compare
from exercises.hopper_attention import HANG_S, STEP, compile_options

# --------------------------------------------------------------------------------------------
# The order of the turns, from a TIMELINE build's events (any machine: a pure function)
# --------------------------------------------------------------------------------------------


def turn_times(events, block: int, role: str) -> list[int]:
    """When ``role`` finished issuing each of its turns in ``block``: the start of the first
    ``compute`` event after each ``wait turn`` event began. (Not the end of the ``wait turn``
    event: bar.sync is DEFER_BLOCKING in SASS, so the clock read after it can run before the
    barrier has completed; the recorded H100 step 4 shows 2-cycle waits.)"""
    mine = [e for e in events if e.block == block and e.role == role]
    turns = sorted(e.start for e in mine if e.kind == "wait turn")
    computes = sorted(e.start for e in mine if e.kind == "compute")
    return [next((t for t in computes if t > begin), -1) for begin in turns]


def turn_order_error(events) -> str | None:
    """Where the consumers' turns fail to alternate in a TIMELINE build's ``events`` (None:
    in every recorded block consumer 0's turn k is issued before consumer 1's turn k, which is
    issued before consumer 0's turn k + 1)."""
    blocks = sorted({e.block for e in events})
    if not blocks:
        return "the TIMELINE build recorded no events"
    for block in blocks:
        first, second = (turn_times(events, block, f"consumer {c}") for c in (0, 1))
        if not first or len(first) != len(second) or -1 in first + second:
            return (f"block {block}: consumer 0 recorded {len(first)} turns, consumer 1 "
                    f"{len(second)} (each should record one per key tile, plus one)")
        for k in range(len(first)):
            if not first[k] < second[k]:
                return (f"block {block}, turn {k}: consumer 1 finished issuing at cycle "
                        f"{second[k]}, consumer 0 at {first[k]}: consumer 1 did not wait for "
                        "consumer 0's turn")
            if k + 1 < len(first) and not second[k] < first[k + 1]:
                return (f"block {block}: consumer 0 finished issuing turn {k + 1} at cycle "
                        f"{first[k + 1]}, before consumer 1 finished its turn {k} (cycle "
                        f"{second[k]}): consumer 0 did not wait for consumer 1's turn")
    return None


# --------------------------------------------------------------------------------------------
# The GPU child (python -m exercises.kernel_checks hopper_attention.pingpong <program>)
# --------------------------------------------------------------------------------------------


def _finished(label: str) -> dict | None:
    """Wait for the launch to end, at most HANG_S seconds; a verdict if it did not. The child
    then exits: the driver tears the hung kernel down with its context."""
    import time

    deadline = time.monotonic() + HANG_S
    stream = torch.cuda.current_stream()
    while not stream.query():
        if time.monotonic() > deadline:
            return {"hung": label}
        time.sleep(0.01)
    torch.cuda.synchronize()  # (raises here if the kernel trapped: a bounded mbarrier wait)
    return None


def pingpong_child(spliced: str, small: bool) -> dict:
    """Run step 4 with the student's turns on a Hopper GPU: values against SDPA, then the order
    of the turns in its TIMELINE build."""
    import json
    import os

    import torch.nn.functional as F

    import kernels
    from course_utils import nvrtc
    from kernels.attention.hopper import fwd, timeline
    from kernels.matmul.hopper import wgmma

    step = fwd.STEPS[STEP]
    built: dict = {}

    def kernel(dtype, d, with_timeline=False):
        key = (dtype, d, with_timeline)
        if key not in built:
            built[key] = nvrtc.load(nvrtc.compile(
                spliced, step.template(d), verbose=False, **compile_options(dtype, with_timeline)))
        return built[key]

    def stop(verdict: dict) -> None:
        print(json.dumps(verdict), flush=True)
        os._exit(0)  # a hung kernel: leave without waiting for it (its context goes with us)

    cases = []
    for case in kernels.registry.OPS["attention"].cases:
        args = case.make(torch.bfloat16, "cuda")
        if len(args) == 4 and fwd.reason(*args) is None:
            cases.append((case.label, args))
    long = [(1, 2, 1000, 1000, 128, False), (2, 2, 1100, 1100, 64, True)]
    for b, h, sq, sk, d, causal in [] if small else long:
        q, k, v = (torch.randn(b, h, s, d, device="cuda").bfloat16() for s in (sq, sk, sk))
        cases.append((f"{b}x{h}x{sq}x{sk}x{d}{' causal' if causal else ''}", (q, k, v, causal)))
    atol, rtol = kernels.registry.OPS["attention"].tol(torch.bfloat16)
    for label, (q, k, v, causal) in cases:
        print(json.dumps({"case": label}), flush=True)
        out = torch.full_like(q, float("nan"))
        fwd.launch(step, q, k, v, causal, out, kernel=kernel(q.dtype, q.shape[-1]))
        if hung := _finished(label):
            stop(hung)
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                              enable_gqa=k.shape[1] != q.shape[1])
        try:
            compare(out, want.to(q.dtype), what=label, atol=atol, rtol=rtol)
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": "the values are wrong (NaN: rows never "
                    "written): a barrier that completes at the wrong time lets a warpgroup "
                    "read a tile or registers too early"}
    label = "TIMELINE build 1x8x1024x1024x128"
    print(json.dumps({"case": label}), flush=True)
    q, k, v = (torch.randn(1, 8, 1024, 128, device="cuda").bfloat16() for _ in range(3))
    buffer = torch.zeros(wgmma.TIMELINE_BLOCKS, wgmma.ROLES, wgmma.TIMELINE_EVENTS, 4,
                         dtype=torch.int64, device="cuda")
    fwd.launch(step, q, k, v, False, torch.empty_like(q), timeline=buffer,
               kernel=kernel(q.dtype, 128, True))
    if hung := _finished(label):
        stop(hung)
    events = timeline.decode(buffer)
    if wrong := turn_order_error(events):
        return {"mismatch": f"the values are right, but the turns do not alternate: {wrong}",
                "hint": "a barrier that completes without the other warpgroup (a count of "
                        "128, one barrier for both, empty functions) lets both issue at once"}
    blocks = sorted({e.block for e in events})
    return {"ok": True, "cases": [label for label, _ in cases], "blocks": len(blocks),
            "turns": len(turn_times(events, blocks[0], "consumer 0"))}
