"""Lesson 09's measurements: every attention provider against SDPA's three backends, in one run.

* time: forward, and forward + backward where a kernel's ``meta`` names a ``backward``, at
  D = 128 and S = 4096, 8192, 16384 (B·S = 16384 tokens, H = 16), causal and not, and D = 64
  (B=4, H=32, S=4096); every registered attention kernel but the eager reference (a new one
  joins by being registered); TFLOP/s counted as ``4·B·H·S²·D`` (halved when causal; the
  backward as 2.5 forwards). Each figure's **peer** is SDPA's flash
  backend (FlashAttention-2) and its **ceiling** cuBLAS's bf16 matmul rate, both measured in the
  same run; the providers are timed in interleaved rounds (the median of each), since an H100
  slows its clock as it heats;
* memory: the peak allocated during a forward, above the inputs, at S = 1024 ... 8192: the naive
  provider's grows with S², a fused one's with S.

``make bench`` calls :func:`run` and ``make prepare`` :func:`prepare`; notebook 09 calls
:func:`measure`, :func:`peak_memory` and the plots, and reads the records a GPU wrote
(:func:`recorded`).
"""

from __future__ import annotations

import json

import torch

from course_utils import env, results, timing
from kernels.attention.hopper import targets as hopper_targets

LESSON = "attention"
PEER = "sdpa_flash"
PEER_WHAT = "SDPA flash backend (FlashAttention-2), same run"
# (B, H, S, D): 16384 tokens a batch at D=128; the D=64 shape of the course's SDPA table
SHAPES = ((4, 16, 4096, 128), (2, 16, 8192, 128), (1, 16, 16384, 128), (4, 32, 4096, 64))
MEMORY_LENGTHS = (1024, 2048, 4096, 8192)
RECORDED = "nvidia-h100-80gb-hbm3"  # whose committed records a CPU run shows
COLORS = {"naive": "#7f7f7f", "eager": "#8c564b", "triton": "#1f77b4", "sdpa_flash": "#ff7f0e",
          "sdpa_cudnn": "#2ca02c", "sdpa_efficient": "#9467bd"}
OTHER_COLORS = ("#d62728", "#e377c2", "#17becf", "#bcbd22")  # providers not listed above


def color(name: str, names) -> str:
    """A provider's colour, the same in every figure of the lesson."""
    others = [n for n in dict.fromkeys(names) if n not in COLORS]
    return COLORS.get(name) or OTHER_COLORS[others.index(name) % len(OTHER_COLORS)]


def flop(b: int, h: int, s: int, d: int, causal: bool, backward: bool = False) -> float:
    """``4·B·H·S²·D`` (QKᵀ and PV), halved when causal; forward + backward = 3.5 forwards."""
    f = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return f * 3.5 if backward else f


def matmul_ceiling(dtype: torch.dtype = torch.bfloat16, n: int = 8192) -> float:
    """cuBLAS at n³ in ``dtype``, TFLOP/s: what the tensor cores give a plain matmul today."""
    a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
    ms = timing.benchmark(torch.mm, a, b, name="torch.mm").median
    return timing.tflops(timing.matmul_flop(n, n, n), ms)


def all_providers() -> list[str]:
    """Every registered attention kernel but the eager reference, by name (``triton``,
    ``sdpa_cudnn``, ``provider[variant]``): a kernel joins the tables by being registered."""
    import kernels

    return [k.name.removeprefix("attention/") for k in kernels.all_kernels("attention")
            if not k.is_reference]


def _kernel(name: str):
    import kernels

    provider, _, variant = name.rstrip("]").partition("[")
    return kernels.get_kernel("attention", provider, variant or None)


def _callable(provider: str, q, k, v, causal: bool, backward: bool):
    kernel = _kernel(provider)
    if reason := kernel.supports(q, k, v, causal):
        return None, reason
    if not backward:
        def forward():
            with torch.no_grad():
                return kernel(q, k, v, causal)
        return forward, None
    if not kernel.meta.get("backward"):  # (naive's Triton softmax has no autograd formula)
        return None, "forward only (its registration names no backward in meta)"
    grads = [t.detach().requires_grad_() for t in (q, k, v)]
    do = torch.randn_like(q)

    def both():
        kernel(*grads, causal).backward(do)
    return both, None


def measure(shape: tuple[int, int, int, int], causal: bool, backward: bool = False,
            providers=None, dtype: torch.dtype = torch.bfloat16, rounds: int = 3,
            ceiling: float | None = None) -> list[results.Record]:
    """One record per provider that runs the problem: TFLOP/s, the peer (SDPA flash) and the
    ceiling (cuBLAS) of the same run; providers that cannot run it are printed with why."""
    b, h, s, d = shape
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    fns = {}
    providers = providers or all_providers()
    for name in dict.fromkeys((PEER, *providers)):
        fn, why = _callable(name, q, k, v, causal, backward)
        if fn is None:
            print(f"  {name}: {why}")
        else:
            fns[name] = fn
    found = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            found[name].append(timing.benchmark(fn, device="cuda", name=name,
                                                min_time_s=0.1).median)
    ms = {name: sorted(t)[len(t) // 2] for name, t in found.items()}
    work = flop(b, h, s, d, causal, backward)
    ceiling = ceiling or matmul_ceiling(dtype)
    peer = timing.tflops(work, ms[PEER])
    what = (f"{'fwd+bwd' if backward else 'fwd'} {str(dtype)[6:]} B={b} H={h} S={s} D={d}"
            f"{' causal' if causal else ''}")
    return [results.Record(LESSON, f"{name} {what}", timing.tflops(work, t), "TFLOP/s",
                           ceiling, f"cuBLAS {str(dtype)[6:]} 8192^3, same run", peer, PEER_WHAT)
            for name, t in ms.items() if name != PEER or name in providers]


def peak_memory(lengths=MEMORY_LENGTHS, providers=("naive", "triton", PEER), b: int = 1,
                h: int = 16, d: int = 128, dtype: torch.dtype = torch.bfloat16
                ) -> dict[str, dict[int, float]]:
    """``{provider: {S: MiB}}``: the most memory a forward allocated above its inputs
    (``torch.cuda.max_memory_allocated``), the output included."""

    found: dict[str, dict[int, float]] = {p: {} for p in providers}
    q = torch.randn(1, 1, 256, d, device="cuda", dtype=dtype)
    for name in providers:  # first calls allocate workspaces (cuBLAS, SDPA) for good: not S's
        if _kernel(name).supports(q, q, q, False) is None:
            with torch.no_grad():
                _kernel(name)(q, q, q, False)
    for s in lengths:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
        for name in providers:
            kernel = _kernel(name)
            if kernel.supports(q, k, v, False):
                continue
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            with torch.no_grad():
                kernel(q, k, v, False)
            torch.cuda.synchronize()
            found[name][s] = (torch.cuda.max_memory_allocated() - base) / 2**20
    return found


def memory_records(found: dict[str, dict[int, float]], d: int = 128) -> list[results.Record]:
    records = []
    for name, by_length in found.items():
        if name == PEER:
            continue
        for s, mib in by_length.items():
            records.append(results.Record(
                LESSON, f"{name} peak memory of a forward, bf16 B=1 H=16 S={s} D={d}", mib,
                "MiB", peer=found[PEER].get(s), peer_what="SDPA flash backend, same run"))
    return records


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if not env.HAS_CUDA:
        print("lesson 09 benchmark skipped: no CUDA GPU")
        return []
    ceiling = matmul_ceiling()
    print(f"  cuBLAS bf16 8192^3: {ceiling:.0f} TFLOP/s")
    records: list = []
    shapes = ((2, 8, 1024, 128),) if quick else SHAPES
    for shape in shapes:
        for causal in (False, True):
            for backward in (False, True):
                records += measure(shape, causal, backward, ceiling=ceiling,
                                   rounds=1 if quick else 3)
    memory = peak_memory((512, 1024) if quick else MEMORY_LENGTHS)
    records += memory_records(memory)
    table(records)
    targets = (verdicts(records) + hopper_targets.verdicts(records)
               + hopper_targets.verdicts(records, passes="fwd+bwd"))
    if not quick and hopper_targets.runs_here():  # the Hopper steps' timelines, for CPU students
        print(f"  timelines saved to {hopper_targets.capture_timelines()}")
    text = ("Peak memory of one forward above its inputs (MiB; bf16, B=1, H=16, D=128): "
            + "; ".join(f"{name}: " + ", ".join(f"S={s} {m:.0f}" for s, m in found.items())
                        for name, found in memory.items())
            + "\n\nThe lesson's targets:\n\n" + "\n".join(f"- {v}" for v in targets))
    return records + [results.Note(LESSON, text)]


def table(records: list[results.Record]) -> None:
    print(f"{'what':70s} {'value':>9s} {'/ceiling':>9s} {'/flash':>7s}")
    for r in records:
        ratio_c = f"{r.value / r.ceiling:9.2f}" if r.ceiling else " " * 9
        ratio_p = f"{r.value / r.peer:7.2f}" if r.peer else " " * 7
        print(f"{r.what[:70]:70s} {r.value:9.1f} {ratio_c} {ratio_p}  {r.unit}")


STORY = ("triton", "wgmma", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient")  # the summary's columns


def summary(records: list[results.Record], providers=STORY) -> None:
    """One row per problem, one column of TFLOP/s per provider: the records cut to the story
    (the full table, every step and the naive provider included, is one :func:`table` away and
    in ``docs/results/<device>.md``)."""
    timed = {(r.what.split(" ", 1)[0], r.what.split(" ", 1)[1]): r.value
             for r in records if r.unit == "TFLOP/s"}
    problems = list(dict.fromkeys(problem for _, problem in timed))
    shown = {p: max(10, len(p.removeprefix('sdpa_')) + 2) for p in providers
             if any((p, problem) in timed for problem in problems)}  # name: column width
    print(f"{'TFLOP/s':40s}" + "".join(f"{p.removeprefix('sdpa_'):>{w}s}"
                                       for p, w in shown.items()))
    for problem in problems:
        print(f"{problem.replace('bfloat16 ', ''):40s}" + "".join(
            f"{timed[p, problem]:{w}.0f}" if (p, problem) in timed else f"{'-':>{w}s}"
            for p, w in shown.items()))


def verdicts(records: list[results.Record]) -> list[str]:
    """The lesson's targets read from ``records``, one line each."""
    lines = []
    for r in records:
        if not r.what.startswith("triton ") or r.unit != "TFLOP/s" or " D=128" not in r.what:
            continue
        s = int(r.what.split(" S=")[1].split()[0])
        if not 4096 <= s <= 16384:
            continue
        need = 0.9 if r.what.startswith("triton fwd+bwd") else 1.0
        lines.append(timing.verdict(f"{r.what.removeprefix('triton ')} ≥ {need}× SDPA flash",
                                    f"{r.value / r.peer:.2f}× ({r.value:.0f} TFLOP/s)",
                                    r.value >= need * r.peer, "same run, interleaved rounds"))
    by_length = {int(r.what.split(" S=")[1].split()[0]): r.value for r in records
                 if r.what.startswith("triton peak memory")}
    if len(by_length) >= 2:
        lo, hi = min(by_length), max(by_length)
        growth = by_length[hi] / by_length[lo]
        lines.append(timing.verdict(
            f"triton's peak memory linear in S ({lo} → {hi})",
            f"×{growth:.1f} for ×{hi // lo} S",
            growth <= 1.25 * hi / lo, "an S×S tensor would grow it by the square"))
    return lines


def prepare() -> str:
    """``make prepare``: compile what notebook 09's cells compile (Triton caches a kernel per
    set of constants, so small problems with the notebook's head dims, dtypes, causal flags and
    row lengths fill the cache its lecture hits)."""
    import kernels
    from kernels.attention import autograd, online_softmax, triton_fwd
    from kernels.registry import OPS

    calls = 0
    for case in OPS["attention"].cases:  # the notebook's checks: every case, 16-bit types
        for dtype in (torch.float16, torch.bfloat16):
            args = case.make(dtype, "cuda")
            for kernel in kernels.get_kernels("attention", *args):
                kernel(*args)
                calls += 1
    for i in (1, 2, 5):  # the gradient table
        for dtype in (torch.float16, torch.bfloat16):
            autograd.gradient_errors(*OPS["attention"].cases[i].make(dtype, "cuda"))
            calls += 1
    naive = kernels.get_kernel("attention", "naive")
    for s, causal in [*((s, False) for s in MEMORY_LENGTHS), (4096, True)]:  # one row each
        q = torch.randn(1, 1, s, 128, device="cuda", dtype=torch.bfloat16)
        naive(q, q, q, causal)
        calls += 1
    for d in (64, 128):  # forward and backward at the measured head dims, both causal flags
        for causal in (False, True):
            q = torch.randn(1, 2, 256, d, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True)
            autograd.attention(q, q, q, causal).sum().backward()
            calls += 1
    online_softmax.softmax(torch.randn(2, 300, device="cuda"), block=128)
    for causal in (False, True):
        triton_fwd.block_map(500, 500, causal, 64, 64)
    torch.cuda.synchronize()
    return f"{calls + 3} attention calls (lesson 09's Triton kernels compiled)"


# -- the records a GPU wrote, and the figures ----------------------------------------------------


def recorded(slug: str = RECORDED) -> tuple[str, list[results.Record]]:
    """(environment line, lesson 09's records) from ``docs/results/<slug>.json``; FileNotFoundError
    when that GPU has not run ``make bench`` for this lesson yet."""
    path = env.RESULTS_DIR / f"{slug}.json"
    data = json.loads(path.read_text()) if path.exists() else {"records": []}
    found = [results.Record(**r) for r in data["records"] if r["lesson"] == LESSON]
    if not found:
        raise FileNotFoundError(f"no lesson 09 records for {slug} in {env.RESULTS_DIR}: "
                                "`make bench` on that GPU writes them")
    environment = data.get("environments", {}).get(LESSON, data["environment"])
    line = " · ".join(f"{environment.get(k)}" for k in ("device", "torch", "date"))
    return f"{line} · git {environment.get('git')}", found


def plot_providers(records: list[results.Record], environment: str | None = None):
    """Bars: TFLOP/s of every provider per problem, forward and forward + backward side by side,
    with SDPA flash (the peer) and cuBLAS (the ceiling) marked."""
    from course_utils import plots

    timed = [r for r in records if r.unit == "TFLOP/s"]
    problems = list(dict.fromkeys(r.what.split(" ", 1)[1] for r in timed))
    names = list(dict.fromkeys(r.what.split(" ", 1)[0] for r in timed))
    fig, ax = plots.figure("Attention on one GPU: every provider beside SDPA's backends",
                           ylabel="TFLOP/s", figsize=(max(8, 1.3 * len(problems)), 4.8))
    width = 0.8 / max(len(names), 1)
    by = {(r.what.split(" ", 1)[0], r.what.split(" ", 1)[1]): r for r in timed}
    for i, name in enumerate(names):
        xs = [j + i * width for j, p in enumerate(problems) if (name, p) in by]
        ys = [by[(name, p)].value for p in problems if (name, p) in by]
        ax.bar(xs, ys, width, label=name, color=color(name, names))
    # tick labels: what differs between problems; what they share goes in the title
    tokens = [p.split() for p in problems]
    shared = [t for t in tokens[0] if all(t in other for other in tokens)]
    labels = ["\n".join(t for t in words if t not in shared) for words in tokens]
    ax.set_title(" ".join(shared), fontsize=9)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(problems))], labels, fontsize=8)
    if timed and timed[0].ceiling:
        plots.ceiling(ax, timed[0].ceiling, "cuBLAS bf16 matmul")
    plots.legend_outside(ax)
    if environment is not None:
        plots.note(fig, f"recorded on {environment}")
    return fig


def plot_memory(found: dict[str, dict[int, float]], environment: str | None = None):
    """Peak memory against S on log-log axes: slope 2 for the S×S matrix, slope 1 fused."""
    from course_utils import plots

    fig, ax = plots.figure("Peak memory of one forward (bf16, B=1, H=16, D=128)",
                           xlabel="sequence length S", ylabel="MiB above the inputs")
    for name, by_length in found.items():
        if by_length:
            ax.plot(list(by_length), list(by_length.values()), "o--" if name == PEER else "o-",
                    label=name, color=color(name, found))  # (the peer dashed: they overlap)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.legend()
    if environment is not None:
        plots.note(fig, f"recorded on {environment}")
    return fig


def memory_from_records(records: list[results.Record]) -> dict[str, dict[int, float]]:
    """:func:`peak_memory`'s dict rebuilt from recorded memory records (peers included)."""
    found: dict[str, dict[int, float]] = {}
    for r in records:
        if r.unit != "MiB":
            continue
        s = int(r.what.split(" S=")[1].split()[0])
        found.setdefault(r.what.split(" ", 1)[0], {})[s] = r.value
        if r.peer is not None:
            found.setdefault(PEER, {})[s] = r.peer
    return found
