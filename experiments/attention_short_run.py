"""Probe (not course material): short prefill (B = 1, H = 32, S = 512 and 1024, causal), the
registered Triton call against SDPA's backends, back to back, one call, and the GPU time alone
(graph replay) of the Triton forward's tile configurations.

    python3 docs/results/attention_short_run.py
"""
import torch
import torch.nn.functional as F

import kernels
from course_utils import timing
from kernels.attention import sdpa
from kernels.attention import triton_fwd as T

print(torch.cuda.get_device_name(), torch.__version__, flush=True)
ours = kernels.get_kernel("attention", "triton")
CONFIGS = (T.Config(64, 64, 4, 3), T.Config(128, 64, 8, 3), T.Config(64, 32, 4, 3),
           T.Config(32, 32, 4, 2), T.Config(64, 64, 4, 2), T.Config(128, 128, 8, 2),
           T.Config(128, 32, 4, 3))


def calls_for(q, k, v) -> dict:
    return {"triton (registered)": lambda: ours(q, k, v, True),
            "F.sdpa (default)": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "cudnn": lambda: sdpa.attention("cudnn", q, k, v, True),
            "flash": lambda: sdpa.attention("flash", q, k, v, True)}


def with_config(q, k, v, c):
    return lambda: T.forward(q, k, v, True, config=c, save_lse=False)


for d in (128, 64):
    for s in (512, 1024, 2048):
        q, k, v = (torch.randn(1, 32, s, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        flop = 4 * 32 * s * s * d / 2
        calls = calls_for(q, k, v)
        line = []
        for name, fn in calls.items():
            try:
                back = timing.benchmark(fn, device="cuda").median * 1e3
                one = timing.one_call(fn, device="cuda").median * 1e3
                gpu = timing.graph_replay_ms(fn, calls=10, reps=20) * 1e3
                line.append(f"{name}: back-to-back {back:.1f} us, one call {one:.1f}, "
                            f"GPU {gpu:.1f} ({flop / gpu / 1e6:.0f} TFLOP/s)")
            except Exception as err:  # noqa: BLE001 - a probe: say and go on
                line.append(f"{name}: {type(err).__name__} {str(err)[:80]}")
        print(f"D={d} S={s}:\n  " + "\n  ".join(line), flush=True)
        for c in CONFIGS:
            try:
                gpu = timing.graph_replay_ms(with_config(q, k, v, c), calls=10, reps=20) * 1e3
                print(f"    config {c}: GPU {gpu:.1f} us ({flop / gpu / 1e6:.0f} TFLOP/s)",
                      flush=True)
            except Exception as err:  # noqa: BLE001
                print(f"    config {c}: {type(err).__name__} {str(err)[:100]}")
