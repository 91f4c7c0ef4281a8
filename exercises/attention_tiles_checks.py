"""The verdicts of exercise attention_variants.flash_tiles (:mod:`exercises.attention_tiles`):
one problem at a time, the output, the saved log-sum-exp, what the backward returns and the
gradients against float64 (:mod:`exercises.attention_tiles_problems`), a wrong value read
against the mistakes that make it so the verdict names the one it matches.
"""

from __future__ import annotations

import math

import torch

from exercises import Mismatch, compare, expect
from exercises.attention_tiles_hints import (
    BACKWARD_AGAIN,
    BATCH_HEAD,
    CAUSAL,
    DK,
    DQ,
    DS,
    DV,
    EMPTY,
    FLOAT32,
    FORWARD,
    LARGE,
    NEGATIVE,
    NOT_CONTIGUOUS,
    RAGGED,
    RESCALE,
    RETURNS,
    SAVE_L,
    SCALE,
)
from exercises.attention_tiles_problems import (
    BLOCK,
    LOG2E,
    Case,
    case_tolerance,
    close,
    exact_gradients,
    expect_no_library,
    expect_tiled,
    raised,
    reference,
    seen,
    watcher,
)

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
        if close(g, alt, tol, rows):
            return f"your output is {words}", hint
    # right on some (batch, head) pairs only: say which, and whose attention is there
    wrong = [(b, h) for b in range(case.b) for h in range(case.h)
             if not close(g[b, h], want[b, h], tol)]
    if 0 < len(wrong) < case.b * case.h:
        b, h = wrong[0]
        where = ", ".join(f"({b}, {h})" for b, h in wrong)
        for b2 in range(case.b):
            for h2 in range(case.h):
                if (b2, h2) != (b, h) and close(g[b, h], want[b2, h2], tol):
                    return (f"out[{b}, {h}] holds the attention of batch {b2}, head {h2}: "
                            f"the (batch, head) pairs {where} are wrong, the others right",
                            BATCH_HEAD)
        return f"the (batch, head) pairs {where} are wrong, the others right", BATCH_HEAD
    if case.sq > BLOCK and case.sq % BLOCK:
        last = case.sq // BLOCK * BLOCK
        rows = torch.zeros(case.sq, dtype=torch.bool)
        rows[:last] = True
        if close(g, want, tol, rows):
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


def check_forward(case: Case, out, q, k, v, passed: set[str]) -> torch.Tensor:
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


def check_saved(case: Case, out, q, k, lse: torch.Tensor) -> None:
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


def check_returns(case: Case, raw, q, k, v) -> None:
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
            if close(got, torch.exp(s - lse[..., None]).mT @ do.double(), tol):
                return f"your dV is Pᵀ dO with P = exp(S − L) {words}", DV
        return "", DV
    scale = 1.0 / math.sqrt(case.d)
    if close(got, exact / scale, tol):
        return (f"{NAMES[name]} is missing the softmax scale 1/√D (yours is "
                f"{math.sqrt(case.d):g}× the right one)",
                f"{NAMES[name]} gets the scale once: multiply by 1/√D where it is summed")
    if not ok["dq"] and not ok["dk"]:
        return "", DS
    return "", DK if name == "dk" else DQ


def check_gradients(case: Case, cls, q, k, v, do, lse) -> None:
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = cls.apply(*leaves, case.causal)
    try:
        torch.autograd.backward(out, do)
    except Exception as err:
        raise raised(case, "backward (through torch.autograd.backward)", err) from None
    got = {"dq": leaves[0].grad, "dk": leaves[1].grad, "dv": leaves[2].grad}
    for name, grad in got.items():
        expect(grad is not None, f"{case.label}: {name} is None after "
               "torch.autograd.backward", RETURNS)
    compare_gradients(case, got, q, k, v, do, lse)


def compare_gradients(case: Case, got: dict, q, k, v, do, lse,
                      how: str = "torch.autograd.backward") -> None:
    """Mismatch unless ``got`` ({"dq", "dk", "dv"}) are float64 autograd's gradients of the
    problem, a wrong one named by the mistake it matches; ``how``: where they came from."""
    exact = exact_gradients(case, q, k, v, do)
    tol = 2 * case_tolerance(case, q, k)
    # errors relative to each gradient's largest value, or a hundredth of the largest of the
    # three where one is all but zero (one key: dQ = dK = 0 exactly)
    floor = 1e-2 * max([e.abs().max().item() for e in exact.values() if e.numel()] or [1.0])
    scales = {n: max(e.abs().max().item() if e.numel() else 0.0, floor)
              for n, e in exact.items()}
    ok = {n: close(got[n], exact[n], tol, scale=scales[n]) for n in got}
    for name in ("dv", "dk", "dq"):
        if ok[name]:
            continue
        said, hint = _grad_message(case, name, got[name], exact[name], ok, tol, q, k, do, lse)
        try:
            compare(got[name], exact[name].to(case.dtype),
                    what=f"{case.label}: {NAMES[name]} ({how})", hint=hint,
                    atol=tol * scales[name], rtol=tol)
        except Mismatch as wrong:
            raise Mismatch(wrong.message + (f"\n{said}" if said else ""), hint) from None
        raise Mismatch(f"{case.label}: {NAMES[name]} is off by more than {tol:g} of its "
                       f"largest value" + (f"\n{said}" if said else ""), hint)


def check_case(cls, case: Case, passed: set[str], device: str = "cpu") -> None:
    q, k, v, do = case.tensors(device)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    watch = watcher()
    try:
        with watch:
            out = cls.apply(*leaves, case.causal)
    except NotImplementedError:
        raise
    except Exception as err:
        raise raised(case, "forward", err) from None
    expect_no_library(case, watch, "forward")
    if case.tiled:
        expect_tiled(case, watch, "forward")
    lse = check_forward(case, out, q, k, v, passed)
    expect(out.grad_fn is not None, f"{case.label}: the output has no grad_fn",
           "return from forward the tensor it computed (FlashAttention.apply gives it one)")
    check_saved(case, out, q, k, lse)
    watch = watcher()
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
        raise raised(case, "backward", err) from None
    expect_no_library(case, watch, "backward")
    if watch.recomputed:
        op, shape = watch.recomputed[0]
        raise Mismatch(f"{case.label}: your backward computed {op} of a tensor of shape {shape}: "
                       "a row maximum or a softmax, the forward's work again", BACKWARD_AGAIN)
    if case.tiled:
        expect_tiled(case, watch, "backward")
    check_returns(case, raw, q, k, v)
    check_gradients(case, cls, q, k, v, do, lse)


