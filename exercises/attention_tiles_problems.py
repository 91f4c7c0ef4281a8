"""The problems of exercise attention_variants.flash_tiles (:mod:`exercises.attention_tiles`):
each :class:`Case` with its inputs and tolerance, the float64 reference and its gradients, and
the ``TorchDispatchMode`` that watches every tensor an answer makes (no (Sq, Sk) scores, no
row statistics recomputed in the backward, no call of PyTorch's own attention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from exercises import Mismatch, expect
from exercises.attention_tiles_hints import TILED

BLOCK = 64  # the statement's BLOCK_Q and BLOCK_K
LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Case:
    b: int
    h: int
    sq: int
    sk: int
    d: int
    causal: bool = False
    # "randn", "negative" (scores near -200), "large", "bshd" (strides), "every_other" (D's
    # stride 2)
    kind: str = "randn"
    what: str = ""  # what the problem tries, in words
    dtype: torch.dtype = torch.float32
    tiled: bool = False  # no tensor may hold Sq * Sk elements
    do_strided: bool = False  # dO a transposed view

    @property
    def label(self) -> str:
        shape = f"{self.b}x{self.h}x{self.sq}x{self.sk}, D={self.d}"
        return (f"{self.what} ({shape}{', causal' if self.causal else ''}, "
                f"{str(self.dtype).removeprefix('torch.')})")

    def tensors(self, device: str = "cpu"):
        """Fresh q, k, v, dO of the problem."""
        b, h, sq, sk, d = self.b, self.h, self.sq, self.sk, self.d

        def randn(*shape):
            return torch.randn(*shape, device=device)

        if self.kind == "negative":  # q ≈ 5, k ≈ −5 in every dim: s ≈ −8·25 = −200, ± a few
            q = 5.0 + 0.3 * randn(b, h, sq, d)
            k = -(5.0 + 0.3 * randn(b, h, sk, d))
            v = randn(b, h, sk, d)
        elif self.kind == "large":  # s = q·k / √D with a spread of 100
            q, k, v = 10.0 * randn(b, h, sq, d), 10.0 * randn(b, h, sk, d), randn(b, h, sk, d)
        elif self.kind == "bshd":  # (B, S, H, D) storage viewed as (B, H, S, D)
            q, k, v = (randn(b, s, h, d).transpose(1, 2) for s in (sq, sk, sk))
        elif self.kind == "every_other":  # every other element of a row of 2·D: stride 2
            q, k, v = (randn(b, h, s, 2 * d)[..., ::2] for s in (sq, sk, sk))
        else:
            q, k, v = randn(b, h, sq, d), randn(b, h, sk, d), randn(b, h, sk, d)
        do = randn(b, h, d, sq).transpose(-2, -1) if self.do_strided else randn(b, h, sq, d)
        return tuple(t.to(self.dtype) for t in (q, k, v, do))


def problems() -> list[Case]:
    bf16, f16 = torch.bfloat16, torch.float16
    return [
        Case(2, 3, 64, 64, 64, what="one tile exactly"),
        Case(2, 3, 130, 77, 40, what="ragged tiles, more queries than keys"),
        Case(1, 2, 33, 129, 64, what="ragged tiles, more keys than queries (one in the last)"),
        Case(2, 2, 10, 200, 16, what="fewer queries than a tile"),
        Case(2, 3, 1, 100, 64, what="one query"),
        Case(1, 2, 70, 1, 16, what="one key"),
        Case(2, 3, 64, 64, 64, True, what="one tile exactly"),
        Case(1, 2, 200, 200, 16, True, what="ragged tiles"),
        Case(2, 3, 40, 150, 64, True, what="fewer queries than keys"),
        Case(2, 3, 150, 70, 40, True, what="queries past the last key"),
        Case(2, 3, 300, 260, 16, what="tiled: no (Sq, Sk) tensor", tiled=True),
        Case(2, 3, 260, 300, 16, True, what="tiled: no (Sq, Sk) tensor", tiled=True),
        Case(1, 2, 100, 150, 64, kind="negative", what="every score near −200"),
        Case(1, 2, 150, 130, 64, True, kind="large", what="scores of several hundred"),
        Case(2, 3, 70, 0, 16, what="no keys at all (Sk = 0)"),
        Case(1, 2, 50, 0, 16, True, what="no keys at all (Sk = 0)"),
        Case(2, 3, 90, 100, 32, True, what="dO not contiguous (a transposed view)",
             do_strided=True),
        Case(2, 3, 100, 90, 32, True, kind="bshd", what="(B, S, H, D) strides for q, k and v"),
        *[Case(2, 3, 130, 77, 40, what="ragged tiles", dtype=dt) for dt in (bf16, f16)],
        *[Case(1, 2, 200, 150, 64, True, what="ragged tiles", dtype=dt) for dt in (bf16, f16)],
        *[Case(1, 2, 150, 130, 64, True, kind="large", what="scores of several hundred",
               dtype=dt) for dt in (bf16, f16)],
        Case(1, 2, 100, 150, 64, kind="negative", what="every score near −200", dtype=bf16),
    ]


def tolerance(dtype: torch.dtype, largest_score: float = 0.0) -> float:
    """Error allowed relative to the largest value: two roundings to the dtype (its epsilon
    twice), and no less than float32's error over a few hundred terms, which grows with the
    scores' size (an exponent read from a float32 score of 200 is off by about 1e-5 of it)."""
    f32 = torch.finfo(torch.float32).eps
    return max(2 * torch.finfo(dtype).eps, 2e-5, 8 * f32 * largest_score)


def case_tolerance(case: Case, q, k) -> float:
    """:func:`tolerance` of the problem: its dtype and its largest scaled score."""
    if not q.numel() or not k.numel():
        return tolerance(case.dtype)
    s = (q.double().cpu() @ k.double().cpu().mT).abs().max().item() / math.sqrt(case.d)
    return tolerance(case.dtype, s)


# ---- float64 ---------------------------------------------------------------------------------


def seen(sq: int, sk: int, causal: bool, shift: int = 0, keys: int | None = None):
    """(Sq, Sk) booleans, query i sees key j: j <= i + shift when causal; only j < keys when
    keys is given. None: every key."""
    if not causal and keys is None:
        return None
    i = torch.arange(sq)[:, None]
    j = torch.arange(sk)[None, :]
    mask = (j <= i + shift) if causal else torch.ones(sq, sk, dtype=torch.bool)
    return mask if keys is None else mask & (j < keys)


def reference(q, k, v, mask, scale: float | None = None):
    """float64 ``(out, L)`` of softmax(q kᵀ · scale) v, key j hidden from query i where
    ``mask`` is False; a row that sees no key gives out 0 and L = −inf."""
    q, k, v = (t.double() for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.mT * scale
    if mask is not None:
        mask = mask.to(s.device)
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    if mask is not None and not bool(mask.any(-1).all()):  # rows that see nothing: 0
        p = torch.exp(s - lse.nan_to_num(neginf=0.0)[..., None])
    else:
        p = torch.exp(s - lse[..., None])
    return p @ v, lse


def exact_gradients(case: Case, q, k, v, do):
    """float64 autograd of :func:`reference`: {"dq", "dk", "dv"}."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    out, _ = reference(q, k, v, seen(case.sq, case.sk, case.causal))
    out.backward(do.double())
    return {"dq": q.grad, "dk": k.grad, "dv": v.grad}


def close(got: torch.Tensor, want: torch.Tensor, tol: float, rows=None,
           scale: float | None = None) -> bool:
    """got within tol of want, relative to ``scale`` (want's largest by default), on ``rows``
    (an (Sq,) mask) only."""
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    if rows is not None:
        g, w = g[..., rows, :], w[..., rows, :]
    if w.numel() == 0:
        return True
    scale = max(w.abs().max().item(), 1e-30) if scale is None else scale
    return bool(torch.isclose(g, w, atol=tol * scale, rtol=tol).all())


# ---- watching what the answer makes ------------------------------------------------------------

# reductions a backward with L needs none of: a row's maximum, a log-sum-exp, a softmax
_RECOMPUTE = {"aten.max.default", "aten.max.dim", "aten.amax.default", "aten.logsumexp.default",
              "aten._softmax.default", "aten._log_softmax.default", "aten.softmax.int"}


def watcher():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Watch(TorchDispatchMode):
        """Every tensor an op makes: the largest storage (op, shape, elements), the ops a
        backward has no need of, and any call of PyTorch's own attention; ``ops``, the name
        of every op run. While ``paused`` (inside a Triton launch, whose interpreter moves
        the arguments with ATen ops of its own) it watches nothing."""

        def __init__(self):
            super().__init__()
            self.largest = (0, "", ())
            self.recomputed: list[tuple[str, tuple]] = []
            self.attention_op = ""
            self.ops: set[str] = set()
            self.paused = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if self.paused:
                return out
            name = str(func)
            self.ops.add(name)
            if "scaled_dot_product" in name or "flash_attention" in name or \
                    "efficient_attention" in name:
                self.attention_op = self.attention_op or name
            if name in _RECOMPUTE and not self.recomputed:
                self.recomputed.append((name, tuple(args[0].shape)))
            for t in out if isinstance(out, tuple | list) else (out,):
                if isinstance(t, torch.Tensor):
                    try:
                        elements = t.untyped_storage().nbytes() // max(t.element_size(), 1)
                    except (RuntimeError, NotImplementedError):
                        elements = t.numel()
                    if elements > self.largest[0]:
                        self.largest = (elements, name, tuple(t.shape))
            return out

    return Watch()


def raised(case: Case, where: str, err: Exception) -> Mismatch:
    """A Mismatch naming the problem on which the answer's code raised."""
    from exercises import where_in_student_code

    said = (str(err).strip().splitlines() or [""])[0][:300]
    line = where_in_student_code(err)
    return Mismatch(f"{case.label}: your {where} raised {type(err).__name__}: {said}"
                    + (f"\n{line}" if line else ""),
                    "run the stub cell and this problem by hand (FlashAttention.apply(q, k, v, "
                    "causal) on tensors of its shape), read the error, fix it, run both cells "
                    "again")


def expect_tiled(case: Case, watch, phase: str) -> None:
    elements, op, shape = watch.largest
    whole = case.sq * case.sk
    expect(elements < whole, f"{case.label}: during the {phase}, {op} made a tensor of shape "
           f"{shape} ({elements:,} elements): as many elements as the whole ({case.sq}, "
           f"{case.sk}) score matrix of one head ({whole:,})", TILED)


def expect_no_library(case: Case, watch, phase: str) -> None:
    expect(not watch.attention_op, f"{case.label}: your {phase} calls PyTorch's own attention "
           f"({watch.attention_op}): the exercise is the tiles", "write the online softmax "
           "(forward) and the tile loop (backward) with matmuls, exp and sums")


