"""The scoreboard that opens the takeaways of the two Hopper attention lessons (syllabus slugs
``hopper_attention`` and ``hopper_backward``): each step of the Hopper forward, and each version
of its backward, in TFLOP/s at one problem and as a ratio to SDPA's cuDNN backend and to the
attention lesson's Triton kernel of the same run.

Why a function and not a paragraph: a scoreboard is all numbers, and a number typed into prose
goes stale when ``make bench`` runs again. :func:`show` reads the records ``make bench``
committed (``docs/results/<device>.json``: the H100's, else any GPU's that has them, through
:func:`course_utils.claims.with_lesson`), so the cell runs on a laptop, and says so in one line
where no GPU has recorded the kernels yet. :func:`slower` names each kernel that trails the one
before it: the takeaways explain those, and ``tests/test_attention_hopper_scoreboard.py`` checks
that the records still show what the takeaways explain.

    print(scoreboard.show("fwd"))       # the forward's lesson: steps 1-5
    print(scoreboard.show("fwd+bwd"))   # the backward's: versions 1 and 2, then the fp8 forward
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils import claims, plots, syllabus
from kernels.attention import bench
from kernels.attention.hopper import bwd, fwd

PROBLEM = "bfloat16 B=4 H=16 S=4096 D=128"  # the row's problem; the last column spans them all
CUDNN, TRITON = "sdpa_cudnn", "triton"
FP8_LESSON = "hopper_backward.fp8"  # kernels/scaled_attention/bench.py's record key
# interleaved rounds of one run move by a few percent (the H100's clock moves): a kernel trails
# the one before it when it is more than this far behind
NOISE = 0.03


def kernels(passes: str) -> dict[str, str]:
    """{provider as the records name it: its label}, in the staircase's order."""
    if passes == "fwd":  # the registry's ("attention", "wgmma") is the last step
        return {"wgmma" if s is fwd.BEST else f"wgmma[{s.name}]": f"step {s.number}"
                for s in fwd.STEPS.values()}
    if passes == "fwd+bwd":  # ... trained with the backward's BEST version
        return {"wgmma" if v == bwd.BEST else f"wgmma[{bwd.VARIANTS[v]}]":
                f"version {v}: {bwd.IDEAS[v].split(',')[0]}" for v in sorted(bwd.VARIANTS)}
    raise ValueError(f"passes expected 'fwd' or 'fwd+bwd', got {passes!r}")


def timed(recorded: claims.Recorded, passes: str) -> dict[tuple[str, str], float]:
    """{(provider, problem): TFLOP/s} of the attention benchmark's records of ``passes`` (it times
    every registered kernel); the problem without the passes ("bfloat16 B=4 H=16 S=4096 D=128
    causal")."""
    kernels(passes)  # (checks passes)
    found = {}
    for r in recorded.of(bench.LESSON):
        name, _, rest = r.what.partition(" ")
        what, _, problem = rest.partition(" ")
        if r.unit == "TFLOP/s" and what == passes:
            found[name, problem] = r.value
    return found


def rows(recorded: claims.Recorded, passes: str = "fwd", problem: str = PROBLEM) -> list[dict]:
    """One row per recorded kernel of ``passes`` at ``problem``: TFLOP/s, its ratio to cuDNN and
    to the Triton kernel there, and its ratio to cuDNN at every recorded problem (lowest to
    highest)."""
    rates = timed(recorded, passes)
    problems = [p for p in dict.fromkeys(p for _, p in rates) if (CUDNN, p) in rates]
    found = []
    for name, label in kernels(passes).items():
        if (name, problem) not in rates:
            continue
        value = rates[name, problem]
        row = {"kernel": label, "TFLOP/s": round(value, 1)}
        for peer, column in ((CUDNN, "× cuDNN"), (TRITON, "× Triton")):
            row[column] = round(value / rates[peer, problem], 2) if (peer, problem) in rates \
                else None
        spread = [rates[name, p] / rates[CUDNN, p] for p in problems if (name, p) in rates]
        row["× cuDNN, every problem"] = f"{min(spread):.2f}–{max(spread):.2f}"
        found.append(row)
    return found


@dataclass(frozen=True)
class Slower:
    """``kernel`` trails ``before`` (by more than :data:`NOISE`) at ``behind`` of ``of``
    problems, by ``lowest`` to ``highest`` times its rate there."""

    kernel: str
    before: str
    behind: int
    of: int
    lowest: float
    highest: float

    def __str__(self) -> str:
        return (f"{self.kernel} is slower than {self.before} at {self.behind} of {self.of} "
                f"recorded problems ({self.lowest:.2f}–{self.highest:.2f}× its rate there)")


def slower(recorded: claims.Recorded, passes: str = "fwd") -> list[Slower]:
    """Each recorded kernel that trails the one before it in :func:`kernels`' order."""
    rates = timed(recorded, passes)
    labels = {name: label.split(":")[0] for name, label in kernels(passes).items()}
    names = [n for n in labels if any(k == n for k, _ in rates)]
    found = []
    for before, after in zip(names, names[1:], strict=False):
        ratios = [v / rates[before, p] for (n, p), v in rates.items()
                  if n == after and (before, p) in rates]
        behind = [x for x in ratios if x < 1 - NOISE]
        if behind:
            found.append(Slower(labels[after], labels[before], len(behind), len(ratios),
                                min(behind), max(behind)))
    return found


def fp8_rows(recorded: claims.Recorded) -> list[dict]:
    """The fp8 forward (the backward's lesson, section 2) per problem: TFLOP/s, × cuDNN's bf16
    and × our bf16 Triton forward, all of the same run (the bf16 forward's record carries cuDNN
    as its peer)."""
    found = {r.what: r for r in recorded.of(FP8_LESSON) if r.unit == "TFLOP/s"}
    out = []
    for what, r in found.items():
        bf16 = found.get(what.replace("triton fp8 ", "triton bf16 "))
        if what.startswith("triton fp8 ") and bf16 is not None:
            out.append({"fp8 forward": what.removeprefix("triton fp8 fwd "),
                        "TFLOP/s": round(r.value, 1), "× cuDNN bf16": round(r.value / bf16.peer, 2),
                        "× our bf16 Triton": round(r.value / bf16.value, 2)})
    return out


def show(passes: str = "fwd", problem: str = PROBLEM, directory=None) -> str:
    """The scoreboard as the takeaways print it: the table, then each kernel that trails the one
    before it; one line saying so where no GPU has recorded them."""
    what = "the Hopper forward's steps" if passes == "fwd" else "the Hopper backward"
    recorded = claims.with_lesson(bench.LESSON, directory=directory)
    found = rows(recorded, passes, problem) if recorded else []
    if not found:
        return (f"no records of {what} ({passes}, {problem}) yet: `make bench` on a Hopper GPU "
                "writes them")
    title = (f"{what} at {passes} {problem}: TFLOP/s, × cuDNN and × the Triton kernel of the "
             f"same run\nrecorded by make bench on {recorded.environment_line(bench.LESSON)}")
    lines = [plots.stamped_table(found, title=title)]
    lines += [f"  {s}" for s in slower(recorded, passes)] or ["  no kernel trails the one before"]
    lines.append("")
    fp8 = claims.with_lesson(FP8_LESSON, directory=directory) if passes == "fwd+bwd" else None
    if fp8 and (more := fp8_rows(fp8)):
        lesson = syllabus.lesson(FP8_LESSON).label
        lines.append(plots.stamped_table(more, title=f"the fp8 forward (lesson {lesson}, section "
                                         f"2)\nrecorded on {fp8.environment_line(FP8_LESSON)}"))
    return "\n".join(lines)
