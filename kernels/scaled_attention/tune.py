"""The fp8 forward's candidate configurations on a GPU: how ``triton_fwd.gpu_config`` is chosen.

    python -m kernels.scaled_attention.tune [--seq 8192] [--rounds 3]

Each of ``triton_fwd.CANDIDATES`` is first checked against the op's float64 reference on its
cases (a configuration that compiles to a wrong kernel must not win), then timed at B = 2,
H = 16, S = ``--seq``, D = 128, causal and not, in interleaved rounds; the medians are printed
with the fastest marked. It only prints: set ``gpu_config`` to the winner, with the numbers in
its docstring (as ``kernels/attention/triton_fwd.gpu_config`` records its choice).
"""

from __future__ import annotations

import argparse
import statistics
import traceback

import torch

from course_utils import env, timing
from kernels.attention.bench import flop
from kernels.registry import OPS, reference
from kernels.scaled_attention import triton_fwd
from kernels.scaled_attention.quantize import quantize_qkv


def wrong_on(config: triton_fwd.Config) -> str | None:
    """The first of the op's cases on which ``config`` disagrees with the reference, or None."""
    spec = OPS["scaled_attention"]
    atol, rtol = spec.tol(torch.bfloat16)
    for case in spec.cases:
        args = case.make(spec.dtypes[0], "cuda")
        if triton_fwd.reason(*args) is not None:
            continue
        got = triton_fwd.forward(*args, config=config)
        try:
            torch.testing.assert_close(got, reference("scaled_attention")(*args), atol=atol,
                                       rtol=rtol)
        except AssertionError as err:
            return f"{case.label}: {str(err).splitlines()[0]}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.scaled_attention.tune",
                                     description=__doc__)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not env.HAS_CUDA or torch.cuda.get_device_capability() < (8, 9):
        print("the candidates are timed on an sm_89+ GPU only; this machine has none")
        return 0
    print(f"# {env.environment_line()}")
    usable = []
    for config in triton_fwd.CANDIDATES:
        try:
            why = wrong_on(config)
        except Exception:  # a configuration the compiler refuses: say so, try the next
            why = traceback.format_exc().strip().splitlines()[-1]
        print(f"{str(config):32s} " + (f"WRONG or failed: {why}" if why else "correct"))
        if why is None:
            usable.append(config)
    b, h, d = 2, 16, 128
    for causal in (False, True):
        q, k, v = (torch.randn(b, h, args.seq, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        quantised = quantize_qkv(q, k, v)
        times = {c: [] for c in usable}
        for _ in range(args.rounds):
            for c in usable:
                times[c].append(timing.benchmark(triton_fwd.forward, *quantised, causal,
                                                 config=c, name=str(c), min_time_s=0.1).median)
        ms = {c: statistics.median(t) for c, t in times.items()}
        best = min(ms, key=ms.get) if ms else None
        print(f"\nB={b} H={h} S={args.seq} D={d}{' causal' if causal else ''}: "
              f"gpu_config gives {triton_fwd.gpu_config(d, causal)}")
        for c, t in ms.items():
            rate = timing.tflops(flop(b, h, args.seq, d, causal), t)
            print(f"  {str(c):32s} {t:8.3f} ms {rate:7.1f} TFLOP/s{'  <- fastest' * (c == best)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
