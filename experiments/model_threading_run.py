"""Probe (not course material): lesson 12's training step at S = 1024 with and
without autograd's device thread (torch.autograd.set_multithreading_enabled(False)).

    python3 docs/results/model_threading_run.py
"""
import time

import torch

from course_utils import timing
from kernels.model import bench as B

print(torch.cuda.get_device_name(), torch.__version__, flush=True)
model_config, precision, shapes, lr = B.setting("cuda")
for seq, batch_size in shapes[:1]:  # S = 1024: where the step is host-bound
    for key in ("eager", "compile", "all-course"):
        config = B.BY_KEY[key]
        found = B.trainer(config, model_config, precision, seq, batch_size, "cuda", lr)
        tokens, targets = B.batch(model_config.vocab, batch_size, seq, 0, B.SEED, "cuda")
        out = []
        for threaded in (True, False, True):
            torch.autograd.set_multithreading_enabled(threaded)
            ms = timing.benchmark(found.step, tokens, targets, warmup=3, min_time_s=1.0,
                                  device="cuda").median
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(5):
                found.step(tokens, targets)
            host = (time.perf_counter() - start) / 5 * 1e3  # includes the loss's .item()?
            torch.cuda.synchronize()
            out.append(f"{'threaded' if threaded else 'single'} {ms:.2f} ms (wall {host:.2f})")
        torch.autograd.set_multithreading_enabled(True)
        print(f"S={seq} B={batch_size} {key:10s}: " + "; ".join(out), flush=True)
        del found
        torch._dynamo.reset()
        torch.cuda.empty_cache()
