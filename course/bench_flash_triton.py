"""``make bench``: the reference solution of exercise attention_variants.flash_triton (lesson 14's
FlashAttention-2 written whole in Triton, ``exercises/solutions/attention_triton.py``) against
the course's registered Triton attention (``kernels/attention/triton_fwd.py``, ``triton_bwd.py``)
in the same run: forward, and backward alone, bf16, D = 64 and 128, S = 1024, 2048 and 4096
(B·S = 16384 tokens, H = 16), causal and not; each record's peer is the course's kernel on the
same problem, and the line printed per problem is the ratio (the target: at least 0.9× the
course's, both passes). The providers alternate within each round, as lesson 09's bench does,
since an H100 slows its clock as it heats.

It lives above ``kernels/`` because the solution is an exercise's (kernels import no exercise).
"""

from __future__ import annotations

import torch

from course_utils import env, results, timing

LESSON = "attention_variants.flash_triton"  # a part of lesson 14's records, replaced alone
EXERCISE = "attention_variants.flash_triton"
TARGET = 0.9  # of the course's own kernel, forward and backward
LENGTHS = (1024, 2048, 4096)
TOKENS, HEADS = 16384, 16


def flop(b: int, h: int, s: int, d: int, causal: bool, backward: bool) -> float:
    """``4·B·H·S²·D`` for the forward (halved when causal); the backward alone counts 2.5
    forwards, as lesson 09's bench counts it."""
    f = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return f * 2.5 if backward else f


def providers() -> dict:
    """{name: attention(q, k, v, causal) with a backward}: the solution and the course's."""
    import exercises
    import kernels
    from exercises.solutions import answers

    cell = exercises.load_cell(answers()[EXERCISE][0], "bench_flash_triton")
    solution = cell["FlashAttention"]
    return {"solution": lambda q, k, v, causal: solution.apply(q, k, v, causal),
            "course": kernels.get_kernel("attention", "triton")}


def _times(fn, q, k, v, do, causal: bool) -> tuple[float, float]:
    """(forward ms, backward-alone ms), medians of device-timed calls."""
    fwd = timing.benchmark(lambda: fn(q, k, v, causal), device="cuda").median

    def graph():  # a fresh forward each call, untimed: what the timed backward uses up
        return (fn(q, k, v, causal),)

    bwd = timing.benchmark(lambda out: out.backward(do), setup=graph, device="cuda").median
    return fwd, bwd


def measure(d: int, s: int, causal: bool, rounds: int = 3) -> list[results.Record]:
    b = TOKENS // s
    q, k, v = (torch.randn(b, HEADS, s, d, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    do = torch.randn(b, HEADS, s, d, device="cuda", dtype=torch.bfloat16)
    found = providers()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in found}
    for _ in range(rounds):  # interleaved, so that both see the same clocks
        for name, fn in found.items():
            runs[name].append(_times(fn, q, k, v, do, causal))
    records = []
    shape = f"bf16 B={b} H={HEADS} S={s} D={d}{' causal' if causal else ''}"
    for i, part in enumerate(("forward", "backward")):
        ms = {name: sorted(r[i] for r in found_runs)[len(found_runs) // 2]
              for name, found_runs in runs.items()}
        rate = {name: timing.tflops(flop(b, HEADS, s, d, causal, i == 1), t)
                for name, t in ms.items()}
        ratio = rate["solution"] / rate["course"]
        print(f"  {part:8s} {shape:34s} solution {rate['solution']:6.1f} TFLOP/s, course "
              f"{rate['course']:6.1f}: {ratio:.2f}× "
              + ("(target met)" if ratio >= TARGET else f"(below the {TARGET}× target)"))
        records.append(results.Record(
            LESSON, f"flash_triton solution {part} {shape}", rate["solution"], "TFLOP/s",
            peer=rate["course"], peer_what="the course's registered Triton attention, same run"))
    return records


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA or env.TRITON_INTERPRET:
        print("flash_triton benchmark skipped: needs a CUDA GPU (the solution against the "
              "course's Triton attention)")
        return []
    records = []
    for d in (64, 128):
        for s in (LENGTHS[:1] if quick else LENGTHS):
            for causal in (False, True):
                records += measure(d, s, causal, rounds=1 if quick else 3)
    return records
