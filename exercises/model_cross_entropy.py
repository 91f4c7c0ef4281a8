"""Exercise model.cross_entropy of lesson 12, its closing assignment: a fused cross-entropy in
Triton, forward and backward, from an empty file.

The check runs the student's ``cross_entropy`` in Triton's interpreter on a CPU (compiled on a
GPU), forward and then ``torch.autograd.grad`` with a ``grad_out`` that is not 1, and compares
the loss and the logits' gradient with float64 autograd of ``F.cross_entropy``
(:mod:`exercises.model_cross_entropy_problems` holds the problems: V on every side of the
answer's own chunk size, found by watching its ``tl.arange``, N = 1, logits near -200, of
several hundred and of 1e-4, -inf columns and a first chunk all -inf, the target's logit the
largest and the smallest, targets 0 and V - 1, some, all but one and all rows ignored,
ignore_index a class id, a transposed view and a slice whose row stride passes V, float32,
bfloat16 and float16). A wrong value is read against the usual mistakes (a sum for the mean,
ignored rows counted, grad_out or n_valid or the one-hot left out) and the verdict names the one
it matches. Then: every lane's address inside the tensors (interpreter), no atomics, the same
bits on a second run, a chunk of at most 4096 columns, and no (N, V) tensor made besides the
gradient. On a GPU it prints one line: time and memory beside the course's kernel and
``F.cross_entropy``. ``exercises/solutions/cross_entropy.py`` keeps the wrong answers.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils import env
from exercises import Mismatch, compare, exercise, expect, expect_triton_kernel, triton_checks
from exercises.model_cross_entropy_problems import (
    BLOCK_PROBE,
    IGNORE,
    MAX_BLOCK,
    Case,
    exact,
    mistakes,
    problems,
    tolerance,
    watched,
    widest_arange,
)

SECTION = "Write the fused cross-entropy"

STUB = '''
import torch
import triton
import triton.language as tl


def cross_entropy(logits, targets, ignore_index=-100):
    """The mean cross-entropy of logits (N, V) against targets (N,), int64 class indices: the
    mean over the rows whose target is not ignore_index of logsumexp(row) - row[target].
    Returns a float32 0-d tensor, differentiable with respect to logits (your autograd
    Function), computed by your Triton kernels."""
    ...
'''

HINT = ("per row, walk the columns in chunks: m = max(m, x), s = s · exp(m_old − m_new) + "
        "Σ exp(x − m_new), starting from m = −inf, s = 0 (subtract 0 where m is still −inf); "
        "lse = m + log s; loss_row = lse − x[target], 0 for an ignored row; the mean divides "
        "by the rows that count. Gradient: (exp(x − lse) − one_hot) · grad_out / n_valid, 0 in "
        "an ignored row")
KIND_HINTS = {
    "negative": "a running maximum started at 0 (or none) sums exp(−200)s, which are 0 in "
                "float32: log 0 = −inf. Start it at −inf and subtract it before exp",
    "large": "exp of a logit of several hundred overflows float32 (exp(89) is already inf): "
             "subtract the running maximum before exp",
    "neginf": "row 0's first chunk is all −inf: while the running maximum is −inf, "
              "exp(x − m) is exp(−inf − (−inf)) = NaN. Subtract 0 until a finite logit is "
              "seen (tl.where(m > -float('inf'), m, 0.0))",
    "tiny": "with logits of 1e-4 the loss is log V: check the padding lanes of the last chunk "
            "(load them with other=-inf, so exp adds 0)",
}
LAYOUT_HINT = ("index with both strides, logits.stride(0) and logits.stride(1): a transposed "
               "view's columns are logits.stride(1) elements apart, a slice's rows "
               "logits.stride(0)")


def _hint(case: Case) -> str:
    if case.kind in KIND_HINTS:
        return KIND_HINTS[case.kind]
    if case.layout != "contiguous":
        return LAYOUT_HINT
    return HINT


def _named(got: torch.Tensor, candidates: dict, which: int, tol: float, scale: float) -> str:
    """" (it matches <mistake>)" when ``got`` is close to the ``which`` part (0: loss, 1: the
    gradient) of one of the float64 wrong answers, else ""."""
    g = got.detach().double().cpu()
    for mistake, values in candidates.items():
        want = values[which]
        if want is not None and want.shape == g.shape and bool(
                torch.isclose(g, want, atol=4 * tol * scale, rtol=4 * tol).all()):
            return f" (it matches {mistake})"
    return ""


def run_answer(cross_entropy, logits, targets, ignore_index, grad_out, case: Case):
    """(loss, gradient) of the answer: forward, then torch.autograd.grad with ``grad_out``."""
    leaf = logits.detach().requires_grad_()
    loss = triton_checks.call_answer(
        lambda x, t: cross_entropy(x, t, ignore_index=ignore_index), leaf, targets)
    expect(isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.dtype == torch.float32,
           f"{case.label}: cross_entropy returned "
           + (f"a {loss.dtype} tensor of shape {tuple(loss.shape)}"
              if isinstance(loss, torch.Tensor) else f"a {type(loss).__name__}")
           + "; expected a float32 0-d tensor (the mean loss)",
           "accumulate in float32 and return the mean as a 0-d float32 tensor, whatever the "
           "logits' dtype (row_loss.sum() / n_valid)")
    expect(loss.requires_grad, f"{case.label}: the loss does not require grad: it is not "
           "connected to the logits by autograd", "return YourFunction.apply(logits, "
           "targets, ignore_index), a torch.autograd.Function whose backward runs your "
           "gradient kernel")
    grad_tensor = torch.tensor(grad_out, device=loss.device)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        try:
            (grad,) = torch.autograd.grad(loss, leaf, grad_tensor)
        except NotImplementedError:
            raise
        except Exception as err:
            raise Mismatch(f"{case.label}: your backward raised {type(err).__name__}: "
                           f"{str(err).strip()[:300]}", HINT) from err
    return loss, grad


def checked_run(cross_entropy, logits, targets, ignore_index, grad_out, case: Case):
    """:func:`run_answer`, every lane's address checked before it is used in the interpreter
    (a store outside the gradient would corrupt this process's memory, not only a value)."""
    def run():
        return run_answer(cross_entropy, logits, targets, ignore_index, grad_out, case)

    if not env.TRITON_INTERPRET:
        return run()
    done = []
    triton_checks.expect_in_bounds(lambda: done.append(run()), f"on {case.label}")
    return done[0]


def check_case(cross_entropy, case: Case, block: int, grad_out: float) -> None:
    """The loss and the gradient of ``case`` against float64, every address checked in the
    interpreter; a wrong value's verdict names the mistake it matches."""
    logits, targets = case.tensors(env.DEFAULT_DEVICE, block)
    before = logits.detach().clone()
    loss, grad = checked_run(cross_entropy, logits, targets, case.ignore_index, grad_out, case)
    expect(torch.equal(logits.isnan(), before.isnan()) and bool(
        (logits.nan_to_num() == before.nan_to_num()).all()), f"{case.label}: your code "
        "changed the logits: the gradient must be written beside them",
        "allocate the gradient (torch.empty_like(logits)) and store into it")
    want_loss, want_grad = exact(logits, targets, case.ignore_index, grad_out)
    finite = logits.detach().double().cpu()
    largest = float(finite[finite.isfinite()].abs().max()) if finite.isfinite().any() else 0.0
    tol = tolerance(case.dtype, largest)
    candidates = mistakes(logits, targets, case.ignore_index, grad_out)
    if case.ignored == "all":
        expect(bool(loss.isnan()), f"{case.label}: the loss is {float(loss.detach()):.6g}; "
               "with every row ignored the statement asks for NaN, PyTorch's mean over no rows",
               "divide the sum of the row losses (0) by the number of rows that count (0)")
    else:
        got = float(loss.detach())
        wrong = not math.isfinite(got) or abs(got - float(want_loss)) > tol * (
            1 + abs(float(want_loss)))
        if wrong:
            raise Mismatch(f"{case.label}: the loss is {got:.8g}, expected "
                           f"{float(want_loss):.8g}"
                           + _named(loss, candidates, 0, tol, 1 + abs(float(want_loss))),
                           _hint(case))
    n_valid = max(int((targets != case.ignore_index).sum()), 1)
    scale = abs(grad_out) / n_valid
    if grad.isnan().any():
        at = tuple(int(i) for i in torch.nonzero(grad.isnan())[0])
        raise Mismatch(f"{case.label}: the gradient holds NaN at {at}"
                       + (" (every row is ignored: the gradient is 0, never NaN)"
                          if case.ignored == "all" else ""),
                       "write 0 in an ignored row with tl.where (0 · inf is NaN, and n_valid "
                       "may be 0)" if case.ignored == "all" else _hint(case))
    close = torch.isclose(grad.detach().double().cpu(), want_grad, atol=tol * scale, rtol=tol)
    if not bool(close.all()):
        said = _named(grad, candidates, 1, tol, scale)
        try:
            compare(grad, want_grad.to(case.dtype), what=f"the gradient, {case.label}",
                    atol=tol * scale, rtol=tol, hint=_hint(case))
        except Mismatch as wrong:
            raise Mismatch(wrong.message + said, wrong.hint) from None
        raise Mismatch(f"the gradient, {case.label}: off by more than float32's error" + said,
                       _hint(case))


def _kernels(cross_entropy) -> list:
    """The @triton.jit kernels of the answer's cell (its module's names)."""
    from exercises import triton_launchers

    kinds = tuple(triton_launchers())
    return [v for v in getattr(cross_entropy, "__globals__", {}).values()
            if isinstance(v, kinds)]


def _block(cross_entropy, grad_out: float) -> int:
    """The answer's chunk of a row, read from its widest tl.arange on a probe problem (checked
    like the others); the statement's largest where this machine runs compiled Triton."""
    n, v = BLOCK_PROBE
    case = Case(n, v, "several chunks and a ragged tail")
    if not env.TRITON_INTERPRET:
        check_case(cross_entropy, case, MAX_BLOCK, grad_out)
        return 1024
    with widest_arange() as seen:
        check_case(cross_entropy, case, MAX_BLOCK, grad_out)
    widest = seen["widest"]
    expect(widest <= MAX_BLOCK, f"at V = {v}, your kernel takes tl.arange of {widest} lanes: "
           f"a whole row at once. A GPT-2 row of 50257 columns would be 65536 lanes, far "
           "more than the registers hold (it spills to local memory)", f"walk the row in "
           f"chunks of BLOCK <= {MAX_BLOCK} columns: for start in range(0, n_cols, BLOCK)")
    return widest or 1024


def _memory(cross_entropy, grad_out: float) -> str:
    """No tensor of N·V elements made outside the Triton launches but the gradient, in the
    logits' dtype, for contiguous logits and for a transposed view (no .contiguous() copy);
    the report line."""
    n, v = 16, 700
    for layout in ("contiguous", "transposed"):
        case = Case(n, v, f"the memory watch, {layout}", dtype=torch.bfloat16, layout=layout)
        logits, targets = case.tensors(env.DEFAULT_DEVICE)
        with watched(n * v) as watch:
            checked_run(cross_entropy, logits, targets, IGNORE, grad_out, case)
        wide = [m for m in watch.made if m[2] != logits.dtype]
        if wide or len(watch.made) > 1:
            made = "; ".join(f"{op} {shape} {str(dtype).removeprefix('torch.')}"
                             for op, shape, dtype in watch.made[:4])
            gb = sum(8192 * 50257 * dtype.itemsize for _, _, dtype in watch.made) / 1e9
            raise Mismatch(
                f"N={n}, V={v} bfloat16 ({layout}): your code made {len(watch.made)} tensors "
                f"of N·V elements ({made}): besides the gradient (one, in the logits' dtype) "
                f"that is {'a float32 one' if wide else 'one more'}; at GPT-2's 8192 x 50257 "
                f"they would take {gb:.1f} GB, where the fused kernel makes one of 0.8 GB",
                "compute exp, the softmax and the one-hot inside your kernels, in "
                "registers, chunk by chunk; allocate only the gradient, in the logits' dtype "
                "(torch.empty_like(logits)), and O(N) floats per row; read a view through its "
                "strides (no .contiguous()), and scale a gradient in place (grad.mul_) or in "
                "the kernel")
    return (f"no (N, V) tensor besides the gradient at N={n}, V={v} bf16, contiguous and "
            "transposed (every tensor your code made, watched)")


def _speed(cross_entropy) -> str:
    """One printed line on a GPU: forward + backward and the memory above the logits of yours,
    the course's registered kernel and F.cross_entropy on the bf16 logits, GPT-2 sized."""
    import torch.nn.functional as F

    from course_utils import timing
    from kernels.registry import get_kernel

    n, v = 8192, 50257
    logits = torch.randn(n, v, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, v, (n,), device="cuda")
    providers = {"yours": cross_entropy,
                 "the course's": get_kernel("cross_entropy", "triton"),
                 "F.cross_entropy": F.cross_entropy}  # (torch.compile's: the bench, 30 s more)
    said = []
    for name, fn in providers.items():
        def step(fn=fn):
            (grad,) = torch.autograd.grad(fn(logits, targets, ignore_index=IGNORE), logits)
            return grad
        try:
            step()
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**30
            ms = timing.benchmark(step, name=name, min_time_s=0.1).median
            said.append(f"{name} {timing.format_ms(ms)}, {peak:.2f} GiB")
        except Exception as err:  # a peer that does not run here: say so, never fail
            said.append(f"{name} did not run ({type(err).__name__})")
    return (f"forward + backward at N={n}, V={v} bf16 on {torch.cuda.get_device_name()} "
            f"(time, memory above the logits): " + "; ".join(said))


@exercise("model.cross_entropy", title="A fused cross-entropy in Triton, from an empty file",
          stub=STUB, answers=("cross_entropy",), section=SECTION, intro="""
Write `cross_entropy(logits, targets, ignore_index=-100)`: the mean loss, differentiable, both
passes your own Triton kernels (launched from a `torch.autograd.Function` of yours).

- **Inputs**: logits `(N, V)`, N ≥ 1 and V ≥ 1, float32, bfloat16 or float16, any strides (a
  transposed view, a slice whose rows are further apart than V); targets `(N,)` int64, each in
  `[0, V)` or equal to `ignore_index` (any int, -100 by default, possibly a class id).
- **Forward**: per row, `loss_row = logsumexp(row) − row[target]`, computed in float32; return
  the mean over the `n_valid` rows whose target is not `ignore_index` (an ignored row counts in
  neither the sum nor `n_valid`), a float32 0-d tensor. When every row is ignored return NaN,
  as PyTorch does (0 / 0), with a zero gradient. Read each row in chunks of `BLOCK` columns, a
  power of two of at most 4096, with the online log-sum-exp: running maximum m from −∞, running
  sum rescaled by `exp(m_old − m_new)`. Logits may be near −200, of several hundred, or −∞ in
  some columns (never at the target; a whole chunk may be −∞).
- **Backward**: `d loss / d logits = (softmax(row) − one_hot(target)) · grad_out / n_valid`, 0 in
  an ignored row, in the logits' dtype; `grad_out` is any float, not only 1.
- **Memory**: besides the logits you may make the gradient `(N, V)` in the logits' dtype (in
  the forward or the backward, beside the logits: leave them unchanged) and a few floats per
  row (the log-sum-exp, the row losses); no other tensor of N·V elements (no float32 copy of
  the logits, no softmax). **Same bits** on a second run: no atomics.

The check runs it in Triton's interpreter (compiled on a GPU) against float64 autograd, with a
`grad_out` ≠ 1, on about thirty problems: V one below, at, one above and three times your
chunk, N = 1, V = 1, logits near −200, of several hundred and of 1e-4, −∞ columns, the target's
logit the largest and the smallest, targets 0 and V − 1, some, all but one and all rows
ignored, a transposed view, a strided slice, three dtypes; every address checked, every
(N, V) tensor your code makes watched. On a GPU it times yours at GPT-2's 8192 × 50257 bf16.""")
def check_cross_entropy(cross_entropy, report) -> None:
    expect(callable(cross_entropy) and not isinstance(cross_entropy, type),
           f"cross_entropy is a {type(cross_entropy).__name__}, not a function",
           "keep the stub's def cross_entropy(logits, targets, ignore_index=-100)")
    for kernel in _kernels(cross_entropy):
        expect("atomic" not in triton_checks.kernel_source(kernel), f"{kernel.__name__} uses "
               "an atomic: programs adding into one address in the order they finish give a "
               "loss whose last bits change from run to run", "store each row's loss in its "
               "own element (loss_ptr + row) and sum them outside, in a fixed order")
    grad_out = float(0.25 + 1.5 * torch.rand(()))  # never 1: a backward must multiply it in
    probe = BLOCK_PROBE
    logits, targets = Case(*probe, "probe").tensors(env.DEFAULT_DEVICE)
    def launches_triton():
        expect_triton_kernel(lambda x, t: cross_entropy(x, t), (logits, targets),
                             what="cross_entropy")

    if env.TRITON_INTERPRET:  # (every run of your code has its addresses checked first)
        triton_checks.expect_in_bounds(launches_triton, "on the probe problem")
    else:
        launches_triton()
    block = _block(cross_entropy, grad_out)
    memory = _memory(cross_entropy, grad_out)  # (before the values: it is the lesson's point)
    cases = problems(block)
    for case in cases:
        check_case(cross_entropy, case, block, grad_out)
    case = Case(3, block + 9, "a second run", ignored="some")
    logits, targets = case.tensors(env.DEFAULT_DEVICE, block)
    first, second = (checked_run(cross_entropy, logits, targets, IGNORE, grad_out, case)
                     for _ in range(2))
    expect(all(torch.equal(a, b) for a, b in zip(first, second, strict=True)),
           f"{case.label}: the loss or the gradient changed between two runs on the same "
           "input", "no atomics, no order that depends on which program finishes first")
    how = "Triton's interpreter" if env.TRITON_INTERPRET else "compiled Triton"
    report.line(f"the loss and the gradient (grad_out = {grad_out:.3f}) right against float64 "
                f"on {len(cases) + 1} problems ({how}; your chunk: {block} columns)")
    report.line(memory + "; the same bits on a second run")
    report.line("every load and store inside the tensors (each lane checked in Triton's "
                "interpreter)" if env.TRITON_INTERPRET else
                "addresses not checked lane by lane here (compiled Triton): the logits sit "
                "between NaN fences")
    if env.HAS_CUDA:
        report.line(_speed(cross_entropy))
    else:
        report.line("speed and memory at GPT-2's 8192 x 50257: measured only on a GPU")
