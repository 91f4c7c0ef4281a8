"""Probe (not course material): where the host time of the registered calls goes on a GPU."""
import cProfile
import io
import pstats
import time

import torch
import torch.nn.functional as F

import kernels
from kernels.attention import triton_fwd
from kernels.registry import _problem_key
from kernels.rmsnorm import triton_rmsnorm as T


def timed(name, fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    best.sort()
    print(f"{name:55s} {best[2]:7.1f} us (median of 5 rounds of {n})", flush=True)


def profile(name, fn, n=500, lines=22):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(lines)
    print(f"--- cProfile {name}, {n} calls", s.getvalue(), sep="\n", flush=True)


print(torch.cuda.get_device_name(), torch.__version__)
q, k, v = (torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
reg = kernels.get_kernel("attention", "triton")
args = (q, k, v, True)
timed("SDPA", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
timed("triton_fwd.forward", lambda: triton_fwd.forward(q, k, v, True))
timed("registered", lambda: reg(*args))
timed("_problem_key", lambda: _problem_key(args))
timed("key in accepted", lambda: _problem_key(args) in reg._accepted)
print("accepted problems:", len(reg._accepted), "built:", reg._built)
timed("torch.empty x2", lambda: (torch.empty((1, 2, 128, 64), dtype=q.dtype, device=q.device),
                                 torch.empty((1, 2, 128), dtype=torch.float32, device=q.device)))
timed("q.device", lambda: q.device)
timed("torch.cuda.current_device", torch.cuda.current_device)
with torch.no_grad():
    timed("registered under no_grad", lambda: reg(*args))
profile("registered attention", lambda: reg(*args))
profile("direct attention", lambda: triton_fwd.forward(q, k, v, True), lines=12)

x = torch.randn(64, 256, device="cuda").bfloat16().requires_grad_()
w = torch.ones(256, device="cuda").bfloat16().requires_grad_()
dy = torch.randn(64, 256, device="cuda").bfloat16()
rreg = kernels.get_kernel("rmsnorm", "triton")
y, rstd = T.forward(x.detach(), w.detach())


def fb_apply():
    T.RMSNormFunction.apply(x, w, 1e-6).backward(dy)
    x.grad = w.grad = None


def fb_torch():
    F.rms_norm(x, (256,), w, 1e-6).backward(dy)
    x.grad = w.grad = None


timed("rms forward direct", lambda: T.forward(x.detach(), w.detach()))
timed("rms backward direct", lambda: T.backward(dy, x.detach(), w.detach(), rstd))
timed("rms apply forward only (graph built)", lambda: T.RMSNormFunction.apply(x, w, 1e-6))
timed("rms F.rms_norm forward only (graph built)", lambda: F.rms_norm(x, (256,), w, 1e-6))
timed("rms apply f+b", fb_apply)
timed("rms F.rms_norm f+b", fb_torch)
torch.autograd.set_multithreading_enabled(False)
timed("rms apply f+b, autograd on the calling thread", fb_apply)
timed("rms F.rms_norm f+b, autograd on the calling thread", fb_torch)
profile("rms apply f+b on the calling thread", fb_apply, lines=30)
torch.autograd.set_multithreading_enabled(True)
