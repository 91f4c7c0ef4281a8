"""Lesson 17: the Hopper kernel at every size a student tries, called as a student calls it.

``bench.py`` measures the staircase at 4096³ and 8192³, where every step has work for every SM.
This benchmark asks the other question: the registered ``auto`` kernel (step 4's kernel with its
tile chosen per problem, tiles.py), called through the registry, against cuBLAS at

* squares from 1024³ to 16384³;
* a transformer's prefill shapes (8192 tokens through a 4096 -> 14336 projection and back);
* decoding shapes (M = 16 and 64 tokens against 4096 x 4096 and 4096 x 14336 weights), which
  read far more bytes than they multiply: these are also given as a fraction of the copy
  bandwidth measured in the same run;

each timed back to back (the GPU's throughput) and as one call between two events (what a
caller's own timer sees: the host's work before the kernel starts is included). Then fp8
with scales (per tensor and row-wise, scaled.py) against ``torch._scaled_mm`` given the same
scales, at 4096³ and 8192³; and with block scales (1 x 128 / 128 x 128, block_scaled.cu)
against the per-tensor call of the same size (the price of finer scales), each block tile
beside it, and ``torch._scaled_mm`` with the same block scales where this PyTorch has them.
Then the tile sweep: every candidate tile on a few shapes, beside
cuBLAS, with the rule's choice marked; the measurements the rule's rates come from.

``make bench`` records both under lesson key ``hopper_measured.sizes`` (``hopper_matmul.sizes``
before lesson 16 was split in two: the syllabus reads it as the new key); notebook 16 draws them.
"""

from __future__ import annotations

import torch

from course_utils import results, timing
from kernels.matmul.hopper import bench, ceiling, tiles, wgmma

LESSON = "hopper_measured.sizes"
SQUARES = (1024, 2048, 4096, 8192, 16384)
PREFILL = ((8192, 14336, 4096), (8192, 4096, 14336))  # (M, N, K): up and down projections
DECODE = ((16, 4096, 4096), (64, 4096, 4096), (16, 14336, 4096), (64, 14336, 4096))
SWEEP = ((1024, 1024, 1024), (2048, 2048, 2048), (8192, 8192, 8192), (8192, 1024, 8192),
         (16, 4096, 4096), (64, 14336, 4096))
MODES = ("back to back", "one call between events")


def shapes(quick: bool = False) -> list[tuple[int, int, int]]:
    if quick:
        return [(1024, 1024, 1024), (2048, 2048, 2048), DECODE[0]]
    return [*((s, s, s) for s in SQUARES), *PREFILL, *DECODE]


def label(m: int, n: int, k: int) -> str:
    return f"{m}^3" if m == n == k else f"{m}x{n}x{k}"


def moved_bytes(v: wgmma.Variant, m: int, n: int, k: int) -> int:
    """Bytes a matmul must move at least: read A and B once, write C once."""
    return m * k * v.a.itemsize + k * n * v.b.itemsize + m * n * v.out.itemsize


def compare(v: wgmma.Variant, m: int, n: int, k: int, ceilings: dict[str, float],
            copy_gbps: float) -> list[results.Record]:
    """The registered auto kernel beside cuBLAS at one shape, in both modes."""
    import kernels

    a, b = bench.operands(v, m, n, k)
    flop = timing.matmul_flop(m, n, k)
    peer_what, peer = bench.peer(v, a, b)
    mine = kernels.get_kernel("matmul", "wgmma", f"auto_{v.name}")
    ours = lambda: mine(a, b)  # noqa: E731  (the call as a user writes it)
    back = bench.rates({"ours": ours, "peer": peer}, flop)
    one = {"ours": [], "peer": []}
    for _ in range(3):  # alternated, as bench.rates does
        for name, fn in (("ours", ours), ("peer", peer)):
            one[name].append(bench.one_call_between_events(fn, flop))
    single = {name: sorted(found)[1] for name, found in one.items()}
    chosen = tiles.chosen_step(m, n, a.device.index or 0, wgmma.k_tiles(k, v.a.itemsize))
    tile = f"{chosen.bm}x{chosen.bn}" + (f", K split {chosen.splits} ways" if chosen.splits > 1
                                         else "")
    shape = label(m, n, k)
    top = dict(ceiling=ceilings[v.name], ceiling_what=f"wgmma {v.name} ceiling, same run")
    found = [results.Record(LESSON, f"{v.name} auto {shape} {mode} (tile {tile})",
                            measured["ours"], "TFLOP/s", **top, peer=measured["peer"],
                            peer_what=f"{peer_what} {mode}, same run")
             for mode, measured in zip(MODES, (back, single), strict=True)]
    if m <= 64:  # memory-bound: the bytes per second count, against copying
        per_tflops = moved_bytes(v, m, n, k) / flop  # bytes per flop: GB/s = TFLOP/s x 1000 x it
        found.append(results.Record(
            LESSON, f"{v.name} auto {shape} back to back, bandwidth", back["ours"] * 1e3 *
            per_tflops, "GB/s", copy_gbps, "copy bandwidth, same run",
            back["peer"] * 1e3 * per_tflops, f"{peer_what}, same run"))
    return found


SCALED = (4096, 8192)  # fp8 with scales: squares where the target is set


def compare_scaled(form: str, size: int, ceilings: dict[str, float]) -> list[results.Record]:
    """fp8 e4m3 with scales (per tensor or row-wise), the registered scaled_matmul kernel against
    torch._scaled_mm given the same operands and scales, in both modes."""
    import kernels
    from kernels.scaled_matmul import quantize_operands

    qa, qb, sa, sb = quantize_operands(torch.randn(size, size, device="cuda"),
                                       torch.randn(size, size, device="cuda"), wgmma.F8_E4M3, form)
    flop = timing.matmul_flop(size, size, size)
    mine = kernels.get_kernel("scaled_matmul", "wgmma", "auto_fp8_e4m3")
    fns = {"ours": lambda: mine(qa, qb, sa, sb),
           "peer": lambda: torch._scaled_mm(qa, qb, sa, sb, out_dtype=torch.bfloat16)}
    back = bench.rates(fns, flop)
    one = {name: sorted(bench.one_call_between_events(fn, flop) for _ in range(3))[1]
           for name, fn in fns.items()}
    what = "per tensor" if form == "tensor" else "row-wise"
    return [results.Record(LESSON, f"fp8_e4m3 scaled {what} {label(size, size, size)} {mode}",
                           measured["ours"], "TFLOP/s", ceilings["fp8_e4m3"],
                           "wgmma fp8_e4m3 ceiling, same run", measured["peer"],
                           f"torch._scaled_mm, same scales, {mode}, same run")
            for mode, measured in zip(MODES, (back, one), strict=True)]


def compare_blocks(size: int, ceilings: dict[str, float]) -> list[results.Record]:
    """fp8 e4m3 with block scales: the registered call against the registered per-tensor call on
    the same fp8 values (issue 23's target: >= 0.9x), both modes; each block tile launched
    alone; torch._scaled_mm with the same block scales, where this PyTorch has them."""
    import kernels
    from kernels.matmul.hopper import scaled
    from kernels.scaled_matmul import quantize_operands

    a, bt = (torch.randn(size, size, device="cuda") for _ in range(2))
    qa, qb, sa, sb = quantize_operands(a, bt, wgmma.F8_E4M3, "block")
    one = torch.ones(1, device="cuda")
    mine = kernels.get_kernel("scaled_matmul", "wgmma", "auto_fp8_e4m3")
    fns = {"ours": lambda: mine(qa, qb, sa, sb), "peer": lambda: mine(qa, qb, one, one)}
    v = wgmma.variant("fp8_e4m3")
    for tile in scaled.BLOCK_TILES:
        fns[tile.name] = lambda tile=tile: scaled.run_blocks(qa, qb, sa, sb, v, tile)
    try:  # cuBLAS's block-scaled fp8 (recent PyTorch on Hopper)
        torch._scaled_mm(qa, qb, sa, sb, out_dtype=torch.bfloat16)
        fns["cublas"] = lambda: torch._scaled_mm(qa, qb, sa, sb, out_dtype=torch.bfloat16)
    except (RuntimeError, ValueError) as e:
        print(f"torch._scaled_mm with block scales: not here ({str(e).splitlines()[0][:120]})")
    flop = timing.matmul_flop(size, size, size)
    back = bench.rates(fns, flop)
    single = {name: sorted(bench.one_call_between_events(fns[name], flop) for _ in range(3))[1]
              for name in ("ours", "peer")}
    top = dict(ceiling=ceilings["fp8_e4m3"], ceiling_what="wgmma fp8_e4m3 ceiling, same run")
    shape = label(size, size, size)
    found = [results.Record(LESSON, f"fp8_e4m3 scaled blocks {shape} {mode}", measured["ours"],
                            "TFLOP/s", **top, peer=measured["peer"],
                            peer_what=f"our per-tensor call, same fp8 values, {mode}, same run")
             for mode, measured in zip(MODES, (back, single), strict=True)]
    found += [results.Record(LESSON, f"fp8_e4m3 block tile {shape} {tile.name}", back[tile.name],
                             "TFLOP/s", **top, peer=back["peer"],
                             peer_what="our per-tensor call, same run")
              for tile in scaled.BLOCK_TILES]
    if "cublas" in back:
        found.append(results.Record(
            LESSON, f"fp8_e4m3 scaled blocks {shape} against cuBLAS", back["ours"], "TFLOP/s",
            **top, peer=back["cublas"], peer_what="torch._scaled_mm, same block scales, same run"))
    return found


def tile_sweep(v: wgmma.Variant, sweep=SWEEP) -> list[results.Record]:
    """Every candidate tile (bare launch) beside cuBLAS; the rule's choice marked."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    found = []
    for m, n, k in sweep:
        a, b = bench.operands(v, m, n, k)
        fns = {"peer": bench.peer(v, a, b)[1]}
        fns.update({c.name: bench.bare_launch(c.step, v, a, b) for c in tiles.CANDIDATES})
        measured = bench.rates(fns, timing.matmul_flop(m, n, k))
        chosen = tiles.choose(m, n, sms).name
        found += [results.Record(
            LESSON, f"tile sweep {v.name} {label(m, n, k)} {c.name}"
            f"{' (chosen)' if c.name == chosen else ''}", measured[c.name], "TFLOP/s",
            peer=measured["peer"], peer_what="cuBLAS, same run") for c in tiles.CANDIDATES]
    return found


def run(quick: bool = False) -> list[results.Record]:
    if reason := wgmma.reason_here():
        print(f"Hopper matmul size sweep skipped: {reason}")
        return []
    names = ("bf16",) if quick else ("bf16", "fp8_e4m3")
    ceilings = {n: ceiling.wgmma_ceiling(n, repetitions=2).tflops for n in names}
    copy_gbps = timing.copy_bandwidth()
    records = []
    for name in names:
        for m, n, k in shapes(quick):
            records += compare(wgmma.variant(name), m, n, k, ceilings, copy_gbps)
    if not quick:
        for form in ("tensor", "row"):
            for size in SCALED:
                records += compare_scaled(form, size, ceilings)
        for size in SCALED:
            records += compare_blocks(size, ceilings)
    records += tile_sweep(wgmma.variant("bf16"), SWEEP[:2] if quick else SWEEP)
    bench.table([r for r in records if r.unit == "TFLOP/s"])
    for line in verdicts(records):
        print(line)
    return records


# -- the targets, read from records (the notebook prints them on any machine) -----------------


def _ratio(records: list[results.Record], what: str) -> float | None:
    r = next((r for r in records if r.what.startswith(what) and r.unit == "TFLOP/s"), None)
    return r.value / r.peer if r is not None and r.peer else None


def verdicts(records: list[results.Record]) -> list[str]:
    """Issue 23's targets for the registered call, one line per shape group and mode."""
    # (the records' name prefix, which shapes, the target, the shapes' labels)
    groups = [("bf16 auto", "2048³ to 16384³ and prefill, against cuBLAS", 0.95,
               [label(s, s, s) for s in SQUARES[1:]] + [label(*p) for p in PREFILL]),
              ("bf16 auto", "1024³ and decoding, against cuBLAS", 0.80,
               [label(1024, 1024, 1024)] + [label(*d) for d in DECODE]),
              ("fp8_e4m3 auto", "4096³ and 8192³, against torch._scaled_mm (unit scales)", 1.00,
               [label(s, s, s) for s in (4096, 8192)])]
    groups += [(f"fp8_e4m3 scaled {what}", "4096³ and 8192³, against torch._scaled_mm with the "
                "same scales", 1.00, [label(s, s, s) for s in SCALED])
               for what in ("per tensor", "row-wise")]
    groups.append(("fp8_e4m3 scaled blocks", "4096³ and 8192³, against our per-tensor call",
                   0.90, [label(s, s, s) for s in SCALED]))
    lines = []
    for name, where, target, shapes_ in groups:
        for mode in MODES:
            found = {s: _ratio(records, f"{name} {s} {mode}") for s in shapes_}
            found = {s: r for s, r in found.items() if r is not None}
            if not found:
                continue
            worst = min(found, key=found.get)
            met = sum(r >= target for r in found.values())
            lines.append(timing.verdict(
                f"{name.removesuffix(' auto')} {where}, {mode}: ≥ {target:.2f}×",
                f"{met} of {len(found)} shapes; lowest {found[worst]:.2f}× at {worst}",
                met == len(found), "the peer measured in the same rounds; what limits the "
                "misses is in notebook 16's sections on sizes and scales"))
    return lines


# -- drawing the records (CPU students see the H100's) ----------------------------------------


def recorded(slug: str = bench.RECORDED) -> tuple[str, list[results.Record]]:
    """(environment line, this benchmark's records) from ``docs/results/<slug>.json``."""
    return bench.recorded(slug, LESSON)


def plot_sizes(records: list[results.Record], environment: str | None = None):
    """The registered auto call against cuBLAS at every recorded shape: one panel per type,
    a marker per timing mode, the targets as dashed lines."""
    from course_utils import plots

    names = [n for n in ("bf16", "fp8_e4m3")
             if any(r.what.startswith(f"{n} auto ") for r in records)]
    if not names:
        raise ValueError("records expected 'auto' entries of bench_sizes, found none")
    fig, axes = plots.figure("The registered wgmma call against cuBLAS, as a caller calls it",
                             ylabel="× cuBLAS (same run)", ncols=len(names),
                             figsize=(6.5 * len(names), 4.6))
    for ax, name in zip(axes if len(names) > 1 else [axes], names, strict=True):
        order = [label(*s) for s in shapes()]
        for mode, marker in zip(MODES, ("o", "s"), strict=True):
            found = {s: _ratio(records, f"{name} auto {s} {mode}") for s in order}
            xs = [i for i, s in enumerate(order) if found[s] is not None]
            ax.plot(xs, [found[order[i]] for i in xs], marker, label=mode, ms=7, alpha=0.8)
        targets = (0.95, 0.80) if name == "bf16" else (1.0,)
        for target in targets:
            ax.axhline(target, ls="--", lw=1, color="#555555")
            ax.annotate(f"target {target:.2f}×", xy=(0.01, target), fontsize=8,
                        xycoords=("axes fraction", "data"), xytext=(0, 3),
                        textcoords="offset points")
        ax.set_xticks(range(len(order)), [s.replace("^3", "³").replace("x", "×") for s in order],
                      fontsize=7, rotation=35, ha="right")
        ax.set_title(name, fontsize=10)
        ax.set_ylim(0.4, 1.25)
        ax.legend(fontsize=8, loc="lower right")
    if environment is not None:
        plots.note(fig, f"recorded on {environment}")
    return fig


def plot_tile_sweep(records: list[results.Record], environment: str | None = None):
    """Every candidate tile at each swept shape, as a fraction of the fastest tile there, the
    rule's choice outlined. (Not against cuBLAS: a prepared bare launch costs the host about
    5 µs, torch.mm about 12, so at 1024³ and at decoding shapes torch.mm's time per call is its
    host path, not its kernel; the records keep cuBLAS beside each value all the same.)"""
    from matplotlib.patches import Patch

    from course_utils import plots

    rows = [r for r in records if r.what.startswith("tile sweep ")]
    if not rows:
        raise ValueError("records expected 'tile sweep' entries of bench_sizes, found none")
    shapes_ = list(dict.fromkeys(r.what.split()[3] for r in rows))
    names = [c.name for c in tiles.CANDIDATES]
    fig, ax = plots.figure("Each tile shape at each problem (prepared launch), the rule's pick "
                           "outlined", ylabel="× the fastest tile at this shape",
                           figsize=(10, 4.6))
    best = {shape: max(r.value for r in rows if r.what.split()[3] == shape) for shape in shapes_}
    width = 0.8 / len(names)
    for j, tile in enumerate(names):
        for i, shape in enumerate(shapes_):
            r = next((r for r in rows if r.what.split()[3:5] == [shape, tile]), None)
            if r is None:
                continue
            chosen = r.what.endswith("(chosen)")
            ax.bar(i + (j - (len(names) - 1) / 2) * width, r.value / best[shape], width,
                   color=f"C{j}", edgecolor="black" if chosen else "none",
                   linewidth=2 if chosen else 0)
    ax.axhline(1.0, ls="--", lw=1, color="#555555")
    ax.set_xticks(range(len(shapes_)), [s.replace("^3", "³").replace("x", "×") for s in shapes_],
                  fontsize=8)
    handles = [Patch(color=f"C{j}", label=tile) for j, tile in enumerate(names)]
    handles.append(Patch(facecolor="white", edgecolor="black", linewidth=2, label="chosen"))
    ax.legend(handles=handles, title="tile (M×N)", fontsize=8, ncol=len(handles),
              loc="upper left")
    ax.set_ylim(0, 1.25)
    if environment is not None:
        plots.note(fig, f"recorded on {environment}")
    return fig
