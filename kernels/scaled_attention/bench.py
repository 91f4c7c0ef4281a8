"""fp8 attention on a GPU, against our bf16 forward and SDPA's cuDNN backend (issue 34's target:
the fp8 forward at least 1.5× our bf16 forward at S = 8192)::

    python -m course bench scaled_attention   # an sm_89+ GPU; on a CPU it says it times nothing

B = 2, H = 16, S = 8192, D = 128, causal and not; TFLOP/s counted as ``4·B·H·S²·D`` (halved
when causal) for every provider, in interleaved rounds (an H100 slows its clock as it heats),
each figure the median:

* **fp8**: the registered ``scaled_attention`` Triton forward, its inputs quantised beforehand,
  as a model calls it whose projections write Q, K and V in fp8 (their epilogue quantises);
  its ceiling is cuBLAS's fp8 matmul (``torch._scaled_mm``, e4m3, 8192³) of the same run;
* **bf16**: our Triton forward (``attention/triton``), the verdict's peer, and SDPA's cuDNN
  backend, with cuBLAS's bf16 matmul as their ceiling;
* **quantising**: ``quantize_qkv`` of the bf16 Q, K, V, timed on its own: what a model that
  quantises in separate kernels pays per call, in GB/s against the copy bandwidth and as a
  fraction of the fp8 forward's time.

``python -m kernels.scaled_attention.tune`` times the forward's candidate configurations.
"""

from __future__ import annotations

import statistics

import torch

from course_utils import env, results, timing

LESSON = "hopper_backward.fp8"
SHAPE = (2, 16, 8192, 128)  # B, H, S, D
TARGET = 1.5  # × our bf16 forward
ROUNDS = 3
FP8, BF16, CUDNN, QUANTIZE = "triton fp8", "triton bf16", "sdpa_cudnn bf16", "quantize_qkv"


def fp8_ceiling(n: int = 8192) -> float:
    """cuBLAS's fp8 matmul (``torch._scaled_mm``, e4m3, per-tensor scales) at n³, TFLOP/s."""
    import kernels
    from kernels.scaled_matmul import E4M3, quantize_operands

    args = quantize_operands(torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda"),
                             E4M3)
    ms = timing.benchmark(kernels.get_kernel("scaled_matmul", "cublas"), *args,
                          name="torch._scaled_mm").median
    return timing.tflops(timing.matmul_flop(n, n, n), ms)


def calls(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> dict:
    """What is timed, by name: each a function of no arguments (``None``: what keeps it from
    running here, in words)."""
    import kernels
    from kernels.attention import sdpa
    from kernels.scaled_attention.quantize import quantize_qkv

    fp8, bf16 = (kernels.get_kernel("scaled_attention", "triton"),
                 kernels.get_kernel("attention", "triton"))
    quantised = quantize_qkv(q, k, v)

    def ours():
        with torch.no_grad():  # inference: no autograd graph, no saved log-sum-exp
            return bf16(q, k, v, causal)

    found = {FP8: fp8.supports(*quantised, causal) or (lambda: fp8(*quantised, causal)),
             BF16: bf16.supports(q, k, v, causal) or ours,
             CUDNN: sdpa.reason("cudnn", q, k, v, causal) or (
                 lambda: sdpa.attention("cudnn", q, k, v, causal)),
             QUANTIZE: lambda: quantize_qkv(q, k, v)}
    return found


def measure(shape=SHAPE, causal: bool = False, rounds: int = ROUNDS) -> dict[str, float | str]:
    """Median ms of each of :func:`calls` over interleaved rounds (or why it did not run)."""
    b, h, s, d = shape
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fns = calls(q, k, v, causal)
    found = {name: [] for name, fn in fns.items() if callable(fn)}
    for _ in range(rounds):
        for name in found:
            found[name].append(timing.benchmark(fns[name], device="cuda", name=name,
                                                min_time_s=0.1).median)
    return {name: statistics.median(found[name]) if name in found else fn
            for name, fn in fns.items()}


def records(shape, causal: bool, ms: dict, ceilings: dict[str, float]) -> list[results.Record]:
    """The figures of one problem (see the module's docstring), printed as they are made."""
    from kernels.attention.bench import flop

    b, h, s, d = shape
    work = flop(b, h, s, d, causal)
    what = f"fwd B={b} H={h} S={s} D={d}{' causal' if causal else ''}"
    rate = {n: timing.tflops(work, t) for n, t in ms.items() if isinstance(t, float)}
    for name, t in ms.items():
        print(f"  {name:16s} " + (f"{t:8.3f} ms" + (f" {rate[name]:7.1f} TFLOP/s"
                                                      if name != QUANTIZE else "")
                                  if isinstance(t, float) else f"does not run: {t}"))
    found = []
    if FP8 in rate:
        peer = {"peer": round(rate[BF16], 1), "peer_what": "our bf16 Triton forward "
                "(attention/triton), same run"} if BF16 in rate else {}
        found.append(results.Record(LESSON, f"{FP8} {what}", round(rate[FP8], 1), "TFLOP/s",
                                    round(ceilings["fp8"], 1), "torch._scaled_mm e4m3 8192^3, "
                                    "same run", **peer))
    if BF16 in rate:
        peer = {"peer": round(rate[CUDNN], 1), "peer_what": "SDPA's cuDNN backend, bf16, same "
                "run"} if CUDNN in rate else {}
        found.append(results.Record(LESSON, f"{BF16} {what}", round(rate[BF16], 1), "TFLOP/s",
                                    round(ceilings["bf16"], 1), "cuBLAS bf16 8192^3, same run",
                                    **peer))
    if QUANTIZE in rate:
        # read bf16 Q, K, V (2 bytes a value), write e4m3 (1 byte): the scales are negligible
        moved = 3 * b * h * s * d * (2 + 1)
        gbs = timing.gbps(moved, ms[QUANTIZE])
        print(f"  quantising Q, K, V: {gbs:,.0f} GB/s = {gbs / ceilings['copy']:.0%} of copy; "
              + (f"{ms[QUANTIZE] / ms[FP8]:.0%} of the fp8 forward's time; with it, fp8 runs "
                 f"at {timing.tflops(work, ms[QUANTIZE] + ms[FP8]):.0f} TFLOP/s"
                 if FP8 in rate else ""))
        found.append(results.Record(LESSON, f"{QUANTIZE} bf16 to e4m3, per-block scales, "
                                    f"{what.removeprefix('fwd ')}", round(gbs, 1), "GB/s",
                                    round(ceilings["copy"], 1), "device copy bandwidth, same run"))
    return found


def run(quick: bool = False) -> list[results.Record]:
    if not env.HAS_CUDA:
        print("fp8 attention is timed on a GPU only (this machine has none): its checks run in "
              "the interpreter, tests/test_scaled_attention.py")
        return []
    if torch.cuda.get_device_capability() < (8, 9):
        print(f"fp8 attention needs fp8 tensor cores (sm_89+); this GPU is "
              f"{env.device_info().arch}: nothing to time")
        return []
    from kernels.attention.bench import matmul_ceiling

    b, h, s, d = SHAPE
    shape = (b, h, s // 4 if quick else s, d)
    ceilings = {"fp8": fp8_ceiling(), "bf16": matmul_ceiling(torch.bfloat16),
                "copy": timing.copy_bandwidth()}
    found = []
    for causal in (False, True):
        print(f"B={shape[0]} H={shape[1]} S={shape[2]} D={shape[3]}"
              f"{' causal' if causal else ''}")
        found += records(shape, causal, measure(shape, causal, rounds=1 if quick else ROUNDS),
                         ceilings)
    for line in verdicts(found):
        print(line)
    return found


def verdicts(found: list[results.Record]) -> list[str]:
    """The target, one line per problem: the fp8 forward ≥ 1.5× our bf16 forward."""
    return [timing.verdict(f"{r.what}: ≥ {TARGET}× {r.peer_what}", f"{r.value / r.peer:.2f}×",
                           r.value >= TARGET * r.peer,
                           "fp8 halves only the matmuls' time: the softmax's exp2 and the "
                           "online update cost what they cost in bf16, and Triton does not "
                           "overlap them with the matmuls as FlashAttention-3 does; or the "
                           "configuration (python -m kernels.scaled_attention.tune)")
            for r in found if r.what.startswith(f"{FP8} ") and r.peer]
