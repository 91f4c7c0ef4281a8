"""Lesson 12's benchmark records read back: step times, profile parts, loss curves, and the
issue's targets judged from them.

:mod:`kernels.model.bench` measures and writes the records (``step <config> <precision> S=..
B=..``, ``profile ...``, ``peak memory ...``, ``loss <config> step=N ...``, ``final loss ...``);
this module reads records of that form, whether a run just made them or they were committed
for a GPU (:func:`recorded`, ``docs/results/<slug>.json``): :func:`step_times`, :func:`parts`,
:func:`loss_curves_from`, and :func:`verdicts`, one line per target.

Separate from the benchmark because a CPU student reads a GPU's records without running
anything: lesson 12's notebook and exercises read them so. ``bench`` imports these names, so
``bench.verdicts``, ``bench.recorded`` and the rest work as before.
"""

from __future__ import annotations

from course_utils import env, results, timing

LESSON = "model"
RECORDED = "nvidia-h100-80gb-hbm3"  # whose committed records a CPU run shows
TARGET_LOSS = 0.01  # all course kernels within 1% of eager's loss after bench.LOSS_STEPS steps


def _field(what: str, name: str) -> str:
    return what.split(f" {name}=")[1].split()[0]


def step_times(records: list[results.Record]) -> dict[int, dict[str, float]]:
    """``{S: {config key: step ms}}`` from the records."""
    found: dict[int, dict[str, float]] = {}
    for r in records:
        if r.what.startswith("step ") and r.unit == "ms":
            found.setdefault(int(_field(r.what, "S")), {})[r.what.split()[1]] = r.value
    return found


def parts(records: list[results.Record], key: str, seq: int) -> dict[str, float]:
    """``{part: ms}`` of configuration ``key``'s profile at sequence ``seq`` (launch gaps
    included where recorded)."""
    found = {}
    for r in records:
        if r.what.startswith(f"profile {key} ") and int(_field(r.what, "S")) == seq:
            found[r.what.removeprefix(f"profile {key} ").split(" ", 1)[0]
                  if "launch gaps" not in r.what else "launch gaps"] = r.value
    return found


def loss_curves_from(records: list[results.Record]) -> dict[str, dict[int, float]]:
    """``{config key: {step: loss}}`` from the recorded loss points."""
    found: dict[str, dict[int, float]] = {}
    for r in records:
        if r.what.startswith("loss ") and " step=" in r.what:
            found.setdefault(r.what.split()[1], {})[int(_field(r.what, "step"))] = r.value
    return found


def verdicts(records: list[results.Record]) -> list[str]:
    """The issue's targets read from ``records``, one line each."""
    lines = []
    times = step_times(records)
    for seq, by_key in sorted(times.items()):
        course, compiled, eager = (by_key.get(k) for k in ("all-course", "compile", "eager"))
        if course and compiled:
            lines.append(timing.verdict(f"S={seq}: all course kernels ≥ 1.0× torch.compile",
                                        f"{compiled / course:.2f}×", compiled >= course,
                                        "step times, same run"))
        if course and eager and seq >= 4096:
            lines.append(timing.verdict(f"S={seq}: all course kernels ≥ 1.3× eager",
                                        f"{eager / course:.2f}×", eager >= 1.3 * course,
                                        "step times, same run"))
        # the step in one CUDA graph, against both compiled steps: compile's default mode (the
        # issue's target) and its reduce-overhead mode, which replays CUDA graphs of its own
        graphed = by_key.get("all-course-graph")
        for key, what in (("compile", "torch.compile"),
                          ("compile-ro", "torch.compile(mode='reduce-overhead')")):
            if graphed and by_key.get(key):
                lines.append(timing.verdict(
                    f"S={seq}: all course kernels, step in one CUDA graph ≥ 1.0× {what}",
                    f"{by_key[key] / graphed:.2f}× ({graphed:.2f} vs {by_key[key]:.2f} ms)",
                    by_key[key] >= graphed, "step times, same run"))
    peaks = {(r.what.split()[2], int(_field(r.what, "S"))): r.value for r in records
             if r.what.startswith("peak memory ")}
    squares = {int(_field(r.what, "S")): r.value for r in records
               if r.what.startswith("saved S×S tensors eager ")}
    for seq, square in sorted(squares.items()):
        course, eager = peaks.get(("all-course", seq)), peaks.get(("eager", seq))
        if course is not None and eager is not None and seq >= 4096:
            lines.append(timing.verdict(
                f"S={seq}: peak ≤ eager's minus its saved S×S tensors ({eager:,.0f} − "
                f"{square:,.0f} = {eager - square:,.0f} MiB)", f"{course:,.0f} MiB",
                course <= eager - square, "measured, same run"))
    finals = {r.what.split()[2]: r for r in records if r.what.startswith("final loss ")}

    def gap(key: str) -> float:
        return abs(finals[key].value - finals[key].peer) / finals[key].peer

    # how far rounding alone moves this run's loss: runs that differ only in how they round
    sticks = [f"{who} ends {gap(key):.2%} from eager's" for key, who in
              (("compile", "torch.compile"), ("fp32", "eager in fp32")) if key in finals
              and finals[key].peer]
    yardstick = "; rounding alone moves it: " + ", ".join(sticks) if sticks else ""
    for key, who in (("all-course", ""), ("all-course-graph", ", the step in one CUDA graph")):
        if key not in finals or not finals[key].peer:
            continue
        r = finals[key]
        run = r.what.split(" after ")[1]
        lines.append(timing.verdict(f"loss within {TARGET_LOSS:.0%} of eager's{who} ({run})",
                                    f"{gap(key):.2%} apart ({r.value:.4f} vs {r.peer:.4f})",
                                    gap(key) <= TARGET_LOSS, "the kernels round differently "
                                    "in bf16 (same seed and data): " + _crossings(records)
                                    + yardstick))
    return lines


def _crossings(records: list[results.Record]) -> str:
    """How often the all-course loss curve crosses eager's, in words: curves that cross are
    apart by the noise of their rounding, not by a wrong gradient (which keeps one side)."""
    curves = loss_curves_from(records)
    eager, course = curves.get("eager", {}), curves.get("all-course", {})
    steps = sorted(set(eager) & set(course))
    signs = [course[s] < eager[s] for s in steps]
    crossed = sum(a != b for a, b in zip(signs, signs[1:], strict=False))
    return (f"the curves cross {crossed} times in {len(steps)} points, the course's "
            f"{'below' if signs and signs[-1] else 'above'} eager's at the end")


def recorded(slug: str = RECORDED) -> tuple[str, list[results.Record]]:
    """(environment line, lesson 12's records) from ``docs/results/<slug>.json``;
    FileNotFoundError when that GPU has not run ``make bench`` for this lesson yet."""
    from course_utils import claims

    data = claims.load(slug) if (env.RESULTS_DIR / f"{slug}.json").exists() else None
    if data is None or not data.of(LESSON):
        raise FileNotFoundError(f"no lesson 12 records for {slug} in {env.RESULTS_DIR}: "
                                "`python -m course bench model` on that GPU writes them")
    return data.environment_line(LESSON), data.of(LESSON)
