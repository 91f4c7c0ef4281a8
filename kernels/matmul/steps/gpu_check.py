"""One GPU run for lesson 07's steps: every step checked, then the staircase measured.

    python -m kernels.matmul.steps.gpu_check [OUT_DIR]

1. correctness: every step in every dtype against float64 on awkward shapes (edges of every
   tile, 1 x 1, K not a multiple of the K slice), the output poisoned with NaN first; then every
   step on the matmul op's own cases through the registry (what the matrix test runs);
2. the staircase at 4096^3 bf16 (:func:`kernels.matmul.bench_steps.measure`: each step, the
   full kernel and cuBLAS in the same run), plus neighbouring configurations of each step, so
   that a step whose neighbours are too far apart can be given a better one from the same run;
3. compute-sanitizer memcheck and racecheck on the tensor-core steps (small shapes).

Writes ``steps_check.json`` and a log into OUT_DIR (default ``var/steps_check``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

import kernels
from course_utils import env, timing
from kernels.matmul import bench_steps, steps
from kernels.registry import OPS, verify

SHAPES = [(1, 1, 16), (33, 65, 40), (200, 136, 1000), (512, 384, 256), (130, 260, 72),
          (257, 129, 24)]
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# configurations beside each registered one: (step, config overrides)
NEIGHBOURS = [
    ("4_smem", {"BK": 8}), ("6_smem_2x2", {"BM": 32, "BN": 32}),
    ("6_smem_2x2", {"TN": 1, "BN": 32}),
    ("8_smem_8x8", {"BK": 16}), ("12_mma_warp_tile", {"WARPS_N": 4, "STAGES": 3}),
]


def log(out: Path, text: str) -> None:
    print(text, flush=True)
    with open(out / "steps_check.log", "a") as f:
        f.write(text + "\n")


def compile_all() -> int:
    """Every (step, configuration, dtype) this run launches, compiled in parallel threads
    (NVRTC lets go of the GIL), so that the checks below find them cached."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(v, d, c) for v, c in [(v, None) for v in steps.STEPS] + NEIGHBOURS
            for d in steps.STEPS[v].dtypes]
    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(pool.map(lambda j: steps.compile_step(j[0], j[1], config=j[2], verbose=False),
                      jobs))
    return len(jobs)


def check_values(out: Path) -> list[str]:
    failures = []
    configs = [(v, None) for v in steps.STEPS] + NEIGHBOURS
    for variant, config in configs:
        for dtype in steps.STEPS[variant].dtypes:
            for m, n, k in SHAPES:
                a = (torch.randn(m, k, device="cuda") / k**0.25).to(dtype)
                b = (torch.randn(n, k, device="cuda") / k**0.25).to(dtype).t()
                c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
                try:
                    steps.matmul_step(variant, a, b, out=c, config=config)
                    torch.cuda.synchronize()
                    torch.testing.assert_close(c.double(), a.double() @ b.double(),
                                               atol=TOL[dtype], rtol=TOL[dtype])
                except Exception as e:  # noqa: BLE001 (a log of every failure)
                    failures.append(f"{variant} {config} {dtype} {m}x{n}x{k}: "
                                    f"{type(e).__name__}: {str(e)[:300]}")
        log(out, f"values: {variant} {config or ''}: "
                 f"{'ok' if not failures else len(failures)} failures so far")
    for kernel in kernels.get_kernels("matmul", where=lambda k: k.provider == "steps"):
        for case in OPS["matmul"].cases:
            for dtype in OPS["matmul"].dtypes:
                if dtype not in kernel.dtypes:
                    continue
                args = case.make(dtype, "cuda")
                if kernel.supports(*args):
                    continue
                try:
                    verify(kernel, *args, label=case.label)
                except AssertionError as e:
                    failures.append(f"matrix {kernel.name} {case.label} {dtype}: {str(e)[:300]}")
        log(out, f"matrix cases: {kernel.name} done")
    return failures


def staircase(out: Path) -> dict:
    cublas, found = bench_steps.measure()
    a = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16).t()
    flop = timing.matmul_flop(4096, 4096, 4096)
    extra = {}
    for variant, config in NEIGHBOURS:
        t = timing.benchmark(steps.matmul_step, variant, a, b, config=config, warmup=1,
                             name=variant)
        extra[f"{variant} {json.dumps(config)}"] = timing.tflops(flop, t.median)
        log(out, f"  {variant} {config}: {extra[f'{variant} {json.dumps(config)}']:.2f}")
    values = list(found.values())
    ratios = [hi / lo for lo, hi in zip(values, values[1:], strict=False)]
    for (name, value), ratio in zip(found.items(), [None, *ratios], strict=True):
        log(out, f"{name:22s} {value:8.2f} TFLOP/s"
                 + (f"  x{ratio:.2f} over the step before" if ratio else ""))
    log(out, f"cuBLAS {cublas:.1f} TFLOP/s; largest step x{max(ratios):.2f}")
    return {"cublas": cublas, "steps": found, "neighbours": extra, "ratios": ratios}


def sanitize(out: Path) -> dict:
    tools = {}
    code = ("import torch\nfrom kernels.matmul import steps\n"
            "for v in [s for s in steps.STEPS if steps.STEPS[s].tensor_cores]:\n"
            "    for m, n, k in [(33, 65, 40), (130, 260, 72)]:\n"
            "        a = torch.randn(m, k, device='cuda').half()\n"
            "        b = torch.randn(n, k, device='cuda').half().t()\n"
            "        steps.matmul_step(v, a, b)\n"
            "torch.cuda.synchronize()\n")
    for tool in ("memcheck", "racecheck"):
        start = time.perf_counter()
        run = subprocess.run(["compute-sanitizer", "--tool", tool, sys.executable, "-c", code],
                             capture_output=True, text=True, timeout=240)
        tail = (run.stdout + run.stderr).strip().splitlines()[-3:]
        tools[tool] = {"exit": run.returncode, "tail": tail,
                       "seconds": round(time.perf_counter() - start, 1)}
        log(out, f"compute-sanitizer {tool}: exit {run.returncode}: {' | '.join(tail)}")
    return tools


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else env.var_dir("steps_check"))
    out.mkdir(parents=True, exist_ok=True)
    log(out, env.environment_line())
    result = {"environment": env.environment_line()}
    start = time.perf_counter()
    log(out, f"compiled {compile_all()} programs ({time.perf_counter() - start:.0f} s)")
    result["failures"] = check_values(out)
    log(out, f"values: {len(result['failures'])} failures ({time.perf_counter() - start:.0f} s)")
    for f in result["failures"]:
        log(out, "  FAIL " + f)
    (out / "steps_check.json").write_text(json.dumps(result, indent=1))
    result["staircase"] = staircase(out)
    (out / "steps_check.json").write_text(json.dumps(result, indent=1))
    if os.environ.get("STEPS_SANITIZE", "1") == "1":
        result["sanitizer"] = sanitize(out)
        (out / "steps_check.json").write_text(json.dumps(result, indent=1))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
