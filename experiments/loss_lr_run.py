"""Probe (not course material): lesson 12's loss after 200 steps, eager / fp32 / all-course, at
GPT-2 small's learning rate and a larger one: is the 200th step mid-descent (where rounding moves
the loss by more than 1%) or on the chain's floor?"""
import math
import time

from course_utils import env
from kernels.model import bench, train

print(env.environment_line(), flush=True)
model_config, precision, shapes, _ = bench.setting("cuda")
seq, batch_size = shapes[0]
print("chain floor: at most ln(BRANCHING) =", round(math.log(train.BRANCHING), 4), flush=True)
for lr in (6e-4, 2e-3):
    start = time.perf_counter()
    curves = bench.loss_curves(model_config, precision, seq, batch_size, "cuda", lr, 200,
                               ("eager", "all-course", "fp32"))
    finals = {k: bench.final_loss(c) for k, c in curves.items() if not isinstance(c, str)}
    for k, c in curves.items():
        print(f"lr {lr:g} {k:11s}", [round(c[i], 3) for i in range(19, 200, 20)],
              f"final {finals[k]:.4f}", flush=True)
    for k in ("all-course", "fp32"):
        print(f"lr {lr:g} {k} ends {abs(finals[k] - finals['eager']) / finals['eager']:.2%} "
              f"from eager", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)", flush=True)
