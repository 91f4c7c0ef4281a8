"""Lesson 12's loss yardstick, measured once on an H100 (its output, with the environment:
nvidia-h100-80gb-hbm3-loss-yardstick-8a27582.log; this is the script that ran, reformatted).

Why does the course's bf16 model end its 200 steps lower than eager's bf16 model? Three
measurements: one step's gradients of each bf16 configuration against eager's fp32 gradients
(same weights, same batch); attention alone at the model's shape against float64; eager's fp32
loss curve over the bench's 200 steps (how far rounding alone moves the loss). ``make bench``
now trains the fp32 curve itself (:data:`kernels.model.bench.FP32`).

    python docs/results/loss_yardstick_run.py     # on a GPU, from the repository root
"""

import time

import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

import kernels
from kernels.model import bench as B
from kernels.model.train import batch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
mc, prec, shapes, lr = B.setting("cuda")
seq, bs = 1024, 8


def grads(key: str, precision: str) -> tuple[float, dict[str, torch.Tensor]]:
    t = B.trainer(B.BY_KEY[key], mc, precision, seq, bs, "cuda", lr)
    tokens, targets = batch(mc.vocab, bs, seq, 0, 0, "cuda")
    loss = t.loss(tokens, targets)
    loss.backward()
    g = {n: p.grad.detach().double() for n, p in t.model.named_parameters()}
    del t
    torch.cuda.empty_cache()
    return float(loss), g


l32, ref = grads("eager", "fp32")
print("fp32 eager loss", l32)
for key in ("eager", "all-course", "+attention", "+norm"):
    loss, g = grads(key, "bf16-autocast")
    worst = []
    for n in ref:
        error = float((g[n] - ref[n]).norm() / ref[n].norm())
        cos = float(torch.nn.functional.cosine_similarity(g[n].flatten(), ref[n].flatten(), dim=0))
        worst.append((error, n, cos, float(g[n].norm() / ref[n].norm())))
    worst.sort(reverse=True)
    median = sorted(w[0] for w in worst)[len(worst) // 2]
    print(f"\n{key} bf16 loss {loss:.6f}; median rel err {median:.3e}")
    for error, n, cos, ratio in worst[:8]:
        print(f"   {n:35s} rel {error:.3e} cos {cos:.6f} norm ratio {ratio:.4f}")

# attention alone at the model's shape, against float64
att = kernels.get_kernel("attention", "triton")
torch.manual_seed(0)
q, k, v, do = (torch.randn(8, 12, 1024, 64, device="cuda") for _ in range(4))


def forward_backward(f, dtype):
    qq, kk, vv = (x.to(dtype).requires_grad_() for x in (q, k, v))
    o = f(qq, kk, vv)
    o.backward(do.to(dtype))
    return [o.double(), qq.grad.double(), kk.grad.double(), vv.grad.double()]


reference = forward_backward(lambda a, b, c: sdpa(a, b, c, is_causal=True), torch.float64)
for name, f in (("sdpa", lambda a, b, c: sdpa(a, b, c, is_causal=True)),
                ("course", lambda a, b, c: att(a, b, c, True))):
    got = forward_backward(f, torch.bfloat16)
    errors = [f"{w}:{float((x - y).norm() / y.norm()):.3e}/{float(x.norm() / y.norm()):.4f}"
              for w, x, y in zip("o dq dk dv".split(), got, reference, strict=True)]
    print(name, " ".join(errors))

# eager's fp32 loss curve: the yardstick
t = B.trainer(B.BY_KEY["eager"], mc, "fp32", seq, bs, "cuda", lr)
start, curve = time.perf_counter(), []
for i in range(200):
    tokens, targets = batch(mc.vocab, bs, seq, i, 0, "cuda")
    curve.append(t.step(tokens, targets))
curve = [float(x) for x in curve]
print("fp32 eager curve", [round(curve[i], 5) for i in range(19, 200, 20)],
      "final(mean last 10)", sum(curve[-10:]) / 10, f"{time.perf_counter() - start:.1f}s")
