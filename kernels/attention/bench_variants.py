"""Attention's variants on a GPU: grouped-query attention and a sliding window in the course's
Triton forward, each beside every SDPA backend that accepts the same problem, and decoding with
grouped-query attention against the copy bandwidth (issue 34's targets)::

    python -m course bench bench_variants     # a GPU; on a CPU it says it has nothing to time

* **GQA prefill** (B = 2, H_q = 32 query heads over H_kv = 8 K/V heads, S = 4096, D = 128,
  causal): TFLOP/s of every provider that runs it; the target is at least the best SDPA
  backend's (SDPA takes the problem with ``enable_gqa=True``).
* **Sliding window** (B = 2, H = 16, S = 8192, D = 128, window 1024): TFLOP/s counted on the
  pairs a query sees (so skipping the rest is the gain, not a trick of the count); SDPA runs it
  only with an explicit mask.
* **GQA decoding** (one query, Sk = 8192 and 32768 keys): GB/s of K and V read, the bytes that
  must move, against the copy bandwidth measured in the same run; the target is 90% of it.
"""

from __future__ import annotations

import torch

from course_utils import env, results, timing
from kernels.attention.bench import all_providers

LESSON = "08_attention_variants"
GQA_PREFILL = (2, 32, 8, 4096, 128)  # B, H_q, H_kv, S, D
WINDOWED = (2, 16, 8192, 128, 1024)  # B, H, S, D, window
DECODING = ((8, 32, 8, 8192, 128), (8, 32, 8, 32768, 128))  # B, H_q, H_kv, Sk, D
OURS = "triton"


def visible_pairs(s: int, window: int | None) -> int:
    """(query, key) pairs a causal query block sees in one head of length ``s``: query i sees
    min(i + 1, window) keys (all i + 1 without a window)."""
    w = s if window is None else min(window, s)
    return w * (w + 1) // 2 + (s - w) * w


def _timed(q, k, v, window: int | None = None) -> dict[str, float | str]:
    """Forward time in ms of every registered provider on (q, k, v, causal), or why it did not
    run (its supports() reason, in words)."""
    import kernels

    args = (q, k, v, True) if window is None else (q, k, v, True, window)
    found: dict[str, float | str] = {}
    for name in all_providers():
        provider, _, variant = name.rstrip("]").partition("[")
        kernel = kernels.get_kernel("attention", provider, variant or None)
        if why := kernel.supports(*args):
            found[name] = why
            continue
        with torch.no_grad():
            found[name] = timing.benchmark(kernel, *args, name=name, min_time_s=0.2).median
    return found


def _prefill_records(what: str, found: dict, flop: float) -> list[results.Record]:
    """One record per provider that ran, TFLOP/s, with the best SDPA backend as its peer."""
    sdpa = {n: t for n, t in found.items() if n.startswith("sdpa") and isinstance(t, float)}
    best = min(sdpa, key=sdpa.get) if sdpa else None
    for name, t in found.items():
        print(f"  {name:16s} " + (f"{timing.tflops(flop, t):7.1f} TFLOP/s" if isinstance(t, float)
                                 else f"does not run it: {t}"))
    peer = timing.tflops(flop, sdpa[best]) if best else None
    return [results.Record(LESSON, f"{name} {what}", round(timing.tflops(flop, t), 1), "TFLOP/s",
                           peer=None if peer is None else round(peer, 1),
                           peer_what=None if peer is None else
                           f"the best SDPA backend that runs it ({best}), same run")
            for name, t in found.items() if isinstance(t, float)]


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("the variants are timed on a GPU only (this machine has none): their checks run "
              "in the interpreter, tests/test_attention_variants.py")
        return []
    dtype, records = torch.bfloat16, []
    b, h, h_kv, s, d = GQA_PREFILL
    s = s // 4 if quick else s
    q = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
    k, v = (torch.randn(b, h_kv, s, d, device="cuda", dtype=dtype) for _ in range(2))
    what = f"GQA fwd bf16 B={b} Hq={h} Hkv={h_kv} S={s} D={d} causal"
    print(what)
    records += _prefill_records(what, _timed(q, k, v), 4 * b * h * d * visible_pairs(s, None))

    b, h, s, d, window = WINDOWED
    s = s // 4 if quick else s
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    what = f"window fwd bf16 B={b} H={h} S={s} D={d} window={window}"
    print(what)
    records += _prefill_records(what, _timed(q, k, v, window),
                                4 * b * h * d * visible_pairs(s, window))

    for b, h, h_kv, sk, d in DECODING[:1] if quick else DECODING:
        q = torch.randn(b, h, 1, d, device="cuda", dtype=dtype)
        k, v = (torch.randn(b, h_kv, sk, d, device="cuda", dtype=dtype) for _ in range(2))
        moved = 2 * k.numel() * k.element_size()  # K and V, each read once per group
        copy = timing.copy_bandwidth(moved)
        what = f"GQA decode bf16 B={b} Hq={h} Hkv={h_kv} Sk={sk} D={d}"
        print(f"{what} (copy {copy:,.0f} GB/s)")
        for name, t in _timed(q, k, v).items():
            if not isinstance(t, float):
                print(f"  {name:16s} does not run it: {t}")
                continue
            gbs = timing.gbps(moved, t)
            print(f"  {name:16s} {gbs:7,.0f} GB/s = {gbs / copy:.0%} of copy")
            records.append(results.Record(LESSON, f"{name} {what}", round(gbs, 1), "GB/s",
                                          round(copy, 1), "device copy bandwidth, same run"))
    for line in verdicts(records):
        print(line)
    return records


def verdicts(records: list[results.Record]) -> list[str]:
    """The targets, one line each: the Triton forward ≥ 1.0× the best SDPA backend on the GQA and
    windowed problems, and ≥ 90% of copy when decoding with GQA."""
    lines = []
    for r in records:
        if not r.what.startswith(f"{OURS} "):
            continue
        if r.unit == "TFLOP/s" and r.peer:
            lines.append(timing.verdict(f"{r.what}: ≥ 1.0× {r.peer_what}",
                                        f"{r.value / r.peer:.2f}×", r.value >= r.peer,
                                        "measured, same run"))
        elif r.unit == "GB/s" and r.ceiling:
            lines.append(timing.verdict(f"{r.what}: ≥ 90% of copy", f"{r.value / r.ceiling:.0%}",
                                        r.value >= 0.9 * r.ceiling,
                                        "the query heads of a group read K and V through L2, "
                                        "not once (no packing of the group into one program)"))
    return lines
