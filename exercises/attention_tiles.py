"""Exercise attention_variants.flash_tiles of lesson 14, its assignment: FlashAttention-2 whole,
forward and backward, in plain PyTorch tiles, as a ``torch.autograd.Function`` that saves the
log-sum-exp.

The check is pure PyTorch and runs on the CPU, whatever the machine (a GPU adds two problems
run there, and the timing). For every problem it runs your forward, then your backward, with a
``TorchDispatchMode`` watching each tensor they make, and compares against float64 (the same
inputs, converted): the output, the saved log-sum-exp ``L`` (found among the tensors the
forward saved), what the backward returns (one gradient per input, shapes and dtypes), and
``dq, dk, dv`` from ``torch.autograd.backward`` against float64 autograd. The problems: one tile
exactly, ragged tiles both ways, fewer queries or keys than a tile, one query, one key, no keys,
causal with Sq < Sk and Sq > Sk, D of 16, 40 and 64, B and H above 1 (B != H), (B, S, H, D)
strides, a dO that is not contiguous, every score near -200, scores of several hundred, in
float32, bfloat16 and float16 (tolerances from the dtype's epsilon); at 300 x 260 keys it also
requires that no tensor holds as many elements as the (Sq, Sk) scores. A wrong value is read
against the mistakes that make it (a mask shifted or aligned elsewhere, the last tile of keys
dropped, a batch or head written in another's place, a gradient off by the scale) and the
verdict names the one it matches. ``exercises/solutions/attention_tiles.py`` keeps the wrong
answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from course_utils import env
from exercises import Mismatch, compare, exercise, expect

# the exercise closes this subsection of the assignment's section
SECTION_TILES = "Write FlashAttention-2 in tiles"
BLOCK = 64  # the statement's BLOCK_Q and BLOCK_K
LOG2E = 1.4426950408889634

TILES_STUB = '''
import math

import torch

BLOCK_Q = 64  # query rows per tile
BLOCK_K = 64  # keys per tile


class FlashAttention(torch.autograd.Function):
    """softmax(q kᵀ / √D) v in tiles: q (B, H, Sq, D), k and v (B, H, Sk, D); causal: query i
    sees key j when j <= i. Called as FlashAttention.apply(q, k, v, causal)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        """out (B, H, Sq, D) in q's dtype, computed in float32, tile by tile with the online
        softmax (never a (Sq, Sk) tensor); ctx.save_for_backward(q, k, v, out, L), L (B, H, Sq)
        the log-sum-exp of each query's scaled scores."""
        ...

    @staticmethod
    def backward(ctx, do):
        """(dq, dk, dv, None), tile by tile from what the forward saved: P = exp(S − L)."""
        ...
'''

# ---- hints: what to look at, by what was found wrong ---------------------------------------
FORWARD = ("compare one tile by hand: S = q_tile k_tileᵀ / √D, the running max m (from −∞), "
           "α = exp(m_old − m_new), l = α·l + rowsum(P), acc = α·acc + P v_tile; "
           "out = acc / l at the end")
RESCALE = ("right with one tile of keys, wrong with several: each time the running maximum "
           "grows, what was summed so far must be rescaled by alpha = exp(m_old − m_new), the "
           "accumulator acc as well as the sum l")
FLOAT32 = ("right in float32, wrong in 16 bits: compute in float32 (q.float(), k.float(), "
           "v.float()): the scores, m, l and acc; round only the output to q's dtype")
EMPTY = ("a row that sees no key (Sk = 0) has l = 0 and acc = 0: its output is 0 (divide by "
         "torch.where(l == 0, 1, l)), never 0 / 0")
NEGATIVE = ("every score of this problem is about −200: a running maximum started at 0 (not "
            "−∞) stays 0, and exp(s − 0) underflows to 0 in float32 (l = 0, L = −∞); start m at "
            "−∞ and guard only what you subtract while nothing has been seen")
LARGE = ("the scores reach several hundred: exp(s) overflows float32 past 88; subtract the "
         "running maximum inside every exp (exp(s − m_new), exp(m_old − m_new))")
CAUSAL = ("causal: query i sees key j when j <= i (top-left, as the course's kernels and SDPA's "
          "is_causal): the diagonal included, whatever Sq and Sk")
SAVE_L = ("save L = m + log(l) per query, shape (B, H, Sq), float32, with "
          "ctx.save_for_backward(q, k, v, out, L)")
TILED = ("walk the keys in tiles of BLOCK_K as well as the queries in tiles of BLOCK_Q: each "
         "step holds a (BLOCK_Q, BLOCK_K) block of scores per (batch, head), never a row of "
         "every key, and a mask made from the tile's own indices")
RAGGED = ("range(0, S, BLOCK) reaches the last, ragged tile, and a slice past the end "
          "(k[:, :, j0:j0 + BLOCK_K]) just holds fewer rows: take the tile's length from the "
          "slice, never BLOCK itself")
SCALE = "the scores are q kᵀ · scale with scale = 1/√D (D = q.shape[-1])"
BATCH_HEAD = ("keep the (batch, head) dimensions as they are and let each op broadcast over "
              "them; or, in a loop, index the pair the same way when you read and when you "
              "write (a flat index of B·H pairs is b·H + h)")
DV = ("dV = Pᵀ dO is wrong, so P is: recompute each tile's S = q kᵀ · scale (the forward's "
      "1/√D) and P = exp(S − L) with the L you saved, masked exactly as the forward masks")
DS = ("dV is right, so P is; dS is not: dP = dO Vᵀ, dS = P ∘ (dP − D) with D_i = rowsum(dO ∘ O) "
      "over the whole row (dO and the saved output, one number per query), not a tile's share")
DK = "dV and dQ are right, dK is not: dK += dSᵀ Q · scale (dS transposed, Q of the query tile)"
DQ = "dV and dK are right, dQ is not: dQ += dS K · scale (K of the key tile)"
RETURNS = ("backward returns one gradient per input of forward: (dq, dk, dv, None), each of "
           "its input's shape and dtype (dq.to(q.dtype))")
NOT_CONTIGUOUS = ("a view (.view) needs contiguous memory; dO comes as autograd hands it: use "
                  ".reshape or .contiguous(), or index it as it is")
BACKWARD_AGAIN = ("the backward has what it needs in L: P = exp(S − L) is exact, so it needs no "
                  "maximum, sum or softmax over a row, and never the forward again")


@dataclass(frozen=True)
class Case:
    b: int
    h: int
    sq: int
    sk: int
    d: int
    causal: bool = False
    kind: str = "randn"  # "randn", "negative" (scores near -200), "large", "bshd" (strides)
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
        else:
            q, k, v = randn(b, h, sq, d), randn(b, h, sk, d), randn(b, h, sk, d)
        do = randn(b, h, d, sq).transpose(-2, -1) if self.do_strided else randn(b, h, sq, d)
        return tuple(t.to(self.dtype) for t in (q, k, v, do))


def _cases() -> list[Case]:
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


def _close(got: torch.Tensor, want: torch.Tensor, tol: float, rows=None,
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


def _watch():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Watch(TorchDispatchMode):
        """Every tensor an op makes: the largest storage (op, shape, elements), the ops a
        backward has no need of, and any call of PyTorch's own attention."""

        def __init__(self):
            super().__init__()
            self.largest = (0, "", ())
            self.recomputed: list[tuple[str, tuple]] = []
            self.attention_op = ""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func)
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


def _raised(case: Case, where: str, err: Exception) -> Mismatch:
    """A Mismatch naming the problem on which the answer's code raised."""
    from exercises import where_in_student_code

    said = (str(err).strip().splitlines() or [""])[0][:300]
    line = where_in_student_code(err)
    return Mismatch(f"{case.label}: your {where} raised {type(err).__name__}: {said}"
                    + (f"\n{line}" if line else ""),
                    "run the stub cell and this problem by hand (FlashAttention.apply(q, k, v, "
                    "causal) on tensors of its shape), read the error, fix it, run both cells "
                    "again")


def _expect_tiled(case: Case, watch, phase: str) -> None:
    elements, op, shape = watch.largest
    whole = case.sq * case.sk
    expect(elements < whole, f"{case.label}: during the {phase}, {op} made a tensor of shape "
           f"{shape} ({elements:,} elements): as many elements as the whole ({case.sq}, "
           f"{case.sk}) score matrix of one head ({whole:,})", TILED)


def _expect_no_library(case: Case, watch, phase: str) -> None:
    expect(not watch.attention_op, f"{case.label}: your {phase} calls PyTorch's own attention "
           f"({watch.attention_op}): the exercise is the tiles", "write the online softmax "
           "(forward) and the tile loop (backward) with matmuls, exp and sums")


# ---- what a wrong output looks like ------------------------------------------------------------


def _alternatives(case: Case):
    """(words, mask, scale, hint) of attention a mistake computes instead."""
    sq, sk, d = case.sq, case.sk, case.d
    found = []
    if case.causal:
        found += [("query i sees keys j < i (the diagonal hidden): " + CAUSAL,
                   seen(sq, sk, True, -1)),
                  ("query i sees keys j <= i + 1, one too many: " + CAUSAL, seen(sq, sk, True, 1)),
                  ("the causal mask aligned at the bottom right (query i sees keys j <= i + Sk − "
                   "Sq, FlashAttention's library convention since 2.1); the course's kernels "
                   "and SDPA's is_causal align it at the top left: j <= i, whatever Sq and Sk",
                   seen(sq, sk, True, sk - sq)),
                  ("attention without the causal mask: with causal=True query i sees key j "
                   "only when j <= i", None)]
    else:
        found.append(("attention with a causal mask, asked for without one", seen(sq, sk, True)))
    if sk > BLOCK and sk % BLOCK:
        last = sk // BLOCK * BLOCK
        found.append((f"attention over keys 0..{last - 1} only: the last, ragged tile of keys "
                       f"({last}..{sk - 1}) is never read (range(0, Sk, BLOCK_K) reaches it)",
                       seen(sq, sk, case.causal, keys=last)))
    words = [(w, m, None, RAGGED if "ragged" in w else CAUSAL) for w, m in found]
    mask = seen(sq, sk, case.causal)
    words += [("attention without the softmax scale 1/√D", mask, 1.0, SCALE),
              ("attention scaled by 1/D, not 1/√D", mask, 1.0 / d, SCALE)]
    return words


def _what_it_is(case: Case, got: torch.Tensor, q, k, v, want: torch.Tensor,
                tol: float) -> tuple[str, str | None]:
    """(a sentence naming the mistake the wrong output matches, its hint), or ("", None)."""
    g = got.detach().double().cpu()
    if g.isnan().any():
        if case.sk == 0:
            return "every row of this problem sees no key, and your output is NaN there", EMPTY
        first = tuple(int(i) for i in g.isnan().nonzero()[0])
        return f"your output holds NaN (first at {first})", None
    for words, mask, scale, hint in _alternatives(case):
        alt, _ = reference(q, k, v, mask, scale)
        rows = None if mask is None else mask.any(-1)  # rows that see a key there
        if _close(g, alt, tol, rows):
            return f"your output is {words}", hint
    # right on some (batch, head) pairs only: say which, and whose attention is there
    wrong = [(b, h) for b in range(case.b) for h in range(case.h)
             if not _close(g[b, h], want[b, h], tol)]
    if 0 < len(wrong) < case.b * case.h:
        b, h = wrong[0]
        where = ", ".join(f"({b}, {h})" for b, h in wrong)
        for b2 in range(case.b):
            for h2 in range(case.h):
                if (b2, h2) != (b, h) and _close(g[b, h], want[b2, h2], tol):
                    return (f"out[{b}, {h}] holds the attention of batch {b2}, head {h2}: "
                            f"the (batch, head) pairs {where} are wrong, the others right",
                            BATCH_HEAD)
        return f"the (batch, head) pairs {where} are wrong, the others right", BATCH_HEAD
    if case.sq > BLOCK and case.sq % BLOCK:
        last = case.sq // BLOCK * BLOCK
        rows = torch.zeros(case.sq, dtype=torch.bool)
        rows[:last] = True
        if _close(g, want, tol, rows):
            return (f"the rows before {last} are right, the last, ragged tile of queries "
                    f"({last}..{case.sq - 1}) is not", RAGGED)
    return "", None


def _hint(case: Case, passed: set[str]) -> str:
    """What to look at when the forward first goes wrong on ``case``."""
    if case.kind == "negative":
        return NEGATIVE
    if case.kind == "large":
        return FLOAT32 if case.dtype != torch.float32 and "large" in passed else LARGE
    if case.sk == 0:
        return EMPTY
    if case.dtype != torch.float32:
        return FLOAT32
    if case.causal:
        return CAUSAL
    if "one tile" in passed and case.sk > BLOCK:
        return RESCALE
    return FORWARD


def _check_forward(case: Case, out, q, k, v, passed: set[str]) -> torch.Tensor:
    """Mismatch unless ``out`` is the float64 attention of the problem; returns float64 L."""
    expect(out is not None, f"{case.label}: your forward returned None",
           "return out (B, H, Sq, D) in q's dtype at the end of forward")
    want, lse = reference(q, k, v, seen(case.sq, case.sk, case.causal))
    tol = case_tolerance(case, q, k)
    try:
        compare(out, want.to(case.dtype), what=f"{case.label}: out", hint=_hint(case, passed),
                atol=tol * max(want.abs().max().item() if want.numel() else 0.0, 1e-30),
                rtol=tol)
    except Mismatch as wrong:
        if isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(want.shape):
            said, hint = _what_it_is(case, out, q, k, v, want, tol)
            if said:
                raise Mismatch(f"{wrong.message}\n{said}", hint or wrong.hint) from None
        raise
    return lse


def _check_saved(case: Case, out, q, k, lse: torch.Tensor) -> None:
    """The forward saved L (B, H, Sq), the log-sum-exp (natural log or base 2), and kept
    nothing of the scores' size for the backward."""
    saved = out.grad_fn.saved_tensors
    shape = (case.b, case.h, case.sq)
    found = [t for t in saved if tuple(t.shape) == shape and t.is_floating_point()]
    expect(bool(found), f"{case.label}: none of the tensors your forward saved has shape "
           f"{shape} (saved: {[tuple(t.shape) for t in saved]})", SAVE_L)
    # what the forward keeps for the backward: the saved tensors and anything left on ctx
    kept = sum(t.numel() for t in saved)
    for value in vars(out.grad_fn).values():
        for t in value if isinstance(value, list | tuple) else (value,):
            kept += t.numel() if isinstance(t, torch.Tensor) else 0
    inputs = case.b * case.h * ((case.sq * 2 + case.sk * 2) * case.d + 3 * case.sq)
    expect(kept <= inputs, f"{case.label}: your forward keeps {kept:,} elements for the "
           f"backward, more than q, k, v, out and L hold ({inputs:,}): that is the scores' "
           "memory FlashAttention does without", SAVE_L)
    if case.sk == 0:
        return  # no key: L is −inf, and nothing reads it
    want = lse.float()
    tol = dict(atol=1e-4, rtol=1e-5)
    for t in found:
        got = t.detach().float().cpu()
        if torch.allclose(got, want, **tol) or torch.allclose(got, want * LOG2E, **tol):
            return
    got = found[0].detach().float().cpu()
    hint, said = (SAVE_L if case.dtype == torch.float32 else FLOAT32), ""
    if found[0].dtype in (torch.float16, torch.bfloat16):
        hint = (f"your L is kept in {str(found[0].dtype).removeprefix('torch.')}: keep L in "
                "float32 (the backward exponentiates S − L: in 16 bits an L of 200 is off by "
                "up to 0.5)")
    elif torch.allclose(got, _row_max(case, q, k), **tol):
        said = ("\nyour L holds each row's maximum m; L is the log-sum-exp m + log(l), which "
                "makes P = exp(S − L) sum to 1 over the row")
    try:
        compare(got, want, what=f"{case.label}: the saved L (shape {shape})", hint=hint, **tol)
    except Mismatch as wrong:
        raise Mismatch(wrong.message + said, wrong.hint) from None


def _row_max(case: Case, q, k) -> torch.Tensor:
    s = q.double() @ k.double().mT / math.sqrt(case.d)
    mask = seen(case.sq, case.sk, case.causal)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.amax(-1).float()


def _check_returns(case: Case, raw, q, k, v) -> None:
    """What the backward returned, before autograd casts or checks it."""
    expect(isinstance(raw, tuple | list), f"{case.label}: your backward returned "
           f"{type(raw).__name__}, not a tuple", RETURNS)
    expect(len(raw) == 4, f"{case.label}: your backward returned {len(raw)} values; forward "
           "takes 4 inputs (q, k, v, causal)", RETURNS)
    expect(raw[3] is None, f"{case.label}: your backward returned "
           f"{type(raw[3]).__name__} for causal, which has no gradient", RETURNS)
    for name, got, like in zip(("dq", "dk", "dv"), raw[:3], (q, k, v), strict=True):
        expect(isinstance(got, torch.Tensor), f"{case.label}: your backward returned "
               f"{type(got).__name__} for {name}", RETURNS)
        expect(tuple(got.shape) == tuple(like.shape) and got.dtype == like.dtype,
               f"{case.label}: {name} from your backward has shape {tuple(got.shape)} and "
               f"dtype {got.dtype}; its input has {tuple(like.shape)}, {like.dtype}", RETURNS)


NAMES = {"dq": "dQ", "dk": "dK", "dv": "dV"}


def _grad_message(case: Case, name: str, got, exact, ok: dict, tol: float, q, k, do,
                  lse) -> tuple[str, str]:
    """(a sentence naming the mistake, or "", the hint) for a wrong gradient ``name``."""
    if name == "dv":  # P is wrong: with the scale left out, or the mask?
        mask = seen(case.sq, case.sk, case.causal)
        tries = [("without the softmax scale 1/√D (S recomputed as q kᵀ)", mask, 1.0)]
        if case.causal:
            tries.append(("without the causal mask (the hidden keys' P too)", None,
                          1 / math.sqrt(case.d)))
        for words, m, scale in tries:
            s = q.double() @ k.double().mT * scale
            if m is not None:
                s = s.masked_fill(~m.to(s.device), float("-inf"))
            if _close(got, torch.exp(s - lse[..., None]).mT @ do.double(), tol):
                return f"your dV is Pᵀ dO with P = exp(S − L) {words}", DV
        return "", DV
    scale = 1.0 / math.sqrt(case.d)
    if _close(got, exact / scale, tol):
        return (f"{NAMES[name]} is missing the softmax scale 1/√D (yours is "
                f"{math.sqrt(case.d):g}× the right one)",
                f"{NAMES[name]} gets the scale once: multiply by 1/√D where it is summed")
    if not ok["dq"] and not ok["dk"]:
        return "", DS
    return "", DK if name == "dk" else DQ


def _check_gradients(case: Case, cls, q, k, v, do, lse) -> None:
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = cls.apply(*leaves, case.causal)
    try:
        torch.autograd.backward(out, do)
    except Exception as err:
        raise _raised(case, "backward (through torch.autograd.backward)", err) from None
    got = {"dq": leaves[0].grad, "dk": leaves[1].grad, "dv": leaves[2].grad}
    for name, grad in got.items():
        expect(grad is not None, f"{case.label}: {name} is None after "
               "torch.autograd.backward", RETURNS)
    exact = exact_gradients(case, q, k, v, do)
    tol = 2 * case_tolerance(case, q, k)
    # errors relative to each gradient's largest value, or a hundredth of the largest of the
    # three where one is all but zero (one key: dQ = dK = 0 exactly)
    floor = 1e-2 * max([e.abs().max().item() for e in exact.values() if e.numel()] or [1.0])
    scales = {n: max(e.abs().max().item() if e.numel() else 0.0, floor)
              for n, e in exact.items()}
    ok = {n: _close(got[n], exact[n], tol, scale=scales[n]) for n in got}
    for name in ("dv", "dk", "dq"):
        if ok[name]:
            continue
        said, hint = _grad_message(case, name, got[name], exact[name], ok, tol, q, k, do, lse)
        try:
            compare(got[name], exact[name].to(case.dtype),
                    what=f"{case.label}: {NAMES[name]} (torch.autograd.backward)", hint=hint,
                    atol=tol * scales[name], rtol=tol)
        except Mismatch as wrong:
            raise Mismatch(wrong.message + (f"\n{said}" if said else ""), hint) from None
        raise Mismatch(f"{case.label}: {NAMES[name]} is off by more than {tol:g} of its "
                       f"largest value" + (f"\n{said}" if said else ""), hint)


def _check_case(cls, case: Case, passed: set[str], device: str = "cpu") -> None:
    q, k, v, do = case.tensors(device)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    watch = _watch()
    try:
        with watch:
            out = cls.apply(*leaves, case.causal)
    except NotImplementedError:
        raise
    except Exception as err:
        raise _raised(case, "forward", err) from None
    _expect_no_library(case, watch, "forward")
    if case.tiled:
        _expect_tiled(case, watch, "forward")
    lse = _check_forward(case, out, q, k, v, passed)
    expect(out.grad_fn is not None, f"{case.label}: the output has no grad_fn",
           "return from forward the tensor it computed (FlashAttention.apply gives it one)")
    _check_saved(case, out, q, k, lse)
    watch = _watch()
    try:
        with watch:
            raw = out.grad_fn.apply(do)
    except NotImplementedError:
        raise
    except Exception as err:
        if not do.is_contiguous():
            try:  # the same problem with a contiguous dO: does that one run?
                cls.apply(*leaves, case.causal).grad_fn.apply(do.contiguous())
            except Exception:
                pass
            else:
                raise Mismatch(f"{case.label}: your backward raised {type(err).__name__} on a "
                               f"dO that is not contiguous (strides {do.stride()}) and runs on "
                               f"a contiguous one: {str(err).splitlines()[0][:200]}",
                               NOT_CONTIGUOUS) from None
        raise _raised(case, "backward", err) from None
    _expect_no_library(case, watch, "backward")
    if watch.recomputed:
        op, shape = watch.recomputed[0]
        raise Mismatch(f"{case.label}: your backward computed {op} of a tensor of shape {shape}: "
                       "a row maximum or a softmax, the forward's work again", BACKWARD_AGAIN)
    if case.tiled:
        _expect_tiled(case, watch, "backward")
    _check_returns(case, raw, q, k, v)
    _check_gradients(case, cls, q, k, v, do, lse)


# ---- the check ---------------------------------------------------------------------------------


def _speed(cls) -> str:
    """One printed line: forward + backward of your FlashAttention, the course's registered
    attention with its backward, and SDPA, on one problem (a verdict, never an assertion)."""
    import torch.nn.functional as F

    from course_utils import timing
    from kernels.registry import get_kernels

    gpu = env.HAS_CUDA
    device, dtype = ("cuda", torch.bfloat16) if gpu else ("cpu", torch.float32)
    b, h, s, d = (4, 16, 1024, 64) if gpu else (1, 2, 128, 64)
    q, k, v = (torch.randn(b, h, s, d, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    do = torch.randn(b, h, s, d, device=device, dtype=dtype)

    def step(fn):
        def run():
            fn(q, k, v).backward(do)
        return run

    course = [kernel for kernel in get_kernels("attention", q, k, v, False)
              if kernel.meta.get("fused") and not kernel.meta.get("peer")
              and kernel.meta.get("backward")]
    found = {"yours": step(lambda *a: cls.apply(*a, False))}
    if course:
        found[f"the course's {course[0].name}"] = step(lambda *a: course[0](*a, False))
    found["SDPA"] = step(F.scaled_dot_product_attention)
    times = {}
    for name, run in found.items():
        slow = not gpu and name != "SDPA" and name != "yours"  # Triton's interpreter
        try:
            times[name] = timing.benchmark(run, warmup=0 if slow else 1, reps=1 if slow else None,
                                           min_time_s=0.05, device=device).median
        except Exception as err:  # a provider that does not run here: say so, never fail
            times[name] = f"did not run ({type(err).__name__})"
    mine = times["yours"]
    def times_of(x: float) -> str:
        return f"{x:,.0f}×" if x >= 10 else f"{x:.2g}×"

    said = [f"{name} {t}" if isinstance(t, str) else f"{name} {timing.format_ms(t)}"
            + ("" if name == "yours" or isinstance(mine, str) else
               f" (yours {times_of(t / mine)} faster)" if t >= mine else
               f" (yours {times_of(mine / t)} slower)") for name, t in times.items()]
    where = (f"on {torch.cuda.get_device_name()}" if gpu else
             "on this CPU (no GPU here: the course's Triton kernel runs in Triton's interpreter "
             "and SDPA on the CPU, so these times say nothing of a GPU's)")
    return (f"speed, forward + backward, B={b} H={h} S={s} D={d} "
            f"{str(dtype).removeprefix('torch.')}, {where}: " + "; ".join(said))


@exercise("attention_variants.flash_tiles", title="FlashAttention-2 from an empty file, in "
          "PyTorch tiles", stub=TILES_STUB, answers=("FlashAttention",), section=SECTION_TILES,
          intro="""
Write `FlashAttention`, a `torch.autograd.Function`, forward and backward, in plain PyTorch.

- **Inputs**: q `(B, H, Sq, D)`, k and v `(B, H, Sk, D)`, any strides, float32, bfloat16 or
  float16; `causal` a bool. Scale `1/√D`. **Causal**: query i sees key j when `j <= i`,
  aligned top-left as the course's kernels and SDPA's `is_causal` are, whatever Sq and Sk.
  Sk may be 0 (an empty sequence): a row that sees no key gets output 0 and gradient 0, never
  NaN. With causal, a tile of keys can hide every key from a row: it must add nothing.
- **forward(ctx, q, k, v, causal=False)**: loop over tiles of `BLOCK_Q` queries and, inside,
  tiles of `BLOCK_K` keys with the online softmax (running max m from −∞, running sum l,
  accumulator rescaled by `exp(m_old − m_new)`); no tensor of the size of the `(Sq, Sk)` scores,
  nor a `(BLOCK_Q, Sk)` strip for every head. Compute in float32, return out in q's dtype.
  `ctx.save_for_backward(q, k, v, out, L)`, L `(B, H, Sq)` float32, `L = m + log(l)` (base 2,
  `L·log₂e`, is accepted too).
- **backward(ctx, do)**: `D = rowsum(dO ∘ O)`, then per tile `P = exp(S − L)`, `dV += Pᵀ dO`,
  `dP = dO Vᵀ`, `dS = P ∘ (dP − D)`, `dQ += dS K · scale`, `dK += dSᵀ Q · scale`; no maximum or
  softmax over a row (L makes them unneeded). dO may be any strides. Return
  `(dq, dk, dv, None)` in the inputs' dtypes.

The check runs your class on small problems on the CPU against float64: out, the saved L, what
backward returns, and dq, dk, dv through `torch.autograd.backward`, on one tile, ragged tiles both
ways, one query, one key, no keys, causal with Sq < Sk and Sq > Sk, D of 16, 40 and 64, B ≠ H,
(B, S, H, D) strides, a transposed dO, every score near −200, scores of several hundred, in three
dtypes; at 300 × 260 it watches every tensor your code makes. Then it times yours beside the
course's kernel and SDPA.""")
def check_flash_tiles(FlashAttention, report) -> None:
    expect(isinstance(FlashAttention, type) and issubclass(FlashAttention,
                                                          torch.autograd.Function),
           f"FlashAttention is {type(FlashAttention).__name__}, not a torch.autograd.Function",
           "keep the class of the stub: class FlashAttention(torch.autograd.Function)")
    passed: set[str] = set()
    cases = _cases()
    for case in cases:
        _check_case(FlashAttention, case, passed)
        if case.dtype == torch.float32:
            passed.add("large" if case.kind == "large" else
                       "one tile" if case.sk <= BLOCK and not case.causal else case.kind)
    line = (f"out, the saved L and dq, dk, dv right against float64 on {len(cases)} problems "
            f"(float32, bfloat16, float16, each to twice its epsilon, float32's grown with the "
            f"scores); no (Sq, Sk) tensor at 300 × 260 in either pass; the "
            "backward recomputes no row statistics")
    if env.HAS_CUDA:
        gpu = [Case(2, 3, 130, 77, 40, True, what="on the GPU", dtype=dt)
               for dt in (torch.float32, torch.bfloat16)]
        for case in gpu:
            q, k, v, do = case.tensors("cuda")
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            try:
                out = FlashAttention.apply(*leaves, case.causal)
                torch.autograd.backward(out, do)
            except Exception as err:
                raise _raised(case, "forward or backward", err) from None
            lse = _check_forward(case, out, q.cpu(), k.cpu(), v.cpu(), passed)
            _check_gradients(case, FlashAttention, q, k, v, do, lse.to("cuda"))
        line += f"; also on {torch.cuda.get_device_name()} (2 problems)"
    report.line(line + "; checked in PyTorch on the CPU")
    report.line(_speed(FlashAttention))
