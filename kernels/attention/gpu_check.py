"""Lesson 09 on a GPU in one process: correctness (gradients included), the candidate
configurations timed, and the providers against SDPA's backends.

    python -m kernels.attention.gpu_check [--out DIR] [--skip-tune]
    python -m kernels.attention.gpu_check --decode   # the packed decoding kernel's candidates

It is how ``triton_fwd.gpu_config``, ``triton_bwd.gpu_configs`` and ``triton_decode.gpu_config``
were chosen: it prints every
candidate's time next to the others, so a new GPU can be tuned the same way. ``make bench``
(``bench.py``) records the measurements; this script only prints.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import traceback

import torch

import kernels
from course_utils import env, timing
from kernels.attention import autograd, sdpa, triton_bwd, triton_decode, triton_fwd
from kernels.registry import OPS, verify

FWD_CANDIDATES = [triton_fwd.Config(*c) for c in (
    (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 4, 4),
    (128, 32, 4, 3), (64, 64, 4, 3), (64, 32, 4, 4), (128, 64, 8, 4), (128, 128, 4, 3))]
KV_CANDIDATES = [triton_bwd.Config(*c) for c in (
    (64, 128, 8, 2), (32, 128, 4, 5), (64, 128, 4, 2), (64, 64, 4, 2), (32, 64, 4, 3),
    (32, 128, 8, 3), (64, 128, 8, 3))]
Q_CANDIDATES = [triton_bwd.Config(*c) for c in (
    (128, 64, 8, 2), (128, 32, 4, 5), (128, 64, 4, 2), (64, 64, 4, 2), (64, 32, 4, 3),
    (128, 32, 8, 3), (128, 64, 8, 3))]

# (keys a step, programs per SM, warps, stages) of the packed decoding kernel
DECODE_CANDIDATES = [triton_decode.Config(*c) for c in (
    (64, 2, 4, 3), (64, 4, 4, 3), (64, 8, 4, 3), (64, 4, 8, 3), (64, 4, 4, 2), (128, 2, 4, 3),
    (128, 4, 4, 3), (128, 4, 8, 3), (128, 8, 8, 3), (32, 4, 4, 4), (64, 16, 4, 3))]


def section(title: str) -> None:
    print(f"\n=== {title} ({time.strftime('%H:%M:%S')})", flush=True)


def guarded(fn):
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception:
            traceback.print_exc()
            sys.stdout.flush()
            return None
    return run


@guarded
def check_matrix() -> None:
    section("every registered kernel on every case (the matrix test)")
    bad = 0
    for kernel in kernels.all_kernels("attention"):
        for case in OPS["attention"].cases:
            for dtype in OPS["attention"].dtypes:
                if dtype not in kernel.dtypes:
                    continue
                args = case.make(dtype, "cuda")
                if why := kernel.supports(*args):
                    print(f"  skip {kernel.name:28s} {case.label:32s} {dtype}: {why}")
                    continue
                try:
                    verify(kernel, *args, label=case.label)
                except Exception as err:
                    bad += 1
                    print(f"  FAIL {kernel.name} {case.label} {dtype}: {str(err)[:300]}")
    print(f"  failures: {bad}")
    section("SDPA backends without their reasons (what do they do on each case?)")
    for name in sdpa.BACKENDS:
        for case in OPS["attention"].cases:
            args = case.make(torch.bfloat16, "cuda")
            try:
                got = sdpa.attention(name, *args)
                err = (got.float() - kernels.reference("attention")(*args).float())
                print(f"  {name:9s} {case.label:32s} max error {err.abs().max().item():.3g}")
            except Exception as err:
                print(f"  {name:9s} {case.label:32s} raised {type(err).__name__}: "
                      f"{str(err).splitlines()[0][:120]}")


@guarded
def check_gradients() -> None:
    section("gradients: Triton and SDPA (flash, efficient or math) against float64 eager")
    worst = 0.0
    cases = list(OPS["attention"].cases) + [
        kernels.registry.Case("long 1x2x1000x128 causal",
                              lambda dt, dev: (*(torch.randn(1, 2, 1000, 128, device=dev)
                                                 .to(dt) for _ in range(3)), True))]
    for case in cases:
        for dtype in OPS["attention"].dtypes:
            found = autograd.gradient_errors(*case.make(dtype, "cuda"))
            line = []
            for key, err in found["triton"].items():
                line.append(f"{key} {err:.1e} (sdpa {found['sdpa'][key]:.1e})")
                floor = 1e-6 if dtype == torch.float32 else 4e-3
                worst = max(worst, err / max(found["sdpa"][key], floor))
            print(f"  {case.label:30s} {str(dtype)[6:]:8s} " + "  ".join(line), flush=True)
    print(f"  worst error / max(SDPA's, floor): {worst:.2f}")


def _inputs(b, h, s, d, dtype=torch.bfloat16, grad=False):
    return [torch.randn(b, h, s, d, device="cuda", dtype=dtype).requires_grad_(grad)
            for _ in range(3)]


def flop(b, h, s, d, causal, backward=False) -> float:
    f = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    return f * 3.5 if backward else f


def ms(fn) -> float:
    return timing.benchmark(fn, device="cuda", min_time_s=0.1, warmup=2).median


def fastest(candidates: list, run, failed: str) -> tuple[float, object]:
    """Every candidate configuration in order: ``run(c)`` times it and returns (ms, the line to
    print); one that raises is printed as ``{failed} {c}: Error message`` and left out (a
    configuration this GPU cannot run, out of shared memory say). Returns the fastest (ms, c),
    the first of equal times."""
    rows = []
    for c in candidates:
        try:
            t, line = run(c)
        except Exception as err:
            print(f"{failed} {c}: {type(err).__name__} {str(err)[:100]}")
            continue
        rows.append((t, c))
        print(line, flush=True)
    if not rows:
        raise RuntimeError(f"{failed.strip()}: every candidate configuration failed")
    return min(rows, key=lambda r: r[0])


def _forward_row(q, k, v, causal: bool, flash: float):
    """``run(config)`` for :func:`fastest`: the forward's time with ``config``, beside SDPA's
    flash backend (``flash`` ms)."""
    d = q.shape[-1]

    def run(c):
        t = ms(lambda: triton_fwd.forward(q, k, v, causal, config=c))
        return t, (f"  D={d} causal={causal!s:5s} {c!s:32s} {t:.3f} ms  "
                   f"{flash / t:.2f}x flash")
    return run


def _backward_row(problem: tuple, which: str, other: triton_bwd.Config):
    """``run(config)`` for :func:`fastest`: the backward's time (``problem`` is q, k, v, o, lse,
    do, causal) with ``config`` for the ``which`` kernel ("kv": dK/dV's, "q": dQ's) and
    ``other`` for the other one."""
    causal = problem[-1]

    def run(c):
        pair = (c, other) if which == "kv" else (other, c)
        t = ms(lambda: triton_bwd.backward(*problem, configs=pair))
        return t, f"  causal={causal!s:5s} {which:2s} {c!s:32s} bwd {t:.3f} ms"
    return run


def _decode_row(q, k, v, exact: torch.Tensor, label: str, moved: int, copy: float):
    """``run(config)`` for :func:`fastest`: the decoding kernel's error against ``exact`` and
    its time with ``config``, as a share of ``copy`` GB/s (``moved`` bytes read)."""
    def run(c):
        err = (triton_decode.forward(q, k, v, config=c)[0].float() - exact.float()).abs()
        t = ms(lambda: triton_decode.forward(q, k, v, config=c))
        return t, (f"  {label} {c!s:34s} {timing.gbps(moved, t) / copy:5.0%} of copy, "
                   f"max error {err.max().item():.1e}")
    return run


@guarded
def tune(results: dict) -> None:
    section("forward configurations, bf16, B=4 H=16 S=4096")
    best = {}
    for d in (64, 128):
        for causal in (False, True):
            q, k, v = _inputs(4, 16 if d == 128 else 32, 4096, d)
            flash = ms(lambda: sdpa.attention("flash", q, k, v, causal))  # noqa: B023
            # a causal tile must hold whole key blocks
            t, best[(d, causal)] = fastest(
                [c for c in FWD_CANDIDATES if not (causal and c.block_m % c.block_n)],
                _forward_row(q, k, v, causal, flash), f"  D={d} causal={causal}")
            print(f"  -> best D={d} causal={causal}: {best[(d, causal)]} ({flash / t:.2f}x)")
    results["fwd_best"] = {f"{d} {c}": str(cfg) for (d, c), cfg in best.items()}
    section("backward configurations, bf16, B=4 H=16 S=4096 D=128")
    for causal in (False, True):
        q, k, v = _inputs(4, 16, 4096, 128)
        o, lse = triton_fwd.forward(q, k, v, causal)
        do = torch.randn_like(o)
        base = triton_bwd.gpu_configs(128, torch.bfloat16, causal)
        found = {}
        problem = (q, k, v, o, lse, do, causal)
        # dK/dV's kernel first, dQ's kept at its default; then dQ's, beside the dK/dV found
        found["kv"] = fastest(KV_CANDIDATES, _backward_row(problem, "kv", base[1]), "  kv")[1]
        found["q"] = fastest(Q_CANDIDATES, _backward_row(problem, "q", found["kv"]), "  q")[1]
        print(f"  -> best causal={causal}: kv {found['kv']}, q {found['q']}")
        results[f"bwd_best causal={causal}"] = [str(found["kv"]), str(found["q"])]


@guarded
def tune_decode(results: dict) -> None:
    section("decoding with GQA (packed, split-KV), bf16, one query, % of copy bandwidth")
    for b, h, h_kv, sk, d in ((8, 32, 8, 8192, 128), (8, 32, 8, 32768, 128), (1, 32, 8, 8192, 128),
                              (8, 32, 32, 4096, 128), (8, 32, 8, 8192, 64)):
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, h_kv, sk, d, device="cuda", dtype=torch.bfloat16)
                for _ in range(2))
        moved = 2 * k.numel() * k.element_size()
        copy = timing.copy_bandwidth(moved)
        exact = kernels.reference("attention")(q, k, v)
        label = f"B={b} Hq={h} Hkv={h_kv} Sk={sk} D={d}"
        for name, fn in (("dense triton_fwd", lambda: triton_fwd.forward(q, k, v)),  # noqa: B023
                         ("sdpa cudnn", lambda: sdpa.attention("cudnn", q, k, v))):  # noqa: B023
            print(f"  {label} {name:34s} {timing.gbps(moved, ms(fn)) / copy:5.0%} of copy")
        t, best = fastest(DECODE_CANDIDATES, _decode_row(q, k, v, exact, label, moved, copy),
                          f"  {label}")
        print(f"  -> best {label}: {best} ({timing.gbps(moved, t) / copy:.0%})")
        results[f"decode_best {label}"] = str(best)


@guarded
def measure(results: dict) -> None:
    section("providers against SDPA's backends, bf16, D=128, H=16 (TFLOP/s, x flash)")
    for s, b in ((4096, 4), (8192, 2), (16384, 1)):
        for causal in (False, True):
            q, k, v = _inputs(b, 16, s, 128, grad=True)
            do = torch.randn_like(q)
            fns = {"triton": autograd.attention,
                   **{f"sdpa_{n}": functools.partial(sdpa.attention, n) for n in sdpa.BACKENDS}}
            fwd, both = {}, {}
            for name, fn in fns.items():
                with torch.no_grad():
                    fwd[name] = ms(lambda fn=fn: fn(q, k, v, causal))  # noqa: B023
                both[name] = ms(lambda fn=fn: fn(q, k, v, causal).backward(do))  # noqa: B023
            f1, f2 = flop(b, 16, s, 128, causal), flop(b, 16, s, 128, causal, True)
            for name in fns:
                line = (f"  S={s:5d} causal={causal!s:5s} {name:15s} fwd "
                        f"{timing.tflops(f1, fwd[name]):6.0f} TFLOP/s "
                        f"{fwd['sdpa_flash'] / fwd[name]:.2f}x flash | fwd+bwd "
                        f"{timing.tflops(f2, both[name]):6.0f} "
                        f"{both['sdpa_flash'] / both[name]:.2f}x flash")
                print(line, flush=True)
                results.setdefault("measure", []).append(line.strip())


@guarded
def memory(results: dict) -> None:
    section("peak memory above the inputs, bf16, B=1 H=16 D=128 (forward, no grad)")
    for s in (1024, 2048, 4096, 8192):
        q, k, v = _inputs(1, 16, s, 128)
        row = []
        for name in ("naive", "triton", "sdpa_flash"):
            kernel = kernels.get_kernel("attention", name)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            kernel(q, k, v, False)
            torch.cuda.synchronize()
            row.append(f"{name} {(torch.cuda.max_memory_allocated() - base) / 2**20:8.1f} MiB")
        print(f"  S={s:5d}  " + "  ".join(row), flush=True)


@guarded
def instructions() -> None:
    """Which tensor-core instruction each compiled Triton kernel uses (PTX of the kernels run so
    far): ``wgmma`` on Hopper when Triton could, ``mma.sync`` otherwise."""
    section("tensor-core instructions in the compiled kernels (PTX)")
    for fn in (triton_fwd.attention_fwd_kernel, triton_bwd.dkdv_kernel, triton_bwd.dq_kernel):
        for entry in fn.device_caches.values():
            for compiled in entry[0].values():
                ptx = compiled.asm.get("ptx", "")
                consts = {k: v for k, v in getattr(compiled.src, "constants", {}).items()
                          if isinstance(v, int | bool)}
                print(f"  {fn.__name__:22s} wgmma.mma_async {ptx.count('wgmma.mma_async'):3d}  "
                      f"mma.sync {ptx.count('mma.sync'):3d}  {consts}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--skip-tune", action="store_true")
    parser.add_argument("--only-instructions", action="store_true",
                        help="compile the D=128 bf16 kernels and print their instructions")
    parser.add_argument("--decode", action="store_true",
                        help="only the packed decoding kernel's candidate configurations")
    args = parser.parse_args()
    print(env.environment_line(), flush=True)
    results: dict = {}
    if args.decode:
        tune_decode(results)
        return 0
    if args.only_instructions:
        for causal in (False, True):
            q = torch.randn(1, 2, 256, 128, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True)
            autograd.attention(q, q, q, causal).sum().backward()
        instructions()
        return 0
    check_matrix()
    check_gradients()
    if not args.skip_tune:
        tune(results)
        tune_decode(results)
    measure(results)
    memory(results)
    instructions()
    if args.out:
        with open(f"{args.out}/gpu_check.json", "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
