"""Lesson 20's data parallelism on 1 and 2 GPUs: the hand-written buckets against DDP, and how
well one more GPU pays::

    python -m course bench bench_data_parallel     # 2 GPUs; elsewhere it says what it needs

The model is lesson 12's GPT-2 small (124M parameters) in bf16 autocast, S = 1024, 8 sequences
per rank: a step of tens of ms whose gradients (about 500 MB of fp32) take a few ms to
all-reduce over NVLink, so the all-reduces can hide in the backward. Every method is
:func:`kernels.distributed.data_parallel.train` (the same model, seed and data; each step timed
between two device synchronisations), the median step time without the first
:data:`WARMUP_STEPS`, the slowest rank's:

* on 2 GPUs: naive (an all-reduce per parameter after the backward), bucketed and overlapped
  (buckets of 25 MiB launched from gradient hooks), and ``DistributedDataParallel`` with the
  same bucket size;
* on 1 GPU (a group of one, the same code): bucketed and DDP.

**Weak scaling**: the batch per rank is fixed (8 sequences), so 2 GPUs do twice the work of 1 in
a step; the efficiency is t(1 GPU) / t(2 GPUs), 1.0 when the second GPU's share costs nothing
(the all-reduce entirely hidden), lower by the communication left exposed.

Targets (issue 35): bucketed ≥ 0.95× DDP's speed on 2 GPUs (its step at most 1/0.95 of
DDP's), and a weak-scaling efficiency from 1 to 2 GPUs ≥ 90%.
"""

from __future__ import annotations

from course_utils import requirements, results
from kernels.distributed import data_parallel, launch
from kernels.model.config import GPT2_SMALL

LESSON = "distributed.data_parallel"
MODEL, MODEL_NAME, PRECISION = GPT2_SMALL, "GPT-2 small", "bf16-autocast"
SEQ, PER_RANK = 1024, 8
STEPS, WARMUP_STEPS = 20, 3
BUCKET_BYTES = 25 * 2**20  # DDP's default bucket_cap_mb
ON_TWO = ("naive", "bucketed", "ddp")
ON_ONE = ("bucketed", "ddp")
TARGET_VS_DDP, TARGET_SCALING = 0.95, 0.90
# where a profiled step's GPU time went (kernels/distributed/profile.py): compute kernels, NCCL's,
# the time both ran, and from the first kernel to the last
BUSY_PARTS = ("compute", "nccl", "overlap", "span")


def tag(gpus: int, seq: int = SEQ) -> str:
    return (f"{MODEL_NAME} {PRECISION} S={seq} B={PER_RANK}/rank {gpus} GPU"
            + ("s" if gpus > 1 else ""))


def _step_times(gpus: int, methods: tuple[str, ...], steps: int, seq: int
                ) -> tuple[dict[str, float], dict[str, dict]]:
    """({method: the slowest rank's median step ms}, {method: where rank 0's GPU time went in
    one more, profiled step (:func:`kernels.distributed.profile.busy`)}) on ``gpus`` GPUs."""
    ranks = launch.run(data_parallel.train_all, gpus, methods=methods, steps=steps,
                       batch_size=PER_RANK * gpus, seq=seq, config=MODEL,
                       bucket_bytes=BUCKET_BYTES, precision=PRECISION, keep_params=False,
                       profile_step=True, device="cuda", timeout_s=600)
    times = {m: max(data_parallel.median_step_ms(runs[i], WARMUP_STEPS) for runs in ranks)
             for i, m in enumerate(methods)}
    return times, {m: ranks[0][i]["busy"] for i, m in enumerate(methods) if ranks[0][i]["busy"]}


def run(quick: bool = False) -> list[results.Record]:
    if why := requirements.unmet("gpus2"):
        print(f"data parallelism is timed on 2 GPUs ({'; '.join(why)}); on a CPU its checks "
              "run with gloo: tests/test_distributed.py")
        return []
    steps, seq = (WARMUP_STEPS + 4, SEQ // 2) if quick else (STEPS, SEQ)
    two, busy = _step_times(2, ON_TWO, steps, seq)
    one, _ = _step_times(1, ON_ONE, steps, seq)
    ddp = {"peer": round(two["ddp"], 3), "peer_what": "DistributedDataParallel on 2 GPUs, "
           "same buckets, same run"}
    records = [results.Record(LESSON, f"step {m} {tag(2, seq)}", round(ms, 3), "ms", **ddp)
               for m, ms in two.items()]
    records += [results.Record(LESSON, f"step {m} {tag(1, seq)}", round(ms, 3), "ms",
                               peer=round(two[m], 3), peer_what=f"{m} on 2 GPUs, same run")
                for m, ms in one.items()]
    print(f"{'method':<10}{'1 GPU ms':>10}{'2 GPUs ms':>11}{'weak scaling':>14}   "
          f"({tag(2, seq)})")
    for m, ms in two.items():
        print(f"{m:<10}" + (f"{one[m]:>10.2f}" if m in one else f"{'—':>10}") + f"{ms:>11.2f}"
              + (f"{one[m] / ms:>14.0%}" if m in one else ""))
    records += [results.Record(LESSON, f"GPU busy {m} {part} {tag(2, seq)}",
                               round(b[f"{part}_ms"], 3), "ms")
                for m, b in busy.items() for part in BUSY_PARTS]
    if busy:
        print(f"one profiled step on rank 0, ms: {'method':<10}"
              + "".join(f"{part:>10}" for part in BUSY_PARTS))
        for m, b in busy.items():
            print(f"{'':<33}{m:<10}" + "".join(f"{b[f'{p}_ms']:>10.2f}" for p in BUSY_PARTS))
    for line in verdicts(records):
        print(line)
    return records


def _steps(records: list[results.Record], gpus: int) -> dict[str, float]:
    ending = f" {gpus} GPU" + ("s" if gpus > 1 else "")
    return {r.what.split()[1]: r.value for r in records
            if r.lesson == LESSON and r.what.startswith("step ") and r.what.endswith(ending)}


def verdicts(records: list[results.Record]) -> list[str]:
    """The two targets read from ``records``, one line each (and DDP's own scaling beside)."""
    from course_utils import timing

    two, one = _steps(records, 2), _steps(records, 1)
    lines = []
    if "bucketed" in two and "ddp" in two:
        speed = two["ddp"] / two["bucketed"]
        lines.append(timing.verdict(
            f"bucketed, overlapped data parallelism ≥ {TARGET_VS_DDP}× DDP's speed on 2 GPUs",
            f"{speed:.2f}× ({two['bucketed']:.1f} ms against {two['ddp']:.1f} ms a step)",
            speed >= TARGET_VS_DDP, _why_slower(records)))
    for m in ("bucketed", "ddp"):
        if m in one and m in two:
            efficiency = one[m] / two[m]
            lines.append(timing.verdict(
                f"{m}: weak-scaling efficiency 1 → 2 GPUs (8 sequences per rank) ≥ "
                f"{TARGET_SCALING:.0%}", f"{efficiency:.0%} ({one[m]:.1f} → {two[m]:.1f} ms)",
                efficiency >= TARGET_SCALING, "part of the all-reduce is left after the "
                "backward (the last bucket, holding the embedding, is ready only at its end)"))
    return lines


def _why_slower(records: list[results.Record]) -> str:
    """Why bucketed may trail DDP: read from the profiled steps where they were recorded."""
    busy = {(r.what.split()[2], r.what.split()[3]): r.value for r in records
            if r.lesson == LESSON and r.what.startswith("GPU busy ")}
    if not all((m, p) in busy for m in ("bucketed", "ddp") for p in ("compute", "nccl")):
        return ("its hooks run in Python on the backward's thread, and its buckets follow the "
                "parameters' order, where DDP's C++ reducer plans them again after the first "
                "step in the order the gradients arrived")
    compute = (f"in one profiled step its compute kernels ran {busy['bucketed', 'compute']:.1f}"
               f" ms against DDP's {busy['ddp', 'compute']:.1f}")
    if ("naive", "compute") in busy:
        compute += f" and naive's {busy['naive', 'compute']:.1f} (no overlap)"
    exposed = [f"{m}'s NCCL kernels {busy[m, 'nccl']:.1f} ms, "
               f"{busy[m, 'nccl'] - busy.get((m, 'overlap'), 0.0):.1f} of it beside no compute"
               for m in ("bucketed", "ddp")]
    return "; ".join([compute, *exposed])


def recorded() -> tuple[str, list[results.Record]] | None:
    """(environment line, records) of the GPU that recorded this benchmark (the course's
    reference GPU first), or None where none has."""
    from course_utils import claims

    found = claims.with_lesson(LESSON)
    return None if found is None else (found.environment_line(LESSON), found.of(LESSON))
