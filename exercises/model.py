"""Exercises of lesson 12: a kernel of your own in the model, and a layer's share predicted.

* ``model.swap``: the student's RMSNorm backward (lesson 10's formula, in PyTorch operations or
  their own Triton kernel from rmsnorm.backward) behind the course's Triton forward, registered as
  the provider ``rmsnorm/yours`` and swapped into the model by name. The check compares the op's
  gradients with float64 autograd on awkward shapes (fp32 and bf16), then the whole model's loss
  and every parameter's gradient with eager's, and three training steps' losses; on a GPU it
  times the step with the student's norm beside eager's and the course's.
* ``model.predict``: the share of the forward's matmul FLOPs that attention's two S × S matmuls
  take, as a formula of the model's sizes, checked against FLOPs counted on the real model
  (``torch.utils.flop_counter``) at random sizes; then set beside the share of the *time* the
  recorded GPU profile gives attention (FLOPs are not time: the S × S tensors' traffic is).
"""

from __future__ import annotations

import random

import torch

from course_utils import env
from exercises import Mismatch, compare, exercise, expect

EPS = 1e-6
PROVIDER = "yours"

SWAP_STUB = '''
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    """(dx, dweight) from the output gradient dy and what the forward saved: x (rows x cols),
    weight (cols), rstd = 1/sqrt(mean(x²) + eps) per row (float32). Per row, with
    x_hat = x · rstd and g = dy · weight:
        dx = rstd · (g − x_hat · mean(g · x_hat)),   dweight = Σ over rows of dy · x_hat
    computed in float32, returned in x's and weight's dtypes. Your launcher of exercise
    rmsnorm.backward works as it is (with its kernel in this cell); PyTorch operations are fine."""
    ...
'''

SWAP_HINT = ("per row: x_hat = x · rstd[:, None], g = dy · weight; dx = rstd[:, None] · (g − "
             "x_hat · (g · x_hat).mean(dim=1, keepdim=True)); dweight = (dy · x_hat).sum(dim=0); "
             "compute in float32 and return dx.to(x.dtype), dweight.to(weight.dtype), None")


def differentiable(rmsnorm_backward):
    """The course's Triton forward and the student's backward as one op, ``fn(x, weight, eps)``:
    what the check registers as ``rmsnorm/yours``."""
    from kernels.rmsnorm import triton_rmsnorm

    class YourRMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps):
            y, rstd = triton_rmsnorm.forward(x, weight, eps)
            ctx.save_for_backward(x, weight, rstd)
            return y

        @staticmethod
        def backward(ctx, dy):
            dx, dweight = rmsnorm_backward(dy, *ctx.saved_tensors)
            return dx, dweight, None

    def my_rmsnorm(x, weight, eps=EPS):
        """Your backward behind the course's Triton forward."""
        return YourRMSNorm.apply(x, weight, eps)

    return my_rmsnorm


def _exact(x, weight, dy):
    x64 = x.detach().double().requires_grad_()
    w64 = weight.detach().double().requires_grad_()
    y = x64 * torch.rsqrt(x64.pow(2).mean(1, keepdim=True) + EPS) * w64
    y.backward(dy.double())
    return x64.grad, w64.grad


def _op_level(kernel) -> str:
    """The registered kernel's gradients against float64 autograd; the report line."""
    shapes = ((1, 1), (7, 33), (3, 781), (16, 64))
    device = env.DEFAULT_DEVICE  # (compiled Triton on a GPU takes only GPU tensors)
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
        for rows, cols in shapes:
            x = torch.randn(rows, cols, device=device).to(dtype).requires_grad_()
            weight = (1 + 0.5 * torch.randn(cols, device=device)).to(dtype).requires_grad_()
            dy = torch.randn(rows, cols, device=device).to(dtype)
            with torch.enable_grad():
                y = kernel(x, weight, EPS)
            dx, dweight = torch.autograd.grad(y, (x, weight), dy, allow_unused=True)
            expect(dx is not None and dweight is not None, "your backward returned None for dx "
                   "or dweight", SWAP_HINT)
            exact_dx, exact_dw = _exact(x, weight, dy)
            what = f"{rows}x{cols} {str(dtype).removeprefix('torch.')}"
            compare(dx, exact_dx.to(dtype), what=f"dx, {what}", atol=tol, rtol=tol,
                    hint=SWAP_HINT)
            scale = float(exact_dw.abs().max())
            compare(dweight, exact_dw.to(dtype), what=f"dweight, {what}", atol=tol * scale,
                    rtol=tol, hint=SWAP_HINT)
    return (f"dx and dweight match float64 autograd on {', '.join(f'{r}x{c}' for r, c in shapes)}"
            " in float32 and bfloat16")


def _model_level(report) -> None:
    """The tiny model with norm='yours' against eager: loss, every gradient, three steps."""
    from kernels.model import EAGER, TINY, Providers, Trainer, Transformer, batch
    from kernels.registry import KernelNotSupported

    yours = Providers(norm=PROVIDER)
    device = env.DEFAULT_DEVICE
    grads, first = {}, {}
    for name, providers in (("eager", EAGER), ("yours", yours)):
        model = Transformer(TINY, seed=0).to(device)
        try:
            model.use(providers, batch=2, seq=16)
        except KernelNotSupported as why:
            raise Mismatch(f"the model refuses your kernel: {why}", SWAP_HINT) from None
        tokens, targets = batch(TINY.vocab, 2, 16, 0, device=device)
        loss = model.loss(tokens, targets)
        loss.backward()
        first[name] = loss.detach()
        grads[name] = {n: p.grad for n, p in model.named_parameters()}
    compare(first["yours"], first["eager"], what="the model's loss", atol=1e-5, rtol=1e-5)
    for n, g in grads["eager"].items():
        scale = float(g.abs().max())
        compare(grads["yours"][n], g, what=f"the gradient of {n}", atol=1e-4 * scale + 1e-7,
                rtol=1e-3, hint=SWAP_HINT)
    curves = {}
    for name, providers in (("eager", EAGER), ("yours", yours)):
        model = Transformer(TINY, seed=0).to(device)
        model.use(providers, batch=2, seq=16)
        trainer = Trainer(model)
        curves[name] = [float(trainer.step(*batch(TINY.vocab, 2, 16, i, device=device)))
                        for i in range(3)]
    for i, (a, b) in enumerate(zip(curves["eager"], curves["yours"], strict=True)):
        expect(abs(a - b) <= 1e-4 * abs(a), f"after {i} training steps the loss is {b:.6f} with "
               f"your norm, {a:.6f} with eager's", SWAP_HINT)
    report.line(f"the tiny model with norm='{PROVIDER}': loss and the gradient of every one of its "
                f"{len(grads['eager'])} parameters match eager's; three AdamW steps give the same "
                f"losses ({', '.join(f'{x:.4f}' for x in curves['yours'])})")


def _timed(report) -> None:
    if not env.HAS_CUDA or env.TRITON_INTERPRET:
        report.line("the step's time with your kernel: measured only on a GPU")
        return
    import dataclasses

    from course_utils import timing
    from kernels.model import COURSE, EAGER, GPT2_SMALL, Providers, Trainer, Transformer, batch

    config = dataclasses.replace(GPT2_SMALL, n_layers=2)
    times = {}
    for name, providers in (("eager", EAGER), ("yours", Providers(norm=PROVIDER)),
                            ("course", Providers(norm=COURSE.norm))):
        model = Transformer(config, seed=0).cuda()
        trainer = Trainer(model, "bf16-autocast", lr=6e-4)
        model.use(providers, batch=4, seq=1024, dtype=torch.bfloat16, norm_dtype=torch.float32)
        tokens, targets = batch(config.vocab, 4, 1024, 0, device="cuda")
        times[name] = timing.benchmark(trainer.step, tokens, targets, name=name).median
    report.line(f"a step of a 2-layer GPT-2-small-wide model, S=1024, B=4, bf16 autocast: "
                f"{times['yours']:.2f} ms with your norm, {times['eager']:.2f} ms eager, "
                f"{times['course']:.2f} ms with the course's Triton norm (same run)")


@exercise("model.swap", title="Your RMSNorm backward in the model", stub=SWAP_STUB,
          answers=("rmsnorm_backward",), section="Swap in a kernel of your own", intro="""
Write `rmsnorm_backward` (lesson 10's formula in PyTorch operations, or paste your Triton kernel
and launcher from exercise rmsnorm.backward). The check puts it behind the course's Triton \
forward in
a `torch.autograd.Function`, registers that as the provider `rmsnorm/yours`, compares its
gradients with float64 autograd on awkward shapes
(fp32 and bf16), then swaps it into the model by name (`Providers(norm="yours")`) and compares
the loss and every parameter's gradient with the eager model's, and three training steps'
losses; on a GPU it also times the step with your norm beside eager's and the course's.""")
def check_swap(rmsnorm_backward, report) -> None:
    import kernels

    expect(callable(rmsnorm_backward), f"rmsnorm_backward expected a function, got "
           f"{type(rmsnorm_backward).__name__}", "keep def rmsnorm_backward(dy, x, weight, rstd)")
    kernels.unregister("rmsnorm", PROVIDER, missing_ok=True)  # (a check stopped half-way)
    kernel = kernels.register("rmsnorm", PROVIDER, fn=differentiable(rmsnorm_backward),
                              dtypes=(torch.float32, torch.float16, torch.bfloat16),
                              needs=("triton",), description="your backward, the course's "
                              "Triton forward")
    try:
        report.line(_op_level(kernel))
        _model_level(report)
        _timed(report)
    finally:
        kernels.unregister(kernel)


PREDICT_STUB = '''
def attention_share(d_model, n_layers, seq, vocab):
    """The share (0 to 1) of one forward's matmul FLOPs that attention's two S × S matmuls take
    (Q Kᵀ and P V, over every head: the eager attention computes them whole, causal or not), in
    the model of lesson 12: per layer the projections q, k, v (d → 3d) and out (d → d), the MLP
    (d → 4d → d); after the layers the head (d → vocab). A matmul of (m × k) by (k × n) is
    2·m·k·n FLOPs. Batch size cancels."""
    ...
'''


def _counted_share(d_model: int, n_heads: int, n_layers: int, seq: int, vocab: int) -> float:
    """The share measured: FLOPs counted by torch.utils.flop_counter on one forward of the
    eager model (attention's are the batched matmuls of (B, H, S, ·) operands)."""
    from torch.utils.flop_counter import FlopCounterMode

    from kernels.model import ModelConfig, Transformer

    config = ModelConfig(vocab=vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                         max_seq=seq)
    model = Transformer(config)
    tokens = torch.zeros(1, seq, dtype=torch.long)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens)
    counts = counter.get_flop_counts()["Global"]
    total = sum(counts.values())
    batched = sum(v for op, v in counts.items() if "bmm" in str(op))
    return batched / total


def _recorded_time_share() -> str:
    from kernels.model import bench

    try:
        environment, records = bench.recorded()
    except FileNotFoundError as missing:
        return f"(FLOPs are not time: {missing})"
    lines = []
    for seq in sorted(bench.step_times(records)):
        part = bench.parts(records, "eager", seq)
        total = sum(v for k, v in part.items() if k != "launch gaps")
        if total:
            lines.append(f"S={seq}: attention takes {part.get('attention', 0) / total:.0%} of the "
                         "eager step's kernel time")
    return ("FLOPs are not time; recorded on " + environment + ": " + "; ".join(lines)
            + " (the S × S scores and probabilities written and read back cost more than "
            "their FLOPs)") if lines else "(no recorded eager profile yet)"


@exercise("model.predict", title="Predict attention's share before profiling", stub=PREDICT_STUB,
          answers=("attention_share",), section="Predict a layer's share", intro="""
Before reading a profile, predict. Write `attention_share(d_model, n_layers, seq, vocab)`: the
share of one forward's matmul FLOPs that attention's two S × S matmuls take in this model. The
check counts the FLOPs of a real forward of the eager model with `torch.utils.flop_counter` at
random sizes (your formula must be within 2% of each), then sets your prediction for GPT-2 small
beside the share of the *time* the recorded GPU profile gives attention.""")
def check_predict(attention_share, report) -> None:
    rng = random.Random()
    sizes = [(64, 2, 2, 128, 50), (32, 4, 1, 16, 1000)]
    for _ in range(3):
        heads = rng.choice((1, 2, 4))
        sizes.append((16 * heads * rng.randint(1, 3), heads, rng.randint(1, 3),
                      rng.choice((8, 24, 64, 96)), rng.randint(10, 600)))
    for d, heads, layers, seq, vocab in sizes:
        got = attention_share(d, layers, seq, vocab)
        expect(isinstance(got, (int, float)) and not isinstance(got, bool),
               f"attention_share returned {type(got).__name__}, expected a number",
               "return the share as a float between 0 and 1")
        measured = _counted_share(d, heads, layers, seq, vocab)
        expect(abs(got - measured) <= 0.02 * measured, f"d_model={d}, n_layers={layers}, "
               f"seq={seq}, vocab={vocab}: you predict {got:.4f}, the counted FLOPs give "
               f"{measured:.4f}", "per token and layer: projections 2·d·3d + 2·d·d, MLP 2·2·d·4d, "
               "attention 2·S·d (Q Kᵀ) + 2·S·d (P V); the head 2·d·vocab once")
    report.line(f"within 2% of the FLOPs counted on {len(sizes)} models (random sizes)")
    gpt2 = {s: attention_share(768, 12, s, 50304) for s in (1024, 4096)}
    report.line("GPT-2 small, by your formula: attention is "
                + ", ".join(f"{v:.0%} of the FLOPs at S={s}" for s, v in gpt2.items()))
    report.line(_recorded_time_share())
