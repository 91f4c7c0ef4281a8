"""Exercises of lesson 12: a kernel of your own in the model, and a layer's share predicted.

* ``model.swap``: the student's RMSNorm backward (lesson 10's formula, in PyTorch operations or
  their own Triton kernel from rmsnorm.backward) behind the course's Triton forward, registered as
  the provider ``rmsnorm/yours`` and swapped into the model by name. The check compares the op's
  gradients with float64 autograd on awkward shapes (fp32 and bf16), asks for the same bits on a
  second run (in the interpreter, with the programs run in reverse order: an atomic dweight
  changes), holds dweight over 1152 bf16 rows whose sums nearly cancel to one bf16 rounding
  (a sum kept in bf16 across chunks fails), then compares the whole model's loss and every
  parameter's gradient with eager's, and three training steps' losses; on a GPU it times the
  step with the student's norm beside eager's and the course's.
* ``model.predict``: the share of the forward's matmul FLOPs that attention's two S × S matmuls
  take, as a formula of the model's sizes, checked against FLOPs counted on the real model
  (``torch.utils.flop_counter``) at random sizes; then set beside the share of the *time* the
  recorded GPU profile gives attention (FLOPs are not time: the S × S tensors' traffic is).
"""

from __future__ import annotations

import contextlib
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


# x's and weight's dtypes for _returned: both bf16 (the model's bf16 run), and bf16 x with a float32
# weight, where "weight's dtype" is not x's
RETURN_DTYPES = ((torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32))


def _returned(rmsnorm_backward) -> str:
    """dx with x's shape and dtype, dweight with weight's, as the statement asks, from a direct
    call; the report line. Behind the op's ``torch.autograd.Function`` the check of the gradients
    cannot see it: autograd casts a gradient of another dtype to its input's silently (an extra
    pass over dx, in float32 twice the bytes of bf16, on every step)."""
    device = env.DEFAULT_DEVICE
    gen = torch.Generator().manual_seed(3)
    rows, cols = 7, 33
    for x_dtype, w_dtype in RETURN_DTYPES:
        x = torch.randn(rows, cols, generator=gen).to(device, x_dtype)
        weight = (1 + 0.5 * torch.randn(cols, generator=gen)).to(device, w_dtype)
        dy = torch.randn(rows, cols, generator=gen).to(device, x_dtype)
        rstd = torch.rsqrt(x.double().pow(2).mean(1) + EPS).float()
        out = rmsnorm_backward(dy, x, weight, rstd)
        expect(isinstance(out, tuple | list) and len(out) == 2, "rmsnorm_backward expected to "
               f"return (dx, dweight), got {type(out).__name__}", SWAP_HINT)
        given = (f"x {str(x_dtype).removeprefix('torch.')} ({rows}x{cols}), weight "
                 f"{str(w_dtype).removeprefix('torch.')} ({cols})")
        for name, got, arg, want in (("dx", out[0], "x", x), ("dweight", out[1], "weight", weight)):
            expect(isinstance(got, torch.Tensor), f"with {given}: {name} expected a tensor, got "
                   f"{type(got).__name__}", SWAP_HINT)
            expect(got.shape == want.shape, f"with {given}: {name} has shape "
                   f"{tuple(got.shape)}, {arg}'s is {tuple(want.shape)}", "return (dx, dweight) "
                   "in that order, dx like x (rows x cols), dweight like weight (cols)")
            expect(got.dtype == want.dtype, f"with {given}: {name} came back in {got.dtype}; the "
                   f"statement asks for it in {arg}'s dtype, {want.dtype} (behind the "
                   "autograd.Function autograd would cast it silently, an extra pass over it on "
                   "every step)", "compute in float32, then return dx.to(x.dtype), "
                   "dweight.to(weight.dtype)")
    return ("dx in x's dtype and dweight in weight's (bf16 x with a bf16 weight, and with a "
            "float32 one)")


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


# dweight over many rows in bfloat16: the first CANCEL_FIRST rows' dy · x_hat are all positive,
# the rest all negative and 8x larger, so each column's dweight is a small difference of two sums
# of about 650. Summed in float32 and rounded once it is within half a bf16 step of float64's
# (2^-9 of it); a running sum kept in bf16 across chunks of 1024 rows rounds the first sum by
# up to 2 (half a step at 650), ten times that.
CANCEL_ROWS, CANCEL_FIRST, CANCEL_COLS = 1152, 1024, 32


def _cancelling(device: str):
    """(dy, x, weight, rstd) of the many-rows case (fixed seed: the same problem every run)."""
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(CANCEL_ROWS, CANCEL_COLS, generator=gen)
    weight = 1 + 0.5 * torch.randn(CANCEL_COLS, generator=gen)
    dy = torch.randn(CANCEL_ROWS, CANCEL_COLS, generator=gen).abs() * x.sign()
    dy[CANCEL_FIRST:] *= -CANCEL_FIRST / (CANCEL_ROWS - CANCEL_FIRST)
    x, weight, dy = (t.to(device, torch.bfloat16) for t in (x, weight, dy))
    rstd = torch.rsqrt(x.double().pow(2).mean(1) + EPS).float()
    return dy, x, weight, rstd


def _many_rows(rmsnorm_backward) -> str:
    """dweight of :func:`_cancelling` within half a bf16 step of float64's; the report line."""
    dy, x, weight, rstd = _cancelling(env.DEFAULT_DEVICE)
    dx, dweight = rmsnorm_backward(dy, x, weight, rstd)
    what = (f"dweight, {CANCEL_ROWS}x{CANCEL_COLS} bfloat16 whose first {CANCEL_FIRST} rows "
            f"add dy · x_hat > 0 to every column and the last {CANCEL_ROWS - CANCEL_FIRST} "
            "take nearly all of it back (a small difference of two sums of about 650)")
    expect(isinstance(dweight, torch.Tensor) and dweight.dtype == torch.bfloat16,
           f"{what}: expected a bfloat16 tensor, got "
           f"{getattr(dweight, 'dtype', type(dweight).__name__)}", SWAP_HINT)
    _, exact = _exact(x, weight, dy)
    # one rounding of the float32 sum to bf16 moves it by at most 2^-9 of itself; the float32
    # sum's own error is far below 1e-5 of the largest column
    compare(dweight.float(), exact.float(), what=what, rtol=2.0**-8,
            atol=1e-5 * float(exact.abs().max()),
            hint="more than a bf16 rounding away: keep dweight's whole sum over the rows in "
                 "float32 and round it to bf16 once, at the end (a running sum kept in bf16, "
                 "or chunks added in bf16, loses the low bits of each partial sum)")
    return (f"dweight over {CANCEL_ROWS} bf16 rows that nearly cancel: within a bf16 rounding "
            "of float64's (summed in float32)")


@contextlib.contextmanager
def _programs_reversed():
    """In Triton's interpreter, a launch's programs run in the reverse of their order (each
    program id once): the interpreter otherwise runs them one after another from 0, always in
    the same order, where a GPU runs them in whatever order they are scheduled. A sum that
    depends on that order (tl.atomic_add) then changes as it would between two GPU runs."""
    if not env.TRITON_INTERPRET:
        yield
        return
    from unittest import mock

    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.set_grid_idx

    def reverse(self, x, y, z):
        nx, ny, nz = self.grid_dim
        original(self, nx - 1 - x, ny - 1 - y, nz - 1 - z)

    with mock.patch.object(interpreter.InterpreterBuilder, "set_grid_idx", reverse):
        yield


def _reproducible(rmsnorm_backward) -> str:
    """The same input twice gives the same dx and dweight bit for bit (on a GPU two runs; in the
    interpreter the second with the programs in reverse order); the report line."""
    rows, cols = (4096, 512) if env.HAS_CUDA and not env.TRITON_INTERPRET else (64, 48)
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(rows, cols, generator=gen).to(env.DEFAULT_DEVICE)
    weight = (1 + 0.5 * torch.randn(cols, generator=gen)).to(env.DEFAULT_DEVICE)
    dy = torch.randn(rows, cols, generator=gen).to(env.DEFAULT_DEVICE)
    rstd = torch.rsqrt(x.double().pow(2).mean(1) + EPS).float()
    first = rmsnorm_backward(dy, x, weight, rstd)
    with _programs_reversed():
        second = rmsnorm_backward(dy, x, weight, rstd)
    order = (" (the second with the kernel's programs in the reverse order, as a GPU may run "
             "them)") if env.TRITON_INTERPRET else ""
    for name, a, b in zip(("dx", "dweight"), first, second, strict=True):
        expect(torch.equal(a, b), f"{name} of the same {rows}x{cols} float32 input changed "
               f"between two runs{order}: {int((a != b).sum())} of {a.numel()} values differ "
               "in their last bits, so its additions happen in an order that depends on which "
               "program runs first (tl.atomic_add does that)", "give each program its own row "
               "of partial, stored once, and add the rows in the launcher (partial.sum(0)): "
               "no atomics")
    how = "the second with the programs in reverse order, " if env.TRITON_INTERPRET else ""
    return (f"dx and dweight bit-identical on a second run of {rows}x{cols} float32 ({how}"
            "no atomics)")


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
(fp32 and bf16) and on 1152 bf16 rows whose contributions to `dweight` nearly cancel (summed in
float32 and rounded once, it is within a bf16 rounding of the exact value), asks for the same
`dx` and `dweight`, bit for bit, on a second run of the same input (a training run must be
reproducible: no atomics; in the interpreter the second run takes the kernel's programs in the
reverse order, as a GPU may), then swaps it into the model by name (`Providers(norm="yours")`)
and compares the loss and every parameter's gradient with the eager model's, and three training
steps' losses; on a GPU it also times the step with your norm beside eager's and the course's.""")
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
        report.line(_returned(rmsnorm_backward))
        report.line(_op_level(kernel))
        report.line(_reproducible(rmsnorm_backward))
        report.line(_many_rows(rmsnorm_backward))
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
