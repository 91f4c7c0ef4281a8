"""The problems and the verdict per problem of exercise attention_variants.flash_triton
(:mod:`exercises.attention_triton`): FlashAttention-2 in Triton, forward and backward.

The float64 reference, the tolerances and the naming of a wrong output or gradient are flash
_tiles' (:mod:`exercises.attention_tiles_checks`); what is added is what a kernel can get wrong
and a PyTorch loop cannot: every load and store checked against the launch's tensors (the
inputs NaN-fenced, :mod:`exercises.triton_checks`), masked-off lanes of a load without
``other=`` read as NaN, the programs shuffled, two programs storing one element (a race), a
second run compared bit for bit, the work done in Triton (not in PyTorch ops around it), and no
tile as wide as every key.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils import env
from exercises import Mismatch, expect
from exercises.attention_tiles_checks import (
    check_forward,
    check_returns,
    check_saved,
    compare_gradients,
)
from exercises.attention_tiles_problems import (
    Case,
    case_tolerance,
    close,
    expect_no_library,
    expect_tiled,
    raised,
    reference,
    seen,
    watcher,
)
from exercises.attention_triton_watch import watched_launches
from exercises.triton_checks import expect_in_bounds, interpreted_memory, nan_fenced
from exercises.triton_precision import tensor_core_precision

HEAD_DIMS = (16, 32, 64, 128)  # what the statement allows (tl.arange needs a power of two)

STRIDES = ("right on contiguous inputs, wrong on these strides: index q, k, v and dO with "
           "their own strides (pass q.stride(0), q.stride(1), q.stride(2) to the kernel), or "
           "call .contiguous() on what is not")
TF32 = ("off by about 1e-3 in float32: tl.dot multiplies float32 in tf32 (10 mantissa bits) "
        "unless given input_precision=\"ieee\"; float32 inputs ask for exact products")
PADDED = ("the keys past Sk in the last tile were loaded as zeros and scored 0, not −∞: "
          "exp(0 − m) of each padded key joins the sum l. Mask the scores too: "
          "tl.where(keys < Sk, s, float(\"-inf\"))")
BASES = ("exp2 and a log-sum-exp in base e mixed (or exp and base 2): 2^(s·log₂e − L) needs "
         "L·log₂e, not L. Keep one base through the forward's L and the backward's P")
ORDER = ("a sum whose order depends on which program runs first: with tl.atomic_add, the "
         "additions land in scheduling order and round differently. dK and dV must each be "
         "one program's own sum (a program per tile of keys); only dQ may be summed with "
         "atomics")
RACE = ("a race: on a GPU these programs run at the same time, and a load, add and tl.store "
        "by one loses what the other added between its load and its store. Sum across "
        "programs with tl.atomic_add, or give dQ its own kernel over tiles of queries")
IN_TRITON = ("the exercise is the kernels: compute S = q kᵀ, the softmax and the products "
             "inside @triton.jit functions (tl.dot, tl.exp2), launched as kernel[grid](...)")
WIDE = ("walk the keys in tiles of BLOCK_N (64 or 128) inside the kernel; a block as wide as Sk "
        "is the (BLOCK_M, Sk) strip of scores FlashAttention does without, and compiles only "
        "while Sk is small")

# ATen ops that are attention's work (products, exponentials, row statistics): a pass that
# runs one in PyTorch did part of the exercise outside its kernels
_WORK = ("aten.mm", "aten.bmm", "aten.baddbmm", "aten.addmm", "aten.matmul", "aten.exp.",
         "aten.exp2", "aten.exp_", "aten._softmax", "aten.logsumexp", "aten.amax", "aten.max.")


def problems(device: str = "cpu") -> list[Case]:
    """Small enough for the interpreter (about a second each), chosen to break wrong answers:
    ragged for every power-of-two tile from 16 to 128 both ways, one query, one key, no key,
    causal with Sq < Sk and Sq > Sk, B != H, strides, scores near −200 and of several hundred,
    float32 and float16 (bfloat16 on a GPU: the interpreter computes bf16 tl.dot wrongly)."""
    f16, bf16 = torch.float16, torch.bfloat16
    cases = [
        Case(1, 2, 64, 64, 64, what="one tile exactly"),
        Case(1, 2, 130, 77, 64, what="ragged tiles, more queries than keys"),
        Case(1, 2, 33, 129, 64, what="ragged tiles, more keys than queries (one in the last)"),
        Case(1, 1, 300, 260, 16, what="tiled: no (Sq, Sk) tensor", tiled=True),
        Case(2, 3, 1, 100, 64, what="one query"),
        Case(1, 2, 70, 1, 16, what="one key"),
        Case(1, 2, 130, 130, 32, True, what="ragged tiles"),
        Case(1, 2, 40, 150, 64, True, what="fewer queries than keys"),
        Case(1, 2, 150, 70, 32, True, what="queries past the last key"),
        Case(1, 2, 100, 150, 64, kind="negative", what="every score near −200"),
        Case(1, 2, 150, 130, 64, True, kind="large", what="scores of several hundred"),
        Case(1, 2, 70, 0, 16, what="no keys at all (Sk = 0)"),
        Case(1, 2, 50, 0, 16, True, what="no keys at all (Sk = 0)"),
        Case(1, 2, 90, 100, 32, True, what="dO not contiguous (a transposed view)",
             do_strided=True),
        Case(2, 3, 70, 65, 16, True, kind="bshd", what="(B, S, H, D) strides for q, k and v"),
        Case(1, 2, 40, 50, 16, kind="every_other", what="q, k and v with a stride of 2 along D"),
        Case(1, 1, 70, 50, 128, True, what="D = 128"),
        Case(1, 2, 130, 77, 64, what="ragged tiles", dtype=f16),
        Case(1, 2, 150, 130, 64, True, kind="large", what="scores of several hundred",
             dtype=f16),
    ]
    if device == "cuda":
        cases += [Case(2, 3, 130, 77, 64, what="ragged tiles", dtype=bf16),
                  Case(1, 2, 150, 130, 64, True, kind="large", what="scores of several hundred",
                       dtype=bf16),
                  Case(1, 2, 100, 150, 64, kind="negative", what="every score near −200",
                       dtype=bf16),
                  Case(2, 4, 1000, 1030, 128, True, what="larger, on the GPU", dtype=bf16),
                  Case(1, 4, 2048, 1999, 64, what="larger, on the GPU", dtype=f16)]
    return cases


def repeated(case: Case) -> bool:
    """The problems run a second time, bit for bit: the strided one (B != H) and the causal
    float32 one of three query tiles (a sum over programs rounds differently in another order;
    float32, since a rounding to 16 bits would hide it); on a GPU, the larger ones too."""
    return case.kind == "bshd" or (case.what == "ragged tiles" and case.causal
                                   and case.dtype == torch.float32) or "larger" in case.what


def fenced_like(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with the same shape and strides, its memory between NaN fences and any
    gaps between its elements NaN too (a read outside it, or into a gap, reads NaN: the
    interpreter names a read outside, a GPU reads NaN)."""
    span = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1
    memory = nan_fenced(span if t.numel() else 0, t.dtype, t.device)
    return memory.as_strided(t.shape, t.stride()).copy_(t)


def _run(what: str, case: Case, fn, watch, seed: int, reverse: bool = False):
    """``fn()`` with its launches watched (programs in the order of ``seed``, or that order
    reversed) and, in the interpreter, every address checked; the (value, what was seen)."""
    done: dict = {}

    def run():
        with watched_launches(watch, seed, reverse) as launches, watch, interpreted_memory(), \
                np.errstate(all="ignore"), tensor_core_precision():
            done["seen"] = launches
            done["value"] = fn()

    try:
        expect_in_bounds(run, f"{case.label}: your {what}")
    except (Mismatch, NotImplementedError):
        raise
    except Exception as err:
        raise raised(case, what, err) from None
    return done["value"], done["seen"]


def _expect_in_triton(case: Case, what: str, watch, launched) -> None:
    expect(sum(launched.launches.values()) > 0, f"{case.label}: your {what} launched no "
           "Triton kernel (it computes in PyTorch)", IN_TRITON)
    work = sorted(op for op in watch.ops if op.startswith(_WORK))
    expect(not work, f"{case.label}: your {what} ran {', '.join(work)} in PyTorch, outside "
           "your kernels", IN_TRITON)
    expect_no_library(case, watch, what)


def _expect_narrow(case: Case, what: str, launched) -> None:
    width, kernel = launched.widest
    expect(width < case.sk, f"{case.label}: {kernel} of your {what} made a tl.arange of "
           f"{width} elements, as wide as every key of the row (Sk = {case.sk})", WIDE)


def _expect_no_race(case: Case, what: str, launched) -> None:
    expect(not launched.race, f"{case.label}: in your {what}, {launched.race}: a race",
           RACE)


def _named_forward(case: Case, out, q, k, v, passed: set[str]):
    """flash_tiles' check of the output, with what a kernel gets wrong named too."""
    try:
        return check_forward(case, out, q, k, v, passed)
    except Mismatch as wrong:
        if not isinstance(out, torch.Tensor) or out.shape != q.shape[:-1] + v.shape[-1:]:
            raise
        tol = case_tolerance(case, q, k)
        block = 64
        pad = -case.sk % block if case.sk > 0 else 0
        # the padded keys scored 0 (loaded as zeros, unmasked); where every real score is
        # near −200 a zero score would outweigh them all, and m started at 0 looks the same
        if pad and not case.causal and case.kind != "negative":
            zeros = torch.zeros(case.b, case.h, pad, case.d, dtype=k.dtype)
            alt, _ = reference(q, torch.cat([k, zeros], 2), torch.cat([v, zeros], 2), None)
            if close(out, alt, tol):
                raise Mismatch(wrong.message + "\nyour output counts the padded keys of the "
                               "last tile with score 0", PADDED) from None
        if case.dtype == torch.float32 and close(out, reference(q, k, v, seen(
                case.sq, case.sk, case.causal))[0], 3e-3):
            raise Mismatch(wrong.message + "\nyour output is off by more than float32's "
                           "rounding and less than tf32's", TF32) from None
        if (case.kind in ("bshd", "every_other") or case.do_strided) and \
                "\n" not in wrong.message:
            raise Mismatch(wrong.message, STRIDES) from None  # (nothing else named)
        raise


def _named_gradients(case: Case, got: dict, q, k, v, do, lse) -> None:
    """flash_tiles' check of the gradients, with mixed bases of exp and L named too."""
    try:
        compare_gradients(case, got, q, k, v, do, lse, how="what your backward returned")
    except Mismatch as wrong:
        if case.sk and isinstance(got["dv"], torch.Tensor):
            s = q.double() @ k.double().mT / math.sqrt(case.d)
            mask = seen(case.sq, case.sk, case.causal)
            for p in (torch.exp2(s * 1.4426950408889634 - lse[..., None]),  # L in base e
                      torch.exp(s - lse[..., None] * 1.4426950408889634)):  # L in base 2
                if mask is not None:
                    p = p.masked_fill(~mask.to(p.device), 0.0)
                if close(got["dv"], p.mT @ do.double(), case_tolerance(case, q, k) * 2):
                    raise Mismatch(wrong.message + "\nyour dV is Pᵀ dO with P computed in one "
                                   "base from an L of the other", BASES) from None
        if (case.kind in ("bshd", "every_other") or case.do_strided) and \
                "\n" not in wrong.message:
            raise Mismatch(wrong.message, STRIDES) from None
        raise


def check_problem(cls, case: Case, passed: set[str], seed: int,
                  device: str = "cpu") -> None:
    """Mismatch unless the forward and backward of ``cls`` are right on ``case``, in Triton,
    memory-safe, free of races and (on the problems of REPEATED) the same bit for bit on a
    second run in another order."""
    q, k, v, do = (fenced_like(t) for t in case.tensors(device))
    # (fenced copies keep every stride; .clone() would make a stride-2 view contiguous)
    leaves = [fenced_like(t.detach()).requires_grad_() for t in (q, k, v)]
    watch = watcher()
    out, launched = _run("forward", case, lambda: cls.apply(*leaves, case.causal), watch, seed)
    if case.sq and case.sk:  # (with no key there is nothing to launch)
        _expect_in_triton(case, "forward", watch, launched)
    if case.tiled:
        expect_tiled(case, watch, "forward")
        _expect_narrow(case, "forward", launched)
    lse = _named_forward(case, out, q.cpu(), k.cpu(), v.cpu(), passed).to(device)
    _expect_no_race(case, "forward", launched)
    expect(out.grad_fn is not None, f"{case.label}: the output has no grad_fn",
           "return from forward the tensor it computed (.apply gives it a grad_fn)")
    check_saved(case, out, q.cpu(), k.cpu(), lse.cpu())
    watch = watcher()
    raw, launched = _run("backward", case, lambda: out.grad_fn.apply(do), watch, seed + 1)
    if case.sq and case.sk:
        _expect_in_triton(case, "backward", watch, launched)
    if case.tiled:
        expect_tiled(case, watch, "backward")
        _expect_narrow(case, "backward", launched)
    check_returns(case, raw, q, k, v)
    got = dict(zip(("dq", "dk", "dv"), raw[:3], strict=False))
    _named_gradients(case, got, q, k, v, do, lse)
    _expect_no_race(case, "backward", launched)
    if repeated(case):
        _expect_same_again(cls, case, out, got, q, k, v, do, seed)


def _expect_same_again(cls, case: Case, out, got: dict, q, k, v, do, seed: int) -> None:
    leaves = [fenced_like(t.detach()).requires_grad_() for t in (q, k, v)]
    watch = watcher()
    again, _ = _run("forward", case, lambda: cls.apply(*leaves, case.causal), watch, seed,
                    reverse=True)
    raw, _ = _run("backward", case, lambda: again.grad_fn.apply(do), watch, seed + 1,
                  reverse=True)
    order = (" (the second with each launch's programs in the reverse order, as a GPU may run "
             "them)") if env.TRITON_INTERPRET else ""
    for name, first, second in (("out", out, again), ("dk", got["dk"], raw[1]),
                                ("dv", got["dv"], raw[2])):
        differ = int((first != second).sum())
        expect(differ == 0, f"{case.label}: {name} of the same inputs changed between two "
               f"runs{order}: {differ} of {first.numel()} values differ", ORDER)


def expect_head_dims(cls) -> str:
    """A head dim the statement does not allow (D = 40) gets a ValueError naming q."""
    q = torch.randn(1, 1, 8, 40, device=env.DEFAULT_DEVICE)
    try:
        with np.errstate(all="ignore"):
            cls.apply(q, q, q, False)
    except ValueError as err:
        expect(" q" in f" {err}" or "q:" in str(err), f"D = 40: your ValueError says "
               f"\"{err}\", without naming the argument q", "say which argument and what was "
               "expected: ValueError(f\"q: expected a head dim of 16, 32, 64 or 128, got {d}\")")
        return "D = 40 refused with a ValueError naming q"
    except Exception as err:
        raise Mismatch(f"D = 40: your forward raised {type(err).__name__}: "
                       f"{str(err)[:200]}, not a ValueError", "check the head dim in forward "
                       "before launching: raise ValueError naming q and the allowed D "
                       f"({', '.join(map(str, HEAD_DIMS))})") from None
    raise Mismatch("D = 40: your forward ran a head dim the statement does not allow "
                   "(tl.arange(0, D) needs a power of two)", "raise ValueError(f\"q: expected "
                   "a head dim of 16, 32, 64 or 128, got {d}\") in forward")
