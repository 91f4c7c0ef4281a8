"""One GPU session for the Hopper attention: check, time, record the timeline, profile, sanitize.

    python -m kernels.attention.hopper.gpu_run --out DIR [--only check time timeline ncu sanitize
        bwd-check bwd-time bwd-tune] [--debug dkdv|dq]

Each part writes ``DIR/<part>.txt``. The correctness check runs first, in a child process (an
illegal access there cannot take the timings down with it): every step on the registry's cases
in bf16 and fp16, then long sequences and the variants (grouped-query attention, windows, packed
sequences: :func:`check_variants`) against the float32 reference, outputs poisoned with NaN
first. The timings put every step beside SDPA's cuDNN and flash backends and the Triton
provider (``kernels.attention.bench.measure``: interleaved rounds, medians); the timeline is
saved for CPU students (``<device>-attention-timeline.json``); Nsight Compute profiles the last
step once; compute-sanitizer runs memcheck, racecheck and synccheck over the registry's small
cases (``sanitize_attention.py``). The ``bwd-*`` parts check, time and tune both versions of
the backward (``gpu_run_bwd.py`` says how; ``--debug`` runs one kernel of version 1).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

PARTS = ("check", "time", "tune", "timeline", "ncu", "sanitize", "bwd-check", "bwd-time",
         "bwd-tune")
SHAPES = ((4, 16, 4096, 128), (2, 16, 8192, 128), (1, 16, 16384, 128), (4, 32, 4096, 64))


def check() -> int:
    """Every step on the registry's cases and on long sequences; the number of failures."""
    import kernels
    from kernels.attention.hopper import fwd  # (importing the folder registers the kernels)
    from kernels.registry import OPS, verify

    bad = 0
    for kernel in kernels.get_kernels("attention", where=lambda k: k.provider == "wgmma"):
        for case in OPS["attention"].cases:
            for dtype in kernel.dtypes:
                args = case.make(dtype, "cuda")
                if why := kernel.supports(*args):
                    print(f"  skip {kernel.name:22s} {case.label:30s} {dtype}: {why}")
                    continue
                try:
                    verify(kernel, *args, label=case.label)
                    torch.cuda.synchronize()
                except Exception as err:
                    bad += 1
                    print(f"  FAIL {kernel.name} {case.label} {dtype}: {str(err)[:400]}")
        print(f"  {kernel.name}: registry cases done ({bad} failures so far)", flush=True)
    reference = kernels.reference("attention")
    for s in fwd.STEPS.values():
        for (b, h, sq, sk, d), causal in [((1, 2, 4096, 4096, 128), True),
                                          ((1, 2, 4096, 4096, 128), False),
                                          ((2, 3, 2049, 2049, 64), True),
                                          ((1, 4, 1000, 3001, 128), False),
                                          ((1, 1, 3001, 1000, 64), True)]:
            for dtype in fwd.DTYPES:
                q = (torch.randn(b, h, sq, d, device="cuda") * 2).to(dtype)
                k = (torch.randn(b, h, sk, d, device="cuda") * 2).to(dtype)
                v = torch.randn(b, h, sk, d, device="cuda").to(dtype)
                out = torch.full_like(q, float("nan"))
                fwd.launch(s, q, k, v, causal, out)
                ok, err, nan = within_tolerance(out, reference(q, k, v, causal), dtype)
                bad += not ok
                print(f"  {'ok  ' if ok else 'FAIL'} {s.name} {str(dtype)[6:]:8s} "
                      f"B={b} H={h} Sq={sq} Sk={sk} D={d} causal={causal!s:5s} max error "
                      f"{err:.2e}{' NaN!' if nan else ''}", flush=True)
    bad += check_variants()
    print(f"check: {bad} failures")
    return bad


def within_tolerance(out: torch.Tensor, expected: torch.Tensor, dtype) -> tuple[bool, float, bool]:
    """(ok, max error, NaN seen): every element within the attention op's tolerance for the
    dtype, ``atol + rtol * |expected|``, as the registry's matrix test asks (an absolute bound
    alone would ask less than one bf16 rounding of an output near 4)."""
    from kernels.registry import OPS

    atol, rtol = OPS["attention"].tol(dtype)
    out, expected = out.float(), expected.float()
    diff = (out - expected).abs()
    nan = bool(out.isnan().any())
    ok = not nan and bool((diff <= atol + rtol * expected.abs()).all())
    return ok, diff.max().item(), nan


# the variants on awkward shapes: (B, Hq, Hkv, Sq, Sk, D, causal, window); groups of 2, 4, 8,
# Sq != Sk both ways, windows shorter than a tile, of a few tiles and longer than the sequence
VARIANTS = [(2, 8, 4, 77, 77, 64, False, None), (1, 16, 2, 1000, 130, 64, True, None),
            (2, 32, 8, 513, 2049, 128, False, None), (1, 32, 8, 4096, 4096, 128, True, None),
            (2, 4, 2, 333, 333, 128, True, 9), (1, 8, 2, 1025, 700, 128, True, 200),
            (1, 2, 2, 300, 90, 64, True, 17), (1, 16, 4, 4096, 4096, 64, True, 1024),
            (1, 2, 2, 200, 200, 64, True, 5000)]
VARLEN_LENGTHS = ([1, 63, 64, 65, 1000], [1000, 1, 65, 63, 64, 4097])


def check_variants() -> int:
    """Every step on GQA, windows and packed sequences against the float32 reference, outputs
    poisoned with NaN first; the number of failures."""
    import kernels
    from kernels.attention.hopper import fwd
    from kernels.attention.varlen import cumulative, per_sequence

    reference, bad = kernels.reference("attention"), 0

    def report(ok_label: str, out: torch.Tensor, expected: torch.Tensor, dtype) -> int:
        ok, err, nan = within_tolerance(out, expected, dtype)
        print(f"  {'ok  ' if ok else 'FAIL'} {ok_label} max error {err:.2e}"
              f"{' NaN!' if nan else ''}", flush=True)
        return int(not ok)

    for s in fwd.STEPS.values():
        for dtype in fwd.DTYPES:
            for b, h, h_kv, sq, sk, d, causal, window in VARIANTS:
                q = (torch.randn(b, h, sq, d, device="cuda") * 2).to(dtype)
                k = (torch.randn(b, h_kv, sk, d, device="cuda") * 2).to(dtype)
                v = torch.randn(b, h_kv, sk, d, device="cuda").to(dtype)
                out = torch.full_like(q, float("nan"))
                fwd.launch(s, q, k, v, causal, out, window=window)
                bad += report(f"{s.name} {str(dtype)[6:]:8s} B={b} Hq={h} Hkv={h_kv} Sq={sq} "
                              f"Sk={sk} D={d} causal={causal!s:5s} window={window}", out,
                              reference(q, k, v, causal, window), dtype)
            for lengths in VARLEN_LENGTHS:
                for d, causal in ((64, True), (128, False), (128, True)):
                    cu = cumulative(lengths, "cuda")
                    q = (torch.randn(int(cu[-1]), 8, d, device="cuda") * 2).to(dtype)
                    k = (torch.randn(int(cu[-1]), 2, d, device="cuda") * 2).to(dtype)
                    v = torch.randn(int(cu[-1]), 2, d, device="cuda").to(dtype)
                    out = torch.full_like(q, float("nan"))
                    fwd.launch_varlen(s, q, k, v, cu, cu, max(lengths), causal, out)
                    bad += report(f"{s.name} {str(dtype)[6:]:8s} varlen {lengths} Hq=8 Hkv=2 "
                                  f"D={d} causal={causal!s:5s}", out,
                                  per_sequence(reference, q, k, v, cu, cu, causal), dtype)
    return bad


def time_steps(quick: bool = False) -> None:
    from kernels.attention import bench
    from kernels.attention.hopper import fwd  # (importing the folder registers the kernels)

    ceiling = bench.matmul_ceiling()
    print(f"cuBLAS bf16 8192^3: {ceiling:.0f} TFLOP/s", flush=True)
    providers = ["sdpa_cudnn", "sdpa_flash", "triton",
                 *(f"wgmma[{s.name}]" if s is not fwd.BEST else "wgmma"
                   for s in fwd.STEPS.values())]
    for shape in SHAPES[:1] if quick else SHAPES:
        for causal in (False, True):
            records = bench.measure(shape, causal, providers=providers, ceiling=ceiling,
                                    rounds=1 if quick else 3)
            by = {r.what.split(" ", 1)[0]: r.value for r in records}
            cudnn = by.get("sdpa_cudnn")
            for name, value in by.items():
                ratio = f"{value / cudnn:5.2f}x cuDNN" if cudnn else ""
                print(f"  {str(shape):22s} causal={causal!s:5s} {name:14s} {value:6.0f} "
                      f"TFLOP/s {ratio}", flush=True)


def tune() -> None:
    """Ring depths and key tiles around the steps, one shape, forward TFLOP/s beside cuDNN."""
    import dataclasses

    from course_utils import timing
    from kernels.attention import sdpa
    from kernels.attention.hopper import fwd

    candidates = [dataclasses.replace(fwd.STEPS[n], stages=st) for n, st in
                  ((2, 2), (2, 3), (3, 2), (3, 3), (3, 4), (3, 6), (4, 2), (4, 3), (4, 4), (4, 6))]
    # the overlapped steps with the other key tile at D = 64 (their own: 128; 64 here)
    candidates += [dataclasses.replace(fwd.STEPS[n], bn_d64=64, stages=st) for n, st in
                   ((3, 3), (3, 4), (4, 3), (4, 4))]
    for b, h, s, d in ((4, 16, 4096, 128), (4, 32, 4096, 64)):
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                       for _ in range(3))
            out = torch.empty_like(q)
            work = 4 * b * h * s * s * d * (0.5 if causal else 1)
            cudnn = timing.tflops(work, timing.benchmark(
                lambda: sdpa.attention("cudnn", q, k, v, causal), device="cuda").median)  # noqa: B023
            for c in candidates:
                if c.shared_bytes(d) > 227 * 1024:
                    continue
                rate = timing.tflops(work, timing.benchmark(
                    lambda c=c: fwd.launch(c, q, k, v, causal, out), device="cuda").median)  # noqa: B023
                print(f"  D={d} causal={causal!s:5s} {c.name} bn={c.key_tile(d)} stages={c.stages} "
                      f"{rate:6.0f} TFLOP/s {rate / cudnn:5.2f}x cuDNN ({cudnn:.0f})", flush=True)


def timeline(out: Path) -> None:
    from course_utils import env
    from kernels.attention.hopper import targets
    from kernels.attention.hopper import timeline as tl

    path = targets.capture_timelines(out / f"{env.device_slug()}-attention-timeline.json")
    for number, (label, events) in enumerate(tl.load(path)[1].items(), start=1):
        tl.gantt(events, label, window=60_000).savefig(out / f"timeline_step{number}.png", dpi=90)
    print(f"  saved {path}")


def ncu() -> None:
    from course_utils import ncu as nsight

    setup = ("import torch\nfrom kernels.attention.hopper import fwd\n"
             "q, k, v = (torch.randn(4, 16, 4096, 128, device='cuda', dtype=torch.bfloat16) "
             "for _ in range(3))")
    for label, call in (("wgmma step4", "fwd.attention(q, k, v, False)"),
                        ("wgmma step1", "fwd.attention(q, k, v, False, 1)"),
                        ("sdpa cudnn", "__import__('kernels.attention.sdpa', fromlist=['x'])"
                                       ".attention('cudnn', q, k, v, False)")):
        try:
            report = nsight.profile(call, setup=setup, label=label)
            print(report, flush=True)
        except Exception as err:
            print(f"  {label}: {err}", flush=True)


def sanitize() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from course_utils import sanitizer

    def one(tool):
        return tool, sanitizer.run_module(tool, "kernels.attention.hopper.sanitize_attention",
                                          timeout=900)
    with ThreadPoolExecutor(3) as pool:
        for tool, run in pool.map(one, ("memcheck", "racecheck", "synccheck")):
            lines = [ln for ln in run.output.splitlines() if ln.startswith("@@sanitize")]
            print(f"  {tool}: exit {run.returncode}, {run.summary_line}", *lines, sep="\n  ",
                  flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", default=list(PARTS), choices=(*PARTS, "check-child"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--debug", choices=("dkdv", "dq"), default=None,
                        help="bwd-check: launch this kernel of the backward's version 1 alone")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only == ["check-child"]:
        return 1 if check() else 0
    from course_utils import env

    print(env.environment_line(), flush=True)
    for part in args.only:
        start = time.time()
        print(f"=== {part}", flush=True)
        if part == "check":  # in a child: an illegal address must not end this process
            done = subprocess.run([sys.executable, "-m", "kernels.attention.hopper.gpu_run",
                                   "--out", str(out), "--only", "check-child"],
                                  capture_output=True, text=True, timeout=400)
            text = done.stdout + done.stderr
            (out / "check.txt").write_text(text)
            print("\n".join(text.strip().splitlines()[-25:]))
            print(f"check child exit {done.returncode}", flush=True)
            continue
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                if part == "time":
                    time_steps(args.quick)
                elif part == "tune":
                    tune()
                elif part == "timeline":
                    timeline(out)
                elif part == "ncu":
                    ncu()
                elif part == "sanitize":
                    sanitize()
                elif part.startswith("bwd-"):  # (bwd-check runs each case in a child)
                    from kernels.attention.hopper import gpu_run_bwd

                    {"bwd-check": lambda: gpu_run_bwd.check(args.debug),
                     "bwd-time": gpu_run_bwd.time_all, "bwd-tune": gpu_run_bwd.tune}[part]()
        except Exception:
            buffer.write(traceback.format_exc())
        (out / f"{part}.txt").write_text(buffer.getvalue())
        print(buffer.getvalue()[-6000:], flush=True)
        print(f"=== {part} took {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
