"""The problems of exercise model.cross_entropy (:mod:`exercises.model_cross_entropy`): each
:class:`Case` with its inputs, the float64 reference and its gradient, the mistakes a wrong
value is read against, and two watchers: every (N, V)-sized tensor an answer makes outside its
Triton launches, and the widest ``tl.arange`` its kernels take (the chunk size).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from unittest import mock

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from exercises import triton_launchers
from exercises.triton_checks import fenced, nan_fenced

IGNORE = -100  # the statement's default ignore_index
MAX_BLOCK = 4096  # the statement's largest chunk of a row
BLOCK_PROBE = (1, 5003)  # (N, V) of the problem that finds the answer's chunk size


@dataclass(frozen=True)
class Case:
    n: int
    v: int
    what: str
    dtype: torch.dtype = torch.float32
    # "randn"; "negative": every logit near -200; "large": logits of several hundred; "tiny":
    # of 1e-4; "neginf": -inf in some columns (the first chunk of row 0 all of it), never the
    # target's; "target max" / "target min": the target's logit the row's largest / smallest
    kind: str = "randn"
    ignored: str = "none"  # "none", "some", "all but one", "all"
    layout: str = "contiguous"  # "contiguous", "transposed" (a .t() view), "sliced" (stride > V)
    edges: bool = False  # targets 0 and V - 1 on alternate rows
    ignore_index: int = IGNORE

    @property
    def label(self) -> str:
        extra = [self.layout] if self.layout != "contiguous" else []
        if self.ignored != "none":
            extra.append(f"{self.ignored} rows ignored")
        if self.ignore_index != IGNORE:
            extra.append(f"ignore_index={self.ignore_index}")
        return (f"{self.what} (N={self.n}, V={self.v}, {str(self.dtype).removeprefix('torch.')}"
                + "".join(f", {e}" for e in extra) + ")")

    def tensors(self, device: str = "cpu", block: int = 1024):
        """Fresh (logits, targets) of the problem, the logits inside NaN fences (a read just
        past them reads NaN, and on a CPU lands in no tensor); ``block``: the answer's chunk
        size, which the "neginf" rows fill with -inf."""
        n, v = self.n, self.v
        x = torch.randn(n, v)
        if self.kind == "negative":
            x = x - 200.0
        elif self.kind == "large":
            x = 300.0 * x
        elif self.kind == "tiny":
            x = 1e-4 * x
        targets = torch.randint(0, v, (n,))
        if self.edges:
            targets[0::2], targets[1::2] = 0, v - 1
        if self.kind == "target max":
            targets = x.argmax(1)
            x[torch.arange(n), targets] += 3.0
        elif self.kind == "target min":
            targets = x.argmin(1)
            x[torch.arange(n), targets] -= 3.0
        elif self.kind == "neginf":
            x[torch.rand(n, v) < 0.2] = float("-inf")
            x[0, :min(block, v - 1)] = float("-inf")  # a whole first chunk of -inf
            targets[0] = v - 1
            x[torch.arange(n), targets] = torch.randn(n)  # never the target's
        targets[self._ignored_rows()] = self.ignore_index
        if self.ignore_index >= 0:  # a real class id as ignore_index: no other row targets it
            others = (targets == self.ignore_index) & ~self._ignored_rows()
            targets[others] = (self.ignore_index + 1) % v
        x = x.to(self.dtype)
        if self.layout == "transposed":
            logits = fenced(n, v, dtype=self.dtype, transposed=True)
        elif self.layout == "sliced":  # row stride v + 13: each row's end has neighbours
            logits = nan_fenced(n * (v + 13), self.dtype, "cpu").view(n, v + 13)[:, 5:5 + v]
        else:
            logits = fenced(n, v, dtype=self.dtype)
        logits.copy_(x)
        if device != "cpu":  # the same layout there, NaN-fenced where contiguous
            from exercises.triton_checks import fenced_copy

            if self.layout == "contiguous":
                logits = fenced_copy(logits.to(device))
            elif self.layout == "transposed":
                logits = logits.t().contiguous().to(device).t()
            else:
                wide = torch.full((n, v + 13), float("nan"), dtype=self.dtype, device=device)
                logits = wide[:, 5:5 + v].copy_(logits)
        return logits, targets.to(device)

    def _ignored_rows(self) -> torch.Tensor:
        rows = torch.zeros(self.n, dtype=torch.bool)
        if self.ignored == "some":
            rows[1::3] = True
        elif self.ignored == "all but one":
            rows[:] = True
            rows[self.n // 2] = False
        elif self.ignored == "all":
            rows[:] = True
        return rows


def problems(block: int) -> list[Case]:
    """The problems, with V on every side of the answer's chunk size ``block``."""
    bf16, f16 = torch.bfloat16, torch.float16
    sides = sorted({v for v in (block - 1, block, block + 1, 3 * block + 7) if v >= 1})
    return [
        Case(3, 1, "one class (V = 1)"),
        Case(1, 100, "one row (N = 1)"),
        *[Case(2, v, f"V = {v} against your chunk of {block}", edges=True) for v in sides],
        Case(3, 300, "logits of several hundred", kind="large"),
        Case(3, 300, "every logit near -200", kind="negative"),
        Case(2, block + 50, "every logit near -200, two chunks", kind="negative"),
        Case(3, 2 * block + 3, "-inf logits (row 0's first chunk all -inf)", kind="neginf"),
        Case(2, 257, "the target's logit the row's largest", kind="target max"),
        Case(2, 257, "the target's logit the row's smallest", kind="target min"),
        Case(2, 200, "logits of 1e-4 (the loss is log V)", kind="tiny"),
        Case(6, 300, "some rows ignored", ignored="some"),
        Case(4, 300, "all rows but one ignored", ignored="all but one"),
        Case(2, 300, "every row ignored", ignored="all"),
        Case(6, 300, "ignore_index a class id", ignored="some", ignore_index=3),
        Case(4, 300, "a transposed view", layout="transposed", ignored="some"),
        Case(3, block + 9, "a slice, row stride past V", layout="sliced", edges=True),
        *[Case(3, block + 9, "ragged tail", dtype=dt, ignored="some") for dt in (bf16, f16)],
        *[Case(2, 300, "logits of several hundred", dtype=dt, kind="large") for dt in (bf16, f16)],
        Case(2, 300, "every logit near -200", dtype=bf16, kind="negative"),
        Case(3, 300, "a transposed view", dtype=f16, layout="transposed"),
    ]


# ---- float64 -------------------------------------------------------------------------------


def exact(logits, targets, ignore_index: int, grad_out: float):
    """(loss, gradient) by float64 autograd of F.cross_entropy; every row ignored: loss NaN
    (PyTorch's mean over no rows) and a zero gradient."""
    x = logits.detach().double().cpu().requires_grad_()
    loss = F.cross_entropy(x, targets.cpu(), ignore_index=ignore_index)
    loss.backward(torch.tensor(grad_out, dtype=torch.float64))
    return loss.detach(), torch.nan_to_num(x.grad, nan=0.0)


def tolerance(dtype: torch.dtype, largest: float) -> float:
    """Error allowed relative to the gradient's scale (and of the loss, absolute per unit):
    a rounding to the dtype twice, and float32's error on logits as large as ``largest``
    (an exponent read from a float32 logit of 900 is off by about 1e-4 of it)."""
    f32 = torch.finfo(torch.float32).eps
    return max(2 * torch.finfo(dtype).eps, 4e-6, 8 * f32 * largest)


def mistakes(logits, targets, ignore_index: int, grad_out: float) -> dict[str, tuple]:
    """The (loss, gradient) of the usual wrong answers, in float64, by what they get wrong."""
    x = logits.detach().double().cpu()
    t = targets.cpu()
    counted = t != ignore_index
    n, n_valid = x.shape[0], max(int(counted.sum()), 1)
    rows = torch.where(counted, x.logsumexp(1) - x.gather(1, t.clamp(0).view(-1, 1))[:, 0], 0.0)
    softmax = torch.where(counted[:, None], x.softmax(1), 0.0)
    one_hot = torch.zeros_like(x)
    one_hot[counted, t[counted]] = 1.0
    grad = (softmax - one_hot) * grad_out / n_valid
    all_rows = x.logsumexp(1) - x.gather(1, t.clamp(0).view(-1, 1))[:, 0]
    return {
        "the sum over the rows, not their mean": (rows.sum(), grad * n_valid),
        "the mean over all N rows (ignored ones counted in the divisor)":
            (rows.sum() / n, grad * n_valid / n),
        "ignored rows counted in the loss": (all_rows.mean(), None),
        "the gradient of grad_out = 1 (grad_out not multiplied in)": (None, grad / grad_out),
        "the gradient not divided by the number of rows that count": (None, grad * n_valid),
        "the gradient without the one-hot of the target subtracted":
            (None, grad + one_hot * grad_out / n_valid),
        "a gradient in ignored rows (they must get 0)":
            (None, (x.softmax(1) - one_hot) * grad_out / n_valid),
    }


# ---- watching what the answer makes -------------------------------------------------------


class Watch(TorchDispatchMode):
    """Every tensor of at least ``elements`` elements an op outside a Triton launch makes: (op,
    shape, dtype), in order. (The interpreter moves a launch's arguments with ATen ops of its
    own: not the answer's.)"""

    def __init__(self, elements: int):
        super().__init__()
        self.elements = elements
        self.made: list[tuple[str, tuple, torch.dtype]] = []
        self.launching = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.launching:
            # memory already there (a view, an in-place op, out=) is no new tensor
            there = {_storage(t) for t in [*args, *(kwargs or {}).values()]
                     if isinstance(t, torch.Tensor)}
            for t in out if isinstance(out, tuple | list) else (out,):
                if isinstance(t, torch.Tensor) and t.numel() >= self.elements and \
                        _storage(t) not in there:
                    self.made.append((str(func), tuple(t.shape), t.dtype))
        return out


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # (a tensor with no storage of its own)
        return id(t)


@contextlib.contextmanager
def watched(elements: int):
    """:class:`Watch` active inside the block, paused during each Triton launch."""
    watch = Watch(elements)

    def pausing(original):
        def run(self, *args, **kwargs):
            watch.launching += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                watch.launching -= 1

        return run

    with contextlib.ExitStack() as stack:
        for cls in triton_launchers():
            stack.enter_context(mock.patch.object(cls, "run", pausing(cls.__dict__["run"])))
        stack.enter_context(watch)
        yield watch


@contextlib.contextmanager
def widest_arange():
    """Under the interpreter: ``{"widest": n}``, the longest ``tl.arange`` the kernels run
    inside the block took (the chunk of a row a program holds at once)."""
    from triton.runtime import interpreter

    seen = {"widest": 0}
    make_range = interpreter.InterpreterBuilder.create_make_range

    def recording(self, ret_ty, start, stop):
        seen["widest"] = max(seen["widest"], int(stop) - int(start))
        return make_range(self, ret_ty, start, stop)

    with mock.patch.object(interpreter.InterpreterBuilder, "create_make_range", recording):
        yield seen
