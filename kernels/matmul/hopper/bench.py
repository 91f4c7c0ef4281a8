"""The measurements of the Hopper matmul (lessons 16 and 17): each step against the ``wgmma``
ceiling and cuBLAS, in one process.

* the instruction ceiling per type (:func:`kernels.matmul.hopper.ceiling.wgmma_ceiling`);
* the staircase in bf16 at 4096³ and 8192³: lesson 08's ``mma.sync`` kernel (``mma.cu``; its
  records keep the name "lesson 07"), then steps 1-5, each beside ``torch.mm`` (cuBLAS)
  measured in the same run;
* what limits steps 4 and 5 at 8192³ (:func:`power`): the same kernels and cuBLAS on random
  data and on zeros and ones, with the SM clock and the power each ran at;
* the last step in fp16 (``torch.mm``) and fp8 (``torch._scaled_mm`` with unit scales), and in
  bf16 at shapes that are not squares or not tile multiples;
* what a caller pays: the registered kernel called as a user calls it
  (``kernels.get_kernel(...)(a, b)``), back to back and one call between two events;
* the pipeline's timeline per step (:mod:`~kernels.matmul.hopper.timeline`), saved for CPU
  students beside the results.

``make bench`` calls :func:`run`; notebook 16 reads the records (and notebook 15 the ceilings),
all under the key of the steps' lesson, ``hopper_matmul``.
"""

from __future__ import annotations

import torch

from course_utils import clocks, env, results, syllabus, timing
from kernels.matmul.hopper import ceiling, timeline, triton_tma, wgmma

LESSON = "hopper_matmul"
TRITON = "Triton: the same tile ideas from a compiler (TMA descriptors, persistent)"
SIZES = (4096, 8192)
SHAPES = ((2048, 2048, 2048), (8192, 1024, 8192), (4000, 4000, 4096))  # (M, N, K)


def operands(v: wgmma.Variant, m: int, n: int, k: int):
    """Fresh random A [M, K] row-major and B [K, N] column-major, scaled so sums stay O(1)."""
    a = (torch.randn(m, k, device="cuda") / k**0.25).to(v.a)
    b = (torch.randn(n, k, device="cuda") / k**0.25).to(v.b).t()
    return a, b


def light_operands(v: wgmma.Variant, m: int, n: int, k: int):
    """A and B as :func:`operands` lays them out, holding the ceiling kernel's data: every third
    element 0, the others 1. The same instructions on data that flips few bits draw less power."""
    def pattern(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
        i = torch.arange(rows * cols, device="cuda").view(rows, cols)
        return (i % 3 != 0).to(dtype)

    return pattern(m, k, v.a), pattern(n, k, v.b).t()


def peer(v: wgmma.Variant, a: torch.Tensor, b: torch.Tensor):
    """(name, callable) of cuBLAS for these types through PyTorch, or None where it has none:
    lesson 07's answer, which knows the same variant names (torch.mm, torch._scaled_mm)."""
    from kernels.matmul import bench_mma

    return bench_mma.peer(v, a, b)


def rate(fn, flop: int, name: str) -> float:
    return timing.tflops(flop, timing.benchmark(fn, device="cuda", name=name).median)


def rates(fns: dict, flop: int, rounds: int = 3) -> dict[str, float]:
    """TFLOP/s of each callable, measured in ``rounds`` interleaved rounds (the median of each).

    An H100 under a long matmul slows its clock as it heats: measured one after the other, the
    later kernel of a pair is timed on a slower GPU. Alternating spreads that over all of them."""
    found = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            found[name].append(rate(fn, flop, name))
    return {name: sorted(r)[len(r) // 2] for name, r in found.items()}


def bare_launch(s: wgmma.Step, v: wgmma.Variant, a: torch.Tensor, b: torch.Tensor):
    """The kernel alone: operands checked, output allocated and launch prepared once, outside
    the timing (so that a short kernel is not timed behind the host's per-call work)."""
    out = torch.empty(a.shape[0], b.shape[1], dtype=v.out, device="cuda")
    launch = wgmma.plan(s, v, a, b, out)
    return lambda: launch(out)


def one_call_between_events(fn, flop: int) -> float:
    """TFLOP/s of a single call timed as a student's timer does: two events around it, the GPU
    idle before it (:func:`course_utils.timing.one_call`, the median of 5 after one warm-up)."""
    return timing.tflops(flop, timing.one_call(fn, warmup=1, reps=5, device="cuda").median)


def staircase(size: int, ceilings: dict[str, float]) -> list[results.Record]:
    """bf16 at size³: lesson 07's mma.sync kernel, then every step, each beside cuBLAS."""
    from kernels.matmul import mma

    v = wgmma.variant("bf16")
    a, b = operands(v, size, size, size)
    flop = timing.matmul_flop(size, size, size)
    fns = {"cuBLAS": lambda: torch.mm(a, b),
           "mma.sync (mma.cu)": lambda: mma.matmul(a, b, "bf16")}
    fns.update({f"{s.name}: {s.idea}": bare_launch(s, v, a, b) for s in wgmma.STEPS.values()})
    fns[TRITON] = lambda: triton_tma.matmul(a, b)
    found = rates(fns, flop)
    cublas = found.pop("cuBLAS")
    return [results.Record(LESSON, f"bf16 {name} {size}^3", value, "TFLOP/s",
                           ceilings["bf16"], "wgmma bf16 ceiling, same run",
                           cublas, "torch.mm (cuBLAS), same run") for name, value in found.items()]


def best_step(v: wgmma.Variant, m: int, n: int, k: int,
              ceilings: dict[str, float]) -> list[results.Record]:
    """The last step at one shape: bare launch, registered call, one call between events."""
    import kernels

    s = wgmma.BEST
    a, b = operands(v, m, n, k)
    flop = timing.matmul_flop(m, n, k)
    shape = f"{m}x{n}x{k}" if len({m, n, k}) > 1 else f"{m}^3"
    found = peer(v, a, b)
    registered = kernels.get_kernel("matmul", "wgmma", f"{s.name}_{v.name}")
    fns = {"bare": bare_launch(s, v, a, b), "registered": lambda: registered(a, b)}
    if found:
        fns["peer"] = found[1]
    measured = rates(fns, flop)
    pair = dict(peer=measured["peer"], peer_what=f"{found[0]}, same run") if found else {}
    top = dict(ceiling=ceilings[v.name], ceiling_what=f"wgmma {v.name} ceiling, same run")
    return [
        results.Record(LESSON, f"{v.name} {s.name} {shape}", measured["bare"], "TFLOP/s",
                       **top, **pair),
        results.Record(LESSON, f"{v.name} {s.name} {shape} registered call, back to back",
                       measured["registered"], "TFLOP/s", **top, **pair),
        results.Record(LESSON, f"{v.name} {s.name} {shape} registered call, one call between "
                       "events", one_call_between_events(lambda: registered(a, b), flop),
                       "TFLOP/s", **top, **pair),
    ]


DATA = {"random": operands, "0/1": light_operands}  # what power() runs the kernels on


def power(size: int, ceilings: dict[str, float], seconds: float = 2.0) -> list[results.Record]:
    """Steps 4 and 5 beside cuBLAS at bf16 ``size``³, on random data and on zeros and ones
    (:func:`light_operands`): their TFLOP/s (cuBLAS on the same data as the peer), then the SM
    clock and the power each ran at (:func:`course_utils.clocks.under_load`, ``seconds`` each).
    On random data an H100 reaches its power limit and lowers its clock; the ceiling kernel's
    data does not, so the gap between the two is power, not the kernel."""
    v = wgmma.variant("bf16")
    flop = timing.matmul_flop(size, size, size)
    steps = (wgmma.STEPS[4], wgmma.STEPS[5])
    found = []
    for data, make in DATA.items():
        a, b = make(v, size, size, size)
        fns = {"cuBLAS": lambda a=a, b=b: torch.mm(a, b)}
        fns.update({s.name: bare_launch(s, v, a, b) for s in steps})
        measured = rates(fns, flop)
        found += [results.Record(LESSON, f"bf16 {s.name} {size}^3 on {data} data",
                                 measured[s.name], "TFLOP/s", ceilings["bf16"],
                                 "wgmma bf16 ceiling (0/1 data), same run", measured["cuBLAS"],
                                 f"torch.mm (cuBLAS) on {data} data, same run") for s in steps]
        if clocks.unavailable_reason():
            continue
        for name, fn in fns.items():
            load = clocks.under_load(fn, seconds)
            what = f"bf16 {name} {size}^3 on {data} data:"
            found += [results.Record(LESSON, f"{what} SM clock", load.sm_mhz, "MHz",
                                     load.max_sm_mhz, "the GPU's maximum SM clock"),
                      results.Record(LESSON, f"{what} power", load.watts, "W",
                                     load.power_limit_w, "the board's power limit")]
    return found


def capture_timelines(path=None, m: int = 4096, n: int = 4096, k: int = 4096):
    """Timelines of every step at one problem, saved as ``docs/results/<device>-timeline.json``
    (where the notebook reads them)."""
    captured = {f"{s.name}: {s.idea}": timeline.capture(s.number, m, n, k)
                for s in wgmma.STEPS.values()}
    path = path or env.RESULTS_DIR / f"{env.device_slug()}-timeline.json"
    timeline.save(captured, path)
    for label, events in captured.items():
        print(f"  {label[:60]:60s} consumers waited {timeline.bubble_fraction(events):.0%}")
    return path


def run(quick: bool = False) -> list[results.Record]:
    if reason := wgmma.reason_here():
        print(f"Hopper matmul benchmark skipped: {reason}")
        return []
    names = [n for n in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2") if n in wgmma.VARIANTS]
    found = {n: ceiling.wgmma_ceiling(n, repetitions=2 if quick else 5) for n in names}
    for c in found.values():
        print(f"  {c}")
    ceilings = {n: c.tflops for n, c in found.items()}
    records = [results.Record(LESSON, f"wgmma {n} instruction ceiling (spread "
                              f"{c.spread:.1%} over {c.repetitions} runs)", c.tflops, "TFLOP/s")
               for n, c in found.items()]
    sizes = (2048,) if quick else SIZES
    for size in sizes:
        records += staircase(size, ceilings)
        for n in names:
            records += best_step(wgmma.variant(n), size, size, size, ceilings)
    for m, n, k in ((1024, 1024, 1024),) if quick else SHAPES:
        records += best_step(wgmma.variant("bf16"), m, n, k, ceilings)
    records += power(2048 if quick else max(SIZES), ceilings, seconds=0.5 if quick else 2.0)
    if not quick:
        print(f"  timelines -> {capture_timelines()}")
    table(records)
    return records


def table(records: list[results.Record]) -> None:
    print(f"{'what':78s} {'value':>8s} {'unit':7s} {'/ceiling':>9s} {'/cuBLAS':>8s}")
    for r in records:
        ratio_c = f"{r.value / r.ceiling:9.2f}" if r.ceiling else " " * 9
        ratio_p = f"{r.value / r.peer:8.2f}" if r.peer else " " * 8
        print(f"{r.what[:78]:78s} {r.value:8.0f} {r.unit:7s} {ratio_c} {ratio_p}")


# -- reading and drawing the records (the notebook's figures; CPU students see the H100's) ------

RECORDED = "nvidia-h100-80gb-hbm3"  # the device whose committed records a CPU run shows


def recorded(slug: str = RECORDED, lesson: str = LESSON) -> tuple[str, list[results.Record]]:
    """(environment line, ``lesson``'s records) from ``docs/results/<slug>.json``."""
    import json

    path = env.RESULTS_DIR / f"{slug}.json"
    if not path.exists():
        raise FileNotFoundError(f"no results for {slug} in {env.RESULTS_DIR}: make bench "
                                "on that GPU writes them")
    data = json.loads(path.read_text())
    key = syllabus.topic_key  # records written under a former key read as the current one
    lesson = key(lesson)
    environments = {key(k): v for k, v in data.get("environments", {}).items()}
    environment = environments.get(lesson, data["environment"])
    line = " · ".join(f"{environment.get(k)}" for k in ("device", "torch", "date"))
    found = [results.Record(**{**r, "lesson": key(r["lesson"])}) for r in data["records"]
             if key(r["lesson"]) == lesson]
    return f"{line} · git {environment.get('git')}", found


def plot_staircase(records: list[results.Record], size: int, environment: str | None = None):
    """Bars: lesson 07's kernel and each step at ``size``³ (bf16), with the wgmma ceiling and
    cuBLAS of the same run as lines."""
    from course_utils import plots

    rows = [r for r in records if r.what.startswith("bf16 ") and r.what.endswith(f" {size}^3")
            and ("mma.sync" in r.what or ": " in r.what)]
    if not rows:
        raise ValueError(f"records expected bf16 staircase entries at {size}^3, found none")
    fig, ax = plots.figure(f"From mma.sync to warp-specialised wgmma: bf16 {size}³",
                           ylabel="TFLOP/s", figsize=(9, 4.8))
    labels = ["lesson 07\nmma.sync" if "mma.sync" in r.what else "Triton\n(TMA peer)"
              if "Triton" in r.what else r.what.removeprefix("bf16 ").split(":")[0]
              for r in rows]
    colors = ["#7f7f7f" if "mma.sync" in r.what else "#1f77b4" if "Triton" in r.what
              else "#2ca02c" for r in rows]
    ax.bar(range(len(rows)), [r.value for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(i, r.value, f"{r.value:.0f}\n{r.value / r.peer:.2f}× cuBLAS", ha="center",
                va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), labels)
    # the ceilings' labels on the left, above the lowest bar, clear of the bars' own labels
    for value, label in ((rows[0].ceiling, "wgmma ceiling"), (rows[0].peer, "cuBLAS")):
        ax.axhline(value, ls="--", lw=1, color="#555555", alpha=0.7)
        ax.annotate(f"{label}: {value:.0f}", xy=(0.01, value), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", fontsize=8, color="#333333")
    ax.set_ylim(0, rows[0].ceiling * 1.15)
    if environment is not None:
        plots.note(fig, f"recorded on {environment}")
    return fig


def verdicts(records: list[results.Record]) -> list[str]:
    """The lesson's targets against ``records`` (the last step, bare launch), one line each."""
    by_what = {r.what: r for r in records}
    lines = []
    for name in ("bf16", "fp16"):
        for size in SIZES:
            r = by_what.get(f"{name} {wgmma.BEST.name} {size}^3")
            if r is None:
                continue
            lines.append(timing.verdict(
                f"{name} {size}³ ≥ 0.90× cuBLAS", f"{r.value / r.peer:.2f}× ({r.value:.0f} "
                f"TFLOP/s)", r.value >= 0.9 * r.peer, "cuBLAS measured in the same rounds"))
            lines.append(timing.verdict(
                f"{name} {size}³ ≥ 0.85 of the wgmma ceiling", f"{r.value / r.ceiling:.2f}",
                r.value >= 0.85 * r.ceiling,
                "the ceiling has no loads, no epilogue and no tile edges: cuBLAS, measured "
                f"with it, reached {r.peer / r.ceiling:.2f} of it"))
    r = by_what.get(f"fp8_e4m3 {wgmma.BEST.name} 8192^3")
    if r is not None and r.peer:
        lines.append(timing.verdict("fp8 e4m3 8192³ ≥ 0.80× torch._scaled_mm",
                                    f"{r.value / r.peer:.2f}×", r.value >= 0.8 * r.peer,
                                    "unit scales, bf16 output"))
    return lines + step5_verdicts(records)


def _find(records: list[results.Record], what: str) -> results.Record | None:
    return next((r for r in records if r.what == what), None)


def step5_verdicts(records: list[results.Record], size: int = 8192) -> list[str]:
    """Step 5's targets at bf16 ``size``³ (the staircase's record), each with what the power
    measurement (:func:`power`) says limits it."""
    r = next((r for r in records if r.what.startswith("bf16 step5: ")
              and r.what.endswith(f" {size}^3")), None)
    if r is None:
        return []
    why = "cuBLAS measured in the same rounds"
    clock = {d: _find(records, f"bf16 step5 {size}^3 on {d} data: SM clock") for d in DATA}
    watts = _find(records, f"bf16 step5 {size}^3 on random data: power")
    light = _find(records, f"bf16 step5 {size}^3 on 0/1 data")
    if clock["random"] and clock["0/1"] and watts and light:
        state = ("at its power limit" if watts.value >= 0.95 * watts.ceiling
                 else "below its power limit")
        why = (f"on random data the GPU ran {state} ({clock['random'].value:.0f} MHz, "
               f"{watts.value:.0f} of {watts.ceiling:.0f} W); on 0/1 data, at "
               f"{clock['0/1'].value:.0f} MHz, step 5 reached {light.value / light.peer:.2f}× "
               f"cuBLAS and {light.value / light.ceiling:.2f} of the ceiling (section 6's table)")
    return [
        timing.verdict(f"step 5 bf16 {size}³ ≥ 1.05× cuBLAS", f"{r.value / r.peer:.2f}× "
                       f"({r.value:.0f} TFLOP/s)", r.value >= 1.05 * r.peer, why),
        timing.verdict(f"step 5 bf16 {size}³ ≥ 0.80 of the wgmma ceiling",
                       f"{r.value / r.ceiling:.2f}", r.value >= 0.8 * r.ceiling,
                       "the ceiling is measured on 0/1 data; " + why),
    ]


def power_table(records: list[results.Record], size: int = 8192) -> list[dict]:
    """One row per data and kernel of :func:`power`'s records: TFLOP/s, × cuBLAS, SM clock,
    power (cuBLAS's rate is the peer the steps' records carry)."""
    rows = []
    for data in DATA:
        prefix = f"bf16 {{}} {size}^3 on {data} data"
        step4 = _find(records, prefix.format("step4"))
        if step4 is None:
            continue
        for name in ("cuBLAS", "step4", "step5"):
            found = _find(records, prefix.format(name))
            value = step4.peer if name == "cuBLAS" else found.value if found else None
            clock = _find(records, prefix.format(name) + ": SM clock")
            watts = _find(records, prefix.format(name) + ": power")
            rows.append({"data": data, "kernel": name,
                         "TFLOP/s": f"{value:.0f}" if value else "",
                         "× cuBLAS": f"{value / step4.peer:.2f}" if value else "",
                         "SM clock MHz": f"{clock.value:.0f}" if clock else "",
                         "power W": f"{watts.value:.0f} of {watts.ceiling:.0f}" if watts else ""})
    return rows
