"""Attention's variants on a GPU: grouped-query attention and a sliding window in the course's
Triton forward and lesson 18's Hopper forward (``wgmma``, on an sm_90 GPU), each beside every
SDPA backend that accepts the same problem, and decoding with grouped-query attention against
the copy bandwidth (issue 34's targets)::

    python -m course bench bench_variants     # a GPU; on a CPU it says it has nothing to time

* **GQA prefill** (B = 2, H_q = 32 query heads over H_kv = 8 K/V heads, S = 4096, D = 128,
  causal): TFLOP/s of every provider that runs it; the target is at least the best SDPA
  backend's (SDPA takes the problem with ``enable_gqa=True``).
* **Sliding window** (B = 2, H = 16, S = 8192, D = 128, window 1024): TFLOP/s counted on the
  pairs a query sees (so skipping the rest is the gain, not a trick of the count); SDPA runs it
  only with an explicit mask.
* **GQA decoding** (one new query per sequence, Sk = 8192 and 32768 keys): GB/s of K and V
  read, the bytes that must move, against the copy bandwidth measured in the same run; the
  target is 90% of it. The new query sees the whole cache: the problem is *not* causal (SDPA's
  ``is_causal`` aligns top-left, so a causal single query would see key 0 alone; timed that
  way, every provider read one key and the "GB/s" of a 1 GiB cache came out at 3.8× copy, the
  time being the host's launch overhead). :func:`bytes_needed` counts the K/V rows some query
  sees, and a rate above :data:`IMPOSSIBLE` × copy gets a verdict that says it is broken.
* **Varlen prefill** (16 causal sequences of ragged lengths, about 32k tokens in all, GQA):
  TFLOP/s counted on the pairs each sequence sees, :func:`varlen.varlen_attention` (and the
  Hopper forward's ``fwd.varlen_attention`` on an sm_90 GPU) against SDPA run sequence by
  sequence (the same work, each call on the best backend that runs it: the
  fair library baseline, the peer of the verdict) and SDPA over the batch padded to the
  longest sequence (what a model without varlen does: padded keys come after a sequence's own,
  so top-left causal hides them, but the padded queries are computed and thrown away).
* **Short prefill** (B = 1, H = 32, S = 512 and 1024, D = 128, causal): a few microseconds of
  GPU work, so the host decides. The registered call as a user makes it, back to back, against
  ``F.scaled_dot_product_attention`` as a user calls it (no backend pinned: pinning one with
  ``sdpa_kernel`` costs more host time than the kernel); and the GPU's time alone (the call
  replayed from a CUDA graph) against SDPA's cuDNN backend's. The target is 0.9× cuDNN.
"""

from __future__ import annotations

import functools
import statistics

import torch

from course_utils import env, results, timing
from kernels.attention.bench import all_providers
from kernels.attention.varlen import cumulative, per_sequence, varlen_attention

LESSON = "attention_variants"
GQA_PREFILL = (2, 32, 8, 4096, 128)  # B, H_q, H_kv, S, D
WINDOWED = (2, 16, 8192, 128, 1024)  # B, H, S, D, window
DECODING = ((8, 32, 8, 8192, 128), (8, 32, 8, 32768, 128))  # B, H_q, H_kv, Sk, D
VARLEN = (16, 32768, 32, 8, 128)  # sequences, total tokens (about), H_q, H_kv, D
SHORT_PREFILL = ((1, 32, 512, 128), (1, 32, 1024, 128))  # B, H, S, D; causal
SHORT_TARGET = 0.9  # of cuDNN's rate, the registered call as a user makes it
ROUNDS = 7
OURS = "triton"
IMPOSSIBLE = 1.2  # a read-only kernel may beat a copy's rate a little, never by 20%


def decode_problem(b: int, h: int, h_kv: int, sk: int, d: int, device: str = "cuda",
                   dtype: torch.dtype = torch.bfloat16) -> tuple:
    """``(q, k, v, causal)`` of one decoding step: one new query per sequence and head, which
    sees all ``sk`` keys of the cache (so not causal: see the module's docstring)."""
    q = torch.randn(b, h, 1, d, device=device, dtype=dtype)
    k, v = (torch.randn(b, h_kv, sk, d, device=device, dtype=dtype) for _ in range(2))
    return q, k, v, False


def bytes_needed(q, k, v, causal: bool = False, window: int | None = None) -> int:
    """Bytes of K and V that some query of the problem sees: what a forward must read at least
    (read once per group with grouped-query attention)."""
    from kernels.attention import visible

    seen = visible(q.shape[2], k.shape[2], causal, window).any(0)
    return int(seen.sum()) * (k[:, :, :1].numel() * k.element_size()) * 2


def varlen_lengths(sequences: int, total: int, seed: int = 0) -> list[int]:
    """Ragged lengths (none a multiple of 64) summing to about ``total``: a fixed draw."""
    g = torch.Generator().manual_seed(seed)
    share = torch.rand(sequences, generator=g) + 0.2
    return [int(x) | 1 for x in (share / share.sum() * total).tolist()]


def visible_pairs(s: int, window: int | None) -> int:
    """(query, key) pairs a causal query block sees in one head of length ``s``: query i sees
    min(i + 1, window) keys (all i + 1 without a window)."""
    w = s if window is None else min(window, s)
    return w * (w + 1) // 2 + (s - w) * w


def _timed(*args) -> dict[str, float | str]:
    """Forward time in ms of every registered provider on ``args`` (q, k, v, causal[, window]),
    or why it did not run (its supports() reason, in words)."""
    import kernels

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
    records += _prefill_records(what, _timed(q, k, v, True),
                                4 * b * h * d * visible_pairs(s, None))

    b, h, s, d, window = WINDOWED
    s = s // 4 if quick else s
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    what = f"window fwd bf16 B={b} H={h} S={s} D={d} window={window}"
    print(what)
    records += _prefill_records(what, _timed(q, k, v, True, window),
                                4 * b * h * d * visible_pairs(s, window))

    for b, h, h_kv, sk, d in DECODING[:1] if quick else DECODING:
        problem = decode_problem(b, h, h_kv, sk, d)
        moved = bytes_needed(*problem)  # K and V, each read once per group
        copy = timing.copy_bandwidth(moved)
        what = f"GQA decode bf16 B={b} Hq={h} Hkv={h_kv} Sk={sk} D={d}"
        print(f"{what} (copy {copy:,.0f} GB/s)")
        for name, t in _timed(*problem).items():
            if not isinstance(t, float):
                print(f"  {name:16s} does not run it: {t}")
                continue
            gbs = timing.gbps(moved, t)
            print(f"  {name:16s} {gbs:7,.0f} GB/s = {gbs / copy:.0%} of copy")
            records.append(results.Record(LESSON, f"{name} {what}", round(gbs, 1), "GB/s",
                                          round(copy, 1), "device copy bandwidth, same run"))
    records += _varlen_records(quick)
    records += _short_records(quick)
    for line in verdicts(records):
        print(line)
    return records


def _varlen_records(quick: bool) -> list[results.Record]:
    """Varlen prefill: the Triton kernels against SDPA sequence by sequence (the peer) and over
    the padded batch, TFLOP/s on the pairs the sequences see."""
    from kernels.attention import sdpa
    from kernels.attention.hopper import fwd as hopper
    from kernels.attention.hopper import targets as hopper_targets

    n, total, h, h_kv, d = VARLEN
    lengths = varlen_lengths(n, total // 4 if quick else total)
    cu = cumulative(lengths, "cuda")
    q = torch.randn(sum(lengths), h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(sum(lengths), h_kv, d, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    flop = 4 * h * d * sum(visible_pairs(s, None) for s in lengths)
    longest = max(lengths)
    padded = [torch.zeros(n, heads, longest, d, device="cuda", dtype=torch.bfloat16)
              for heads in (h, h_kv, h_kv)]
    offsets = cu.tolist()
    for t, p in zip((q, k, v), padded, strict=True):
        for i, (lo, hi) in enumerate(zip(offsets, offsets[1:], strict=False)):
            p[i, :, :hi - lo] = t[lo:hi].transpose(0, 1)

    padded_ms, per_sequence_ms = {}, {}
    with torch.no_grad():
        for backend in ("cudnn", "flash"):
            if sdpa.reason(backend, *padded, True) is not None:
                continue
            one = functools.partial(sdpa.attention, backend)
            padded_ms[backend] = timing.benchmark(one, *padded, True, name=backend).median
            per_sequence_ms[backend] = timing.benchmark(
                per_sequence, one, q, k, v, offsets, offsets, True, name=backend).median
        if not padded_ms:
            print("varlen: neither SDPA's cuDNN nor its flash backend runs the padded batch here")
            return []
        best = min(per_sequence_ms, key=per_sequence_ms.get)
        best_padded = min(padded_ms, key=padded_ms.get)
        found = {f"sdpa_{best} per sequence": per_sequence_ms[best],
                 f"sdpa_{best_padded} padded": padded_ms[best_padded],
                 OURS: timing.benchmark(varlen_attention, q, k, v, cu, cu, longest, longest,
                                        True, name=OURS).median}
        if hopper_targets.runs_here():  # lesson 18's Hopper forward, packed (forward only)
            found["wgmma"] = timing.benchmark(hopper.varlen_attention, q, k, v, cu, cu, longest,
                                              longest, True, name="wgmma").median
    what = (f"varlen fwd bf16 {n} seqs {sum(lengths)} tokens (longest {longest}) Hq={h} "
            f"Hkv={h_kv} D={d} causal")
    print(what)
    peer = round(timing.tflops(flop, per_sequence_ms[best]), 1)
    records = []
    for name, t in found.items():
        rate = timing.tflops(flop, t)
        print(f"  {name:24s} {rate:7.1f} TFLOP/s (on the pairs the sequences see)")
        records.append(results.Record(LESSON, f"{name} {what}", round(rate, 1), "TFLOP/s",
                                      peer=peer, peer_what=f"SDPA {best}, one call per "
                                      "sequence, same run"))
    return records


def _short_records(quick: bool) -> list[results.Record]:
    """Short prefill: TFLOP/s of the registered Triton call and of F.sdpa as a user calls each,
    back to back; then of the GPU's work alone (a CUDA graph's replay) against SDPA's cuDNN."""
    import torch.nn.functional as F

    import kernels
    from kernels.attention import sdpa

    ours, records = kernels.get_kernel("attention", OURS), []
    for b, h, s, d in SHORT_PREFILL[:1] if quick else SHORT_PREFILL:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        flop = 4 * b * h * d * visible_pairs(s, None)
        calls = {OURS: functools.partial(ours, q, k, v, True),
                 "F.sdpa": functools.partial(F.scaled_dot_product_attention, q, k, v,
                                             is_causal=True),
                 "sdpa_cudnn": functools.partial(sdpa.attention, "cudnn", q, k, v, True)}
        with torch.no_grad():
            # host-bound, and the host's pace drifts within a run: interleaved rounds, medians
            rounds = [{n: timing.benchmark(calls[n], name=n, min_time_s=0.05).median
                       for n in (OURS, "F.sdpa")} for _ in range(ROUNDS)]
            called = {n: statistics.median(r[n] for r in rounds) for n in (OURS, "F.sdpa")}
            alone = {n: timing.graph_replay_ms(fn, calls=10, reps=20, name=n)
                     for n, fn in calls.items() if n != "F.sdpa"
                     and (n == OURS or sdpa.reason("cudnn", q, k, v, True) is None)}
        what = f"short fwd bf16 B={b} H={h} S={s} D={d} causal"
        print(f"{what}: as called {called[OURS] * 1e3:.1f} µs (F.sdpa "
              f"{called['F.sdpa'] * 1e3:.1f}); the GPU alone {alone[OURS] * 1e3:.1f} µs"
              + (f" (cuDNN {alone['sdpa_cudnn'] * 1e3:.1f})" if "sdpa_cudnn" in alone else ""))
        records.append(results.Record(
            LESSON, f"{OURS} {what} as called", round(timing.tflops(flop, called[OURS]), 1),
            "TFLOP/s", peer=round(timing.tflops(flop, called["F.sdpa"]), 1),
            peer_what="F.scaled_dot_product_attention as a user calls it, same run"))
        if "sdpa_cudnn" in alone:
            records.append(results.Record(
                LESSON, f"{OURS} {what} GPU alone", round(timing.tflops(flop, alone[OURS]), 1),
                "TFLOP/s", peer=round(timing.tflops(flop, alone["sdpa_cudnn"]), 1),
                peer_what="SDPA's cuDNN backend, replayed from a CUDA graph, same run"))
    return records


def _why_slower(what: str) -> str:
    """What limits the Triton forward where it trails SDPA, from what the H100 runs showed."""
    if " short " in f" {what} " and what.endswith("as called"):
        return ("the host: a few microseconds of GPU work, so each call's Python, allocation and "
                "launch set the pace, and they drift by tens of percent between runs on one box")
    if " short " in f" {what} ":
        return ("the dense forward's tile at D = 128: of seven tile configurations timed on an "
                "H100, the one chosen (64x64, 4 warps) was the fastest at S = 512-2048 "
                "(docs/results/nvidia-h100-80gb-hbm3-attention-short-e5bced5.txt)")
    if " varlen " in f" {what} ":
        return ("the Triton forward trails cuDNN on dense GQA prefill too; varlen changes only "
                "its addressing")
    if " window " in f" {what} ":
        return "measured, same run"
    return ("the dense Triton forward trails cuDNN at D = 128 (lesson 09's table: SDPA's cuDNN "
            "backend is the fastest dense forward on the H100)")


def verdicts(records: list[results.Record]) -> list[str]:
    """The targets, one line each: the Triton forward ≥ 1.0× the best SDPA backend on the GQA,
    windowed and varlen problems, and ≥ 90% of copy when decoding with GQA. A rate above
    :data:`IMPOSSIBLE` × copy is called what it is, a broken measurement, never a success."""
    lines = []
    for r in records:
        if not r.what.startswith(f"{OURS} "):
            continue
        if r.unit == "TFLOP/s" and r.peer:
            why = _why_slower(r.what)
            least = SHORT_TARGET if " short " in f" {r.what} " else 1.0
            lines.append(timing.verdict(f"{r.what}: ≥ {least:.1f}× {r.peer_what}",
                                        f"{r.value / r.peer:.2f}×", r.value >= least * r.peer,
                                        why))
        elif r.unit == "GB/s" and r.ceiling and r.value > IMPOSSIBLE * r.ceiling:
            lines.append(f"{r.what}: {r.value / r.ceiling:.0%} of copy is impossible (no kernel "
                         "reads memory faster than the copy does): the time or the byte count "
                         "is wrong, not the kernel fast")
        elif r.unit == "GB/s" and r.ceiling:
            lines.append(timing.verdict(f"{r.what}: ≥ 90% of copy", f"{r.value / r.ceiling:.0%}",
                                        r.value >= 0.9 * r.ceiling,
                                        "the packed kernel's split of the keys or its block may "
                                        "not suit this GPU (python -m "
                                        "kernels.attention.gpu_check --decode times the "
                                        "candidates)"))
    return lines
