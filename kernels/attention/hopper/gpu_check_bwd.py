"""One GPU session for the Hopper backward: check every gradient, then time forward + backward.

    python -m kernels.attention.hopper.gpu_check_bwd [--only check time tune] [--debug dkdv|dq]

``check`` runs each shape in a child process of its own (an illegal address or a trapped
barrier wait there cannot hide the other shapes' results; a wait longer than the kernels'
WAIT_LIMIT_MCYCLES traps instead of hanging) and prints, per shape and dtype, one line:

    ok   bf16 B=1 H=2 Sq=130 Sk=130 D=128 causal  lse2 2.4e-07 | O 3.1e-03 (sdpa 2.9e-03) | dQ ...

``lse2``: the largest absolute difference between the Hopper forward's lse2 and the Triton
forward's; ``O``, ``dQ``, ``dK``, ``dV``: the largest absolute error against float64 eager
autograd relative to the largest exact value (``autograd.gradient_errors``), SDPA's own beside
it; ``ok`` when each is within the tests' tolerance (3e-2 bf16, 1e-2 fp16) or 2x SDPA's, and
lse2 within 1e-3. ``--debug dkdv`` (or ``dq``) launches that backward kernel alone: the other's
gradients print as NaN, so a wrong line says which kernel to read.

``time`` measures forward + backward at B=4 H=16 D=128 bf16, S = 4096 and 8192, causal and not,
for SDPA's cuDNN and flash backends, the Triton autograd function and ``("attention", "wgmma")``
(``kernels.attention.bench.measure``: interleaved rounds, medians, TFLOP/s counting a backward
as 2.5 forwards), then the backward alone (given O and lse2) against the Triton backward's.
``tune`` times the backward alone for a few ring depths and dQ consumer counts.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import traceback

import torch

PARTS = ("check", "time", "tune")
TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2}
LSE_TOL = 1e-3
# (B, H, Sq, Sk, D, causal): both head dims, causal and not, Sq != Sk both ways, ragged ends,
# keys that no query sees (causal, Sk > Sq), several tiles of each kernel
SHAPES = [(1, 2, 128, 128, 64, False), (2, 3, 77, 77, 64, True), (1, 2, 130, 130, 128, True),
          (1, 2, 40, 97, 64, True), (1, 2, 200, 70, 128, True), (1, 2, 1, 50, 64, False),
          (2, 2, 300, 513, 128, False), (1, 2, 70, 300, 64, True), (1, 4, 1000, 1000, 128, True),
          (2, 2, 1030, 777, 64, False)]
TIMED = ((4, 16, 4096, 128), (4, 16, 8192, 128))


def _debug_function(only: str | None):
    """``attention(q, k, v, causal)`` through the Hopper forward and backward; ``only`` runs
    one backward kernel (bwd.backward's switch)."""
    from kernels.attention.hopper import bwd

    return lambda q, k, v, causal=False: bwd.HopperAttention.apply(q, k, v, causal, only)


def check_case(index: int, only: str | None) -> int:
    """One shape in both dtypes; the number of failing lines."""
    from kernels.attention import autograd, triton_fwd
    from kernels.attention.hopper import bwd

    b, h, sq, sk, d, causal = SHAPES[index]
    bad = 0
    for dtype in (torch.bfloat16, torch.float16):
        label = (f"{str(dtype)[6:]:4s} B={b} H={h} Sq={sq} Sk={sk} D={d}"
                 f"{' causal' if causal else ''}")
        try:
            torch.manual_seed(index)
            q = torch.randn(b, h, sq, d, device="cuda").to(dtype)
            k, v = (torch.randn(b, h, sk, d, device="cuda").to(dtype) for _ in range(2))
            if why := bwd.reason(q, k, v, causal):
                print(f"skip {label}: {why}", flush=True)
                continue
            _, lse = bwd.forward(q, k, v, causal)
            _, want = triton_fwd.forward(q, k, v, causal)
            torch.cuda.synchronize()
            lse_err = (lse - want).abs().max().item()
            found = autograd.gradient_errors(q, k, v, causal, fns={"wgmma": _debug_function(only)})
            torch.cuda.synchronize()
            ours, sdpa = found["wgmma"], found["sdpa"]
            ok = lse_err <= LSE_TOL and all(
                not math.isnan(e) and e <= max(TOL[dtype], 2 * sdpa[n]) for n, e in ours.items())
            parts = " | ".join(f"{n} {e:.1e} (sdpa {sdpa[n]:.1e})" for n, e in ours.items())
            print(f"{'ok  ' if ok else 'FAIL'} {label}  lse2 {lse_err:.1e} | {parts}", flush=True)
            bad += not ok
        except Exception as err:  # say which, and go on with the other dtype
            bad += 1
            print(f"FAIL {label}: {type(err).__name__}: {str(err).strip()[:300]}", flush=True)
            if "illegal" in str(err) or "launch failure" in str(err):
                break  # the context is gone: nothing more runs in this process
    return bad


def check(only: str | None) -> int:
    """Every shape, each in a child process; the number of failures."""
    bad = 0
    for index in range(len(SHAPES)):
        command = [sys.executable, "-m", "kernels.attention.hopper.gpu_check_bwd", "--case",
                   str(index)] + (["--debug", only] if only else [])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            bad += 1
            print(f"FAIL shape {SHAPES[index]}: the child ran past 600 s (a hang)", flush=True)
            continue
        print(done.stdout.rstrip(), flush=True)
        if done.returncode not in (0, 1):  # 1: it printed its failures; else it crashed
            bad += 1
            tail = "\n    ".join(done.stderr.strip().splitlines()[-8:])
            print(f"FAIL shape {SHAPES[index]}: child exit {done.returncode}\n    {tail}",
                  flush=True)
        else:
            bad += done.returncode
    print(f"check: {bad} failing shapes or lines", flush=True)
    return bad


def _backward_alone(shape, causal, config=None):
    """(ms of the Hopper backward, ms of the Triton backward) given O, lse2 and dO."""
    from course_utils import timing
    from kernels.attention import triton_bwd, triton_fwd
    from kernels.attention.hopper import bwd

    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse = bwd.forward(q, k, v, causal)
    o_t, lse_t = triton_fwd.forward(q, k, v, causal)
    ours = timing.benchmark(lambda: bwd.backward(q, k, v, o, lse, do, causal,
                                                 config=config or bwd.CONFIG),
                            device="cuda", name="wgmma backward").median
    theirs = timing.benchmark(lambda: triton_bwd.backward(q, k, v, o_t, lse_t, do, causal),
                              device="cuda", name="triton backward").median
    return ours, theirs


def time_all() -> None:
    from kernels.attention import bench

    providers = ["sdpa_cudnn", "sdpa_flash", "triton", "wgmma"]
    for shape in TIMED:
        for causal in (False, True):
            records = bench.measure(shape, causal, backward=True, providers=providers)
            by = {r.what.split(" ", 1)[0]: r.value for r in records}
            for name, value in by.items():
                ratios = "  ".join(f"{value / by[p]:5.2f}x {p}" for p in providers[:3]
                                   if p in by and p != name)
                print(f"  fwd+bwd {shape} causal={causal!s:5s} {name:10s} {value:6.0f} TFLOP/s"
                      f"  {ratios}", flush=True)
            ours, theirs = _backward_alone(shape, causal)
            print(f"  bwd alone {shape} causal={causal!s:5s} wgmma {ours:.3f} ms, triton "
                  f"{theirs:.3f} ms: {theirs / ours:.2f}x triton's speed", flush=True)


def tune() -> None:
    from kernels.attention.hopper import bwd

    candidates = [bwd.Config(ks, qs, qc) for ks in (2, 3) for qs in (2, 3, 4) for qc in (1, 2)]
    for causal in (False, True):
        for c in candidates:
            try:
                ours, theirs = _backward_alone(TIMED[0], causal, c)
                print(f"  {c} causal={causal!s:5s} {ours:.3f} ms ({theirs / ours:.2f}x triton)",
                      flush=True)
            except Exception as err:
                print(f"  {c} causal={causal}: {type(err).__name__} {str(err)[:200]}",
                      flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=["check", "time"], choices=PARTS)
    parser.add_argument("--debug", choices=("dkdv", "dq"), default=None)
    parser.add_argument("--case", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:  # a child of check()
        return 1 if check_case(args.case, args.debug) else 0
    from course_utils import env

    print(env.environment_line(), flush=True)
    for part in args.only:
        print(f"=== {part}", flush=True)
        try:
            if part == "check":
                check(args.debug)
            elif part == "time":
                time_all()
            else:
                tune()
        except Exception:
            print(traceback.format_exc(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
