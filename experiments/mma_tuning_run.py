"""The batch behind docs/results/mma-tuning-notes.md: mma.cu's tile shapes measured on one GPU.

Runs on a GPU box (``python docs/results/mma_tuning_run.py OUT_DIR``): compiles each candidate
(kernels/matmul/mma.cu with a generated header, as kernels/matmul/mma.py builds it), checks it
against a float64 reference on fresh random operands with a poisoned output at an awkward shape,
times it at 4096^3 and 8192^3 beside the same run's mma.sync ceiling (and torch._int_mm for
int8), and profiles the old and the best configuration with course_utils.ncu. Candidates are
given as header values rather than mma.Config because 12-warp blocks (192 x 256) are not yet
Configs (mma.Config asks every thread to copy the same number of chunks).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from course_utils import env, nvrtc, timing
from kernels.matmul import autotune, ceiling, mma

OLD = (128, 256, 64, 64, 64, 3)  # the configuration of the committed records (before)
# kernel sources by name: "mma.cu" is the course's; others are experiments beside it (a plan
# names them by path relative to the checkout)
SOURCES = {"mma.cu": mma.SOURCE}


def header(variant: str, tile) -> dict:
    bm, bn, wm, wn, bk, stages = tile
    return {**mma.variant(variant).defines, "BM": bm, "BN": bn, "WM": wm, "WN": wn,
            "BK_BYTES": bk, "STAGES": stages, "GROUP_M": 8, "VARY_OPERANDS": True}


def compiled(variant: str, tile, source: str = "mma.cu"):
    path = SOURCES.get(source, source)
    return nvrtc.compile(path, mma.KERNEL, defines=header(variant, tile), verbose=False)


def launcher(variant: str, tile, source: str = "mma.cu"):
    """launch(a, bt, out): the kernel for this variant and tile, as mma.launch would run it."""
    bm, bn, wm, wn, bk, stages = tile
    v = mma.variant(variant)
    kernel = nvrtc.load(compiled(variant, tile, source))
    threads = 32 * (bm // wm) * (bn // wn)
    smem = stages * (bm + bn) * bk

    def launch(a, bt, out):
        m, n = out.shape
        k = a.shape[1] * (2 if v.int4 else 1)
        kernel(a, bt, out, m, n, k, grid=-(-m // bm) * -(-n // bn), block=threads,
               shared_mem=smem)
    return launch


def check(variant: str, tile, source: str, m=1000, n=1304, k=1056) -> float:
    """Max error against float64 (exact for int8) with a NaN-poisoned output; raises if wrong."""
    v = mma.variant(variant)
    a, b = autotune.operands(v, m, n, k)
    a, bt = mma.prepare(v, a, b)
    poison = -12345 if v.integer else float("nan")
    out = torch.full((m, n), poison, device="cuda", dtype=v.out)
    launcher(variant, tile, source)(a, bt, out)
    ref = a.double() @ b.double()  # exact for int8 too: |sums| < 2^53
    if v.integer:
        ref = ref.to(torch.int32)
    if v.integer:
        bad = (out != ref).sum().item()
        if bad:
            raise AssertionError(f"{variant} {tile}: {bad} wrong elements")
        return 0.0
    atol, rtol = mma.tolerance(v)[v.a]
    torch.testing.assert_close(out.double(), ref, atol=atol, rtol=rtol)
    return (out.double() - ref).abs().max().item()


def rate(variant: str, tile, source: str, size: int) -> float:
    v = mma.variant(variant)
    a, b = autotune.operands(v, size, size, size)
    a, bt = mma.prepare(v, a, b)
    out = torch.empty(size, size, dtype=v.out, device="cuda")
    launch = launcher(variant, tile, source)
    t = timing.benchmark(launch, a, bt, out, name=str(tile), min_time_s=0.3)
    return timing.tflops(timing.matmul_flop(size, size, size), t.median)


def profile_call(variant: str, tile, source: str, size: int):
    """For course_utils.ncu: set-up returning the one call to profile."""
    v = mma.variant(variant)
    a, b = autotune.operands(v, size, size, size)
    a, bt = mma.prepare(v, a, b)
    out = torch.empty(size, size, dtype=v.out, device="cuda")
    launch = launcher(variant, tile, source)
    return lambda: launch(a, bt, out)


def main(out_dir: Path, plan: dict) -> None:
    log = open(out_dir / "tuning.log", "w")

    def say(*parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    say(env.environment_line())
    say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "nvrtc",
        nvrtc.version_string())
    t0 = time.time()
    jobs = [(v, tuple(t), src) for v, items in plan["tiles"].items() for src, t in items]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: compiled(*job), jobs))
    say(f"compiled {len(jobs)} programs in {time.time() - t0:.1f} s")
    results, ceilings, peers = [], {}, {}

    def measure(variant, items):
        if variant not in ceilings:
            reps = [ceiling.mma_ceiling(variant) for _ in range(5)]
            ceilings[variant] = max(reps)
            say(f"ceiling {variant}: " + " ".join(f"{r:.0f}" for r in reps))
            if variant == "int8":
                peers[variant] = {}
                for size in plan["sizes"]:
                    a = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8)
                    bt = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8)
                    t = timing.benchmark(torch._int_mm, a, bt.t(), min_time_s=0.3)
                    peers[variant][size] = timing.tflops(timing.matmul_flop(size, size, size),
                                                         t.median)
                say("torch._int_mm", peers[variant])
        for source, tile in items:
            tile = tuple(tile)
            try:
                err = check(variant, tile, source)
            except Exception as e:  # a wrong kernel is a result too: record it, go on
                say(f"{variant} {source} {tile} WRONG: {str(e)[:300]}")
                continue
            row = {"variant": variant, "source": source, "tile": tile, "max_err": err}
            for size in plan["sizes"]:
                r = rate(variant, tile, source, size)
                row[size] = round(r, 1)
                row[f"{size}/ceil"] = round(r / ceilings[variant], 3)
                if variant in peers:
                    row[f"{size}/int_mm"] = round(r / peers[variant][size], 3)
            say(json.dumps(row))
            results.append(row)

    for variant, items in plan["tiles"].items():
        measure(variant, items)
    bf16 = sorted((r for r in results if r["variant"] == "bf16"),
                  key=lambda r: -sum(r[f"{s}/ceil"] for s in plan["sizes"]))
    best = [(r["source"], r["tile"]) for r in bf16[:plan.get("top", 2)]]
    say("best bf16:", best)
    for variant, extra in plan.get("followup", {}).items():
        measure(variant, [*map(tuple, extra), *best])
    (out_dir / "results.json").write_text(json.dumps({"ceilings": ceilings, "peers": peers,
                                                     "rows": results}, indent=1, default=str))
    from course_utils import ncu

    profiles = {"before": ("mma.cu", OLD), "after": best[0]} if plan.get("profile", True) else {}
    for name, (source, tile) in profiles.items():
        try:
            report = ncu.profile("mma_tuning_run:profile_call", "bf16", list(tile), source,
                                 8192, label=f"{name}: {source} {tile}")
        except Exception as e:
            say(f"ncu {name} failed: {str(e)[-1500:]}")
            continue
        (out_dir / f"ncu-{name}.csv").write_text(report.raw)
        say(str(report))
    say(f"total {time.time() - t0:.0f} s")


def table(paths: list[str]) -> str:
    """The runs' results.json files as one markdown table (for mma-tuning-notes.md)."""
    lines = ["| run | variant | kernel | tile (BM BN WM WN BK_BYTES STAGES) | 4096³ | of ceiling "
             "| 8192³ | of ceiling | of _int_mm (4096/8192) |", "|" + "---|" * 9]
    for path in paths:
        data = json.loads(Path(path).read_text())
        for r in data["rows"]:
            peer = (f"{r['4096/int_mm']:.2f} / {r['8192/int_mm']:.2f}" if "4096/int_mm" in r
                    else "")
            lines.append(f"| {Path(path).stem} | {r['variant']} | "
                         f"{r.get('kernel', r.get('source', 'mma.cu'))} | "
                         f"{' '.join(map(str, r['tile']))} | {r['4096']:.0f} | "
                         f"{r['4096/ceil']:.2f} | {r['8192']:.0f} | {r['8192/ceil']:.2f} | "
                         f"{peer} |")
        ceilings = ", ".join(f"{v} {c:.0f}" for v, c in data["ceilings"].items())
        lines.append(f"| {Path(path).stem} | ceilings (best of the run) | {ceilings} |"
                     + " |" * 6)
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        print(table(sys.argv[2:]))
        sys.exit()
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    main(out, json.loads(Path(sys.argv[2]).read_text()))
