"""The Hopper backward's parts of ``gpu_run.py`` (one GPU session for the folder): check every
gradient of both versions, time them beside cuDNN, tune their ring depths.

    python -m kernels.attention.hopper.gpu_run --out DIR --only bwd-check bwd-time [bwd-tune]
        [--debug dkdv|dq]

``bwd-check`` runs each (shape, version) in a child process of its own (an illegal address or a
trapped barrier wait there cannot hide the other shapes' results; a wait longer than the
kernels' WAIT_LIMIT_MCYCLES traps instead of hanging) and prints, per shape, version and dtype,
one line:

    ok   v2 bf16 B=1 H=2 Sq=130 Sk=130 D=128 causal  lse2 2.4e-07 | O 3.1e-03 (sdpa 2.9e-03) | ...

``lse2``: the largest absolute difference between the Hopper forward's lse2 and the Triton
forward's; ``O``, ``dQ``, ``dK``, ``dV``: the largest absolute error against float64 eager
autograd relative to the largest exact value (``autograd.gradient_errors``), SDPA's own beside
it; ``ok`` when each is within the tests' tolerance (3e-2 bf16, 1e-2 fp16) or 2x SDPA's, and
lse2 within 1e-3. ``--debug dkdv`` (or ``dq``) launches that kernel of version 1 alone: the
other's gradients print as NaN, so a wrong line says which kernel to read (version 2 is one
kernel: its lines are skipped then).

``bwd-time`` measures forward + backward at B=4 H=16 D=128 bf16, S = 4096 and 8192, causal and
not, for SDPA's cuDNN and flash backends, the Triton autograd function and both Hopper versions
(``("attention", "wgmma")`` and its other registered version; ``kernels.attention.bench.measure``:
interleaved rounds, medians, TFLOP/s counting a backward as 2.5 forwards), each as a ratio to
cuDNN, then each version's backward alone (given O and lse2) against the Triton backward's.
``bwd-tune`` times the backward alone for a few ring depths (and version 1's dQ consumers).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import subprocess
import sys

import torch

TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2}
LSE_TOL = 1e-3
# (B, H, Sq, Sk, D, causal): both head dims, causal and not, Sq != Sk both ways, ragged ends,
# keys that no query sees (causal, Sk > Sq), several tiles of each kernel
SHAPES = [(1, 2, 128, 128, 64, False), (2, 3, 77, 77, 64, True), (1, 2, 130, 130, 128, True),
          (1, 2, 40, 97, 64, True), (1, 2, 200, 70, 128, True), (1, 2, 1, 50, 64, False),
          (2, 2, 300, 513, 128, False), (1, 2, 70, 300, 64, True), (1, 4, 1000, 1000, 128, True),
          (2, 2, 1030, 777, 64, False)]
TIMED = ((4, 16, 4096, 128), (4, 16, 8192, 128))


def _versions():
    from kernels.attention.hopper import bwd

    return tuple(bwd.VERSIONS)


def _function(version: int, only: str | None):
    """``attention(q, k, v, causal)`` through the Hopper forward and backward ``version``;
    ``only`` runs one kernel of version 1 (bwd.backward's switch)."""
    from kernels.attention.hopper import bwd

    return lambda q, k, v, causal=False: bwd.HopperAttention.apply(q, k, v, causal, only,
                                                                   version)


def check_case(index: int, version: int, only: str | None) -> int:
    """One shape and version in both dtypes; the number of failing lines."""
    from kernels.attention import autograd, triton_fwd
    from kernels.attention.hopper import bwd

    b, h, sq, sk, d, causal = SHAPES[index]
    bad = 0
    for dtype in (torch.bfloat16, torch.float16):
        label = (f"v{version} {str(dtype)[6:]:4s} B={b} H={h} Sq={sq} Sk={sk} D={d}"
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
            found = autograd.gradient_errors(q, k, v, causal,
                                             fns={"wgmma": _function(version, only)})
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


def check(only: str | None = None) -> int:
    """Every shape and version, each in a child process; the number of failures."""
    bad = 0
    for version in _versions():
        if only is not None and version != 1:
            print(f"skip v{version}: --debug {only} names a kernel of version 1", flush=True)
            continue
        for index in range(len(SHAPES)):
            command = [sys.executable, "-m", __name__, "--case", str(index), "--version",
                       str(version)] + (["--debug", only] if only else [])
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                bad += 1
                print(f"FAIL v{version} shape {SHAPES[index]}: the child ran past 600 s (a hang)",
                      flush=True)
                continue
            print(done.stdout.rstrip(), flush=True)
            if done.returncode not in (0, 1):  # 1: it printed its failures; else it crashed
                bad += 1
                tail = "\n    ".join(done.stderr.strip().splitlines()[-8:])
                print(f"FAIL v{version} shape {SHAPES[index]}: child exit {done.returncode}\n"
                      f"    {tail}", flush=True)
            else:
                bad += done.returncode
    print(f"bwd-check: {bad} failing shapes or lines", flush=True)
    return bad


def _backward_alone(shape, causal, configs):
    """{label: ms} of each Hopper backward ``(version, config)`` and of the Triton backward,
    given O, lse2 and dO."""
    from course_utils import timing
    from kernels.attention import triton_bwd, triton_fwd
    from kernels.attention.hopper import bwd

    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse = bwd.forward(q, k, v, causal)
    o_t, lse_t = triton_fwd.forward(q, k, v, causal)
    found = {}
    for label, (version, config) in configs.items():
        found[label] = timing.benchmark(
            lambda version=version, config=config: bwd.backward(
                q, k, v, o, lse, do, causal, config=config, version=version),
            device="cuda", name=label).median
    found["triton"] = timing.benchmark(
        lambda: triton_bwd.backward(q, k, v, o_t, lse_t, do, causal), device="cuda",
        name="triton backward").median
    return found


def time_all() -> None:
    from kernels.attention import bench
    from kernels.attention.hopper import bwd

    providers = ["sdpa_cudnn", "sdpa_flash", "triton", *bwd.providers().values()]
    for shape in TIMED:
        for causal in (False, True):
            records = bench.measure(shape, causal, backward=True, providers=providers)
            by = {r.what.split(" ", 1)[0]: r.value for r in records}
            for name, value in by.items():
                ratios = "  ".join(f"{value / by[p]:5.2f}x {p}" for p in providers[:3]
                                   if p in by and p != name)
                print(f"  fwd+bwd {shape} causal={causal!s:5s} {name:20s} {value:6.0f} TFLOP/s"
                      f"  {ratios}", flush=True)
            alone = _backward_alone(shape, causal,
                                    {f"v{v}": (v, bwd.CONFIG) for v in bwd.VERSIONS})
            for label, ms in alone.items():
                if label != "triton":
                    print(f"  bwd alone {shape} causal={causal!s:5s} {label} {ms:.3f} ms, "
                          f"triton {alone['triton']:.3f} ms: {alone['triton'] / ms:.2f}x "
                          "triton's speed", flush=True)


def tune() -> None:
    from kernels.attention.hopper import bwd

    c = bwd.CONFIG
    candidates = {f"v1 {bwd.Config(ks, qs, qc)}": (1, bwd.Config(ks, qs, qc))
                  for ks in (2, 3) for qs in (2, 3, 4) for qc in (1, 2)}
    candidates.update({f"v2 fused_stages={st}": (2, dataclasses.replace(c, fused_stages=st))
                       for st in (2, 3)})
    for causal in (False, True):
        for label, candidate in candidates.items():
            try:
                found = _backward_alone(TIMED[0], causal, {label: candidate})
                print(f"  {label} causal={causal!s:5s} {found[label]:.3f} ms "
                      f"({found['triton'] / found[label]:.2f}x triton)", flush=True)
            except Exception as err:
                print(f"  {label} causal={causal}: {type(err).__name__} {str(err)[:200]}",
                      flush=True)


def main() -> int:  # a child of check(): one shape, one version
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", type=int, required=True)
    parser.add_argument("--version", type=int, required=True)
    parser.add_argument("--debug", choices=("dkdv", "dq"), default=None)
    args = parser.parse_args()
    return 1 if check_case(args.case, args.version, args.debug) else 0


if __name__ == "__main__":
    sys.exit(main())
