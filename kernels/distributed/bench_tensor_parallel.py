"""Lesson 20's tensor-parallel matmul on 2 GPUs: the all-gather hidden behind the matmul::

    python -m course bench bench_tensor_parallel    # 2 GPUs; elsewhere it says what it needs

At each shape (the whole A is M × K in bf16, sharded by rows; the whole B is K × N, sharded by
columns; each rank computes M × N/2) it times, in one run on each rank after a barrier (CUDA
events, the slowest rank's median): the all-gather of A alone, the matmul alone, the unfused
sequence (:func:`~kernels.distributed.tensor_parallel.gather_then_multiply`), the pipelined
one at 2, 4 and 8 chunks, and PyTorch's ``fused_all_gather_matmul``. The gather's share of the
unfused time says how much there is to hide: the shapes run from N = 2048 (the gather is
about as long as the matmul) to N = 8192 (the matmul dominates).

Target (issue 35): at a shape where the gather is at least 30% of the unfused time, the
pipelined matmul at least 1.15× faster than the unfused sequence.
"""

from __future__ import annotations

from course_utils import requirements, results
from kernels.distributed import launch, tensor_parallel

LESSON = "distributed.tensor_parallel"
SHAPES = ((8192, 8192, 2048), (8192, 8192, 4096), (16384, 8192, 4096), (8192, 8192, 8192))
QUICK_SHAPES = ((4096, 4096, 2048),)
CHUNK_COUNTS = (2, 4, 8)
TARGET_SHARE, TARGET_SPEEDUP = 0.30, 1.15
UNFUSED = "all-gather then matmul"


def _tag(m: int, k: int, n: int) -> str:
    return f"bf16 M={m} K={k} N={n} 2 GPUs"


def records_of(m: int, k: int, n: int, found: dict) -> list[results.Record]:
    """The records of one shape's :func:`~kernels.distributed.tensor_parallel.timed`."""
    tag, unfused = _tag(m, k, n), round(found["gather_then_multiply"], 4)
    peer = {"peer": unfused, "peer_what": f"{UNFUSED}, same run"}
    rows = [results.Record(LESSON, f"{UNFUSED} {tag}", unfused, "ms"),
            results.Record(LESSON, f"all-gather alone {tag}", round(found["gather"], 4), "ms",
                           **peer),
            results.Record(LESSON, f"matmul alone {tag}", round(found["matmul"], 4), "ms",
                           **peer)]
    for name, ms in found.items():
        if name.startswith("pipelined") and isinstance(ms, float):
            rows.append(results.Record(LESSON, f"{name} {tag}", round(ms, 4), "ms", **peer))
    if isinstance(found["fused"], float):
        rows.append(results.Record(LESSON, f"fused_all_gather_matmul {tag}",
                                   round(found["fused"], 4), "ms", **peer))
    return rows


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if why := requirements.unmet("gpus2"):
        print(f"the tensor-parallel matmul is timed on 2 GPUs ({'; '.join(why)}); on a CPU "
              "its checks run with gloo: tests/test_tensor_parallel.py")
        return []
    records: list[results.Record | results.Note] = []
    print(header(CHUNK_COUNTS))
    skipped = None
    for m, k, n in QUICK_SHAPES if quick else SHAPES:
        found = launch.run(tensor_parallel.timed, 2, m, k, n, CHUNK_COUNTS,
                           device="cuda", timeout_s=300)[0]
        if isinstance(found["fused"], str):
            skipped = f"fused_all_gather_matmul did not run: {found['fused']}"
        print(line(_tag(m, k, n), found, CHUNK_COUNTS))
        records += records_of(m, k, n, found)
    for said in verdicts([r for r in records if isinstance(r, results.Record)]):
        print(said)
    if skipped:
        print(skipped)
        records.append(results.Note(LESSON, skipped))
    return records


def header(chunk_counts: tuple[int, ...]) -> str:
    """The title row of :func:`line`'s table."""
    return (f"{'shape':<36}{'gather':>9}{'matmul':>9}{'unfused':>9}{'share':>7}"
            + "".join(f"{f'pipe×{c}':>9}" for c in chunk_counts) + f"{'fused':>9}   (ms)")


def line(label: str, found: dict, chunk_counts: tuple[int, ...]) -> str:
    """One shape's times (ms) and the gather's share of the unfused time, as one row."""
    fused = found["fused"]
    return (f"{label:<36}{found['gather']:>9.3f}{found['matmul']:>9.3f}"
            f"{found['gather_then_multiply']:>9.3f}{found['share']:>7.0%}"
            + "".join(f"{found[f'pipelined chunks={c}']:>9.3f}" for c in chunk_counts)
            + (f"{fused:>9.3f}" if isinstance(fused, float) else f"{'—':>9}"))


def _by_shape(records: list[results.Record]) -> dict[str, dict[str, float]]:
    """``{shape tag: {what without the tag: ms}}``."""
    found: dict[str, dict[str, float]] = {}
    for r in records:
        if r.lesson == LESSON and r.unit == "ms" and " bf16 " in r.what:
            what, tag = r.what.split(" bf16 ", 1)
            found.setdefault(f"bf16 {tag}", {})[what] = r.value
    return found


def verdicts(records: list[results.Record]) -> list[str]:
    """The target, one line per shape where the gather is at least 30% of the unfused time
    (the best chunk count of the pipelined matmul, and PyTorch's fused one beside it), or one
    line saying no shape got there."""
    from course_utils import timing

    lines, shares = [], {}
    for tag, by in _by_shape(records).items():
        unfused, gather = by.get(UNFUSED), by.get("all-gather alone")
        if not unfused or gather is None:
            continue
        shares[tag] = gather / unfused
        if shares[tag] < TARGET_SHARE:
            continue
        piped = {w: ms for w, ms in by.items() if w.startswith("pipelined")}
        if piped:
            best = min(piped, key=piped.get)
            lines.append(timing.verdict(
                f"{tag} (gather {shares[tag]:.0%} of the unfused time): the pipelined matmul "
                f"≥ {TARGET_SPEEDUP}× the all-gather-then-matmul sequence",
                f"{unfused / piped[best]:.2f}× ({best})", unfused >= TARGET_SPEEDUP * piped[best],
                "NCCL's kernels take SMs from the matmul while they run, and each chunk "
                "pays the all-gather's latency (the trace shows where)"))
        if "fused_all_gather_matmul" in by:
            fused = by["fused_all_gather_matmul"]
            lines.append(timing.verdict(
                f"{tag}: PyTorch's fused_all_gather_matmul ≥ {TARGET_SPEEDUP}× the sequence",
                f"{unfused / fused:.2f}×", unfused >= TARGET_SPEEDUP * fused,
                "its copy engines read one peer's whole shard before that matmul starts"))
    if shares and not lines:
        top = max(shares, key=shares.get)
        lines.append(timing.verdict(
            f"a shape where the gather is ≥ {TARGET_SHARE:.0%} of the unfused time",
            f"at most {shares[top]:.0%} ({top})", False,
            "the link is fast for these shapes: a smaller N makes the matmul shorter"))
    return lines


def recorded() -> tuple[str, list[results.Record]] | None:
    """(environment line, records) of the GPU that recorded this benchmark (the course's
    reference GPU first), or None where none has."""
    from course_utils import claims

    found = claims.with_lesson(LESSON)
    return None if found is None else (found.environment_line(LESSON), found.of(LESSON))
