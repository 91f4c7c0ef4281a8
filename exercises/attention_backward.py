"""Exercise attention.backward_dkdv of lesson 09: the backward's dK/dV step (``dkdv_block`` of
``kernels/attention/triton_bwd.py``), a ``@triton.jit`` function run inside a fresh copy of the
course's backward, after the course's forward; dQ, dK and dV are compared with float64 autograd
(causal and not, Sq < Sk and Sq > Sk, ragged lengths, one query, large scores, blocks of 16
queries over 64 keys), and on a GPU the backward is timed against the course's own.

It holds the stub, its hints, the problems (``_backward_cases``), the exact gradients and their
tolerances (``GRAD_TOL``). The helpers it shares with the forward exercises (where a check runs,
the problems' tensors, the float64 scores, the patched kernel module) are in
:mod:`exercises.attention`, which registers its exercises first (this module imports it), so the
notebook's cells keep their order; the interpreter's GPU-like precision is in
:mod:`exercises.triton_precision`. ``exercises/solutions/attention.py`` keeps the wrong answers.
"""

from __future__ import annotations

import torch

from exercises import compare, exercise
from exercises.attention_problems import (
    device_is_cpu,
    exact_scores,
    patched_module,
    ran_on,
    random_qkv,
    where_checked,
)
from exercises.triton_precision import expect_float32, quiet, watched

# the exercise closes this subsection; the course's own code is shown after it
SECTION_BACKWARD = "Write the dK/dV step"


BACKWARD_STUB = '''
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel: the program holds a block of BLOCK_N keys, k and v
    (BLOCK_N, D), and its float32 accumulators dk and dv (BLOCK_N, D); fold in BLOCK_M queries:
    q and do (BLOCK_M, D) in the input dtype, lse (BLOCK_M,) the forward's log-sum-exp of
    s · qk_scale in base 2, delta (BLOCK_M,) = rowsum(dO ∘ O). keys (BLOCK_N,) and rows
    (BLOCK_M,) are their indices; qk_scale = log2(e) / sqrt(D). When MASKED (the causal
    diagonal), query i sees key j only when j <= i. The kernel multiplies dk by 1 / sqrt(D)
    when it stores it. Return (dk, dv)."""
    ...
'''

DV_WRONG = ("dV = Pᵀ dO is wrong, so Pᵀ is: recompute it from the saved log-sum-exp, "
            "pt = exp2(dot(k, tl.trans(q)) · qk_scale − lse[None, :]) (keys along the rows, lse "
            "along the columns; exp2, since lse and qk_scale are in log2 units), then "
            "dv += dot(pt, do): pt is already (BLOCK_N, BLOCK_M); multiply with dot(a, b, IEEE) "
            "(tl.dot alone multiplies float32 in tf32)")
DK_WRONG = ("dV is right, so Pᵀ is; dK = dSᵀ Q is not: dSᵀ = Pᵀ ∘ (dPᵀ − Δ) with "
            "dPᵀ = V dOᵀ = dot(v, tl.trans(do)) and Δ one number per query, along the columns "
            "(delta[None, :]); then dk += dot(dst, q)")
DQ_WRONG = ("dK and dV are right, dQ is not: the course's dQ kernel reads only the forward's lse "
            "and Δ, so look at what your step changes besides dk and dv")
CAUSAL_BWD = ("right without a mask, wrong with one: on the causal diagonal (MASKED) query i "
              "sees key j only when j <= i: pt = tl.where(keys[:, None] <= rows[None, :], pt, "
              "0.0) before dV and dS use it")
LARGE_BWD = ("right on unit-sized scores, wrong on large ones: subtract lse inside the exponent, "
             "2^(s · qk_scale − lse), never 2^(s · qk_scale) / 2^lse, which overflows")
BLOCKS_BWD = ("right in 32 x 32 blocks, wrong in 16-query steps over 64-key blocks: keys run "
              "along the rows (BLOCK_N), queries along the columns (BLOCK_M); a product or a "
              "broadcast with the two swapped only works when they are equal")


def _backward_cases(device: str, dtype: torch.dtype):
    """(label, (q, k, v), causal, (dK/dV blocks, dQ blocks) or None, hint), simplest first."""
    def qkv(*shape, scale=1.0):
        return random_qkv(device, dtype, *shape, scale=scale)

    return [("one block 1x1x32x32, D=32", qkv(1, 1, 32, 32, 32), False, None, ""),
            ("ragged 1x2x77x77, D=64", qkv(1, 2, 77, 77, 64), False, None, ""),
            ("more keys than queries 1x1x20x70, D=16", qkv(1, 1, 20, 70, 16), False, None, ""),
            ("one query 1x2x1x50, D=64", qkv(1, 2, 1, 50, 64), False, None, ""),
            ("causal 1x2x130x130, D=32", qkv(1, 2, 130, 130, 32), True, None, CAUSAL_BWD),
            ("causal cross 1x1x40x97, D=64", qkv(1, 1, 40, 97, 64), True, None, CAUSAL_BWD),
            ("causal, queries past the keys 1x1x100x33, D=32", qkv(1, 1, 100, 33, 32), True,
             None, CAUSAL_BWD),
            ("causal, one query 1x2x1x40, D=16", qkv(1, 2, 1, 40, 16), True, None, CAUSAL_BWD),
            ("causal, large scores 1x1x96x96, D=64, |s| ~ 36", qkv(1, 1, 96, 96, 64, scale=6.0),
             True, None, LARGE_BWD),
            ("causal 1x2x90x70, D=32, 16-query steps over 64-key blocks",
             qkv(1, 2, 90, 70, 32), True, ((16, 64), (32, 32)), BLOCKS_BWD)]


def _exact_gradients(q, k, v, causal: bool, do) -> dict[str, torch.Tensor]:
    """dQ, dK, dV of softmax(q kᵀ / √D) v by float64 autograd."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    o = torch.softmax(exact_scores(q, k, v, causal), dim=-1) @ v
    o.backward(do.double())
    return {"dQ": q.grad, "dK": k.grad, "dV": v.grad}


# the largest error of each gradient, relative to its largest value: the course's backward
# stays under a tenth of these (fp32 exact products; fp16 rounds P and dS to 16 bits)
GRAD_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}


@exercise("attention.backward_dkdv", title="The backward's dK/dV step", stub=BACKWARD_STUB,
          answers=("dkdv_block",), section=SECTION_BACKWARD, isolated=True, intro="""
Write one step of the dK/dV kernel: `dkdv_block` of `triton_bwd.py`, with the same signature.
The program holds one block of keys and walks the queries; each step recomputes that block's
`Pᵀ` from the saved log-sum-exp and adds the queries' share to `dV = Pᵀ dO` and to
`dK = dSᵀ Q` (the kernel applies the `1/√D` when it stores `dK`), with `dPᵀ = V dOᵀ` and
`dSᵀ = Pᵀ ∘ (dPᵀ − Δ)`. Everything is transposed: keys along the rows, queries along the
columns, so `lse` and `delta` broadcast as `[None, :]`. Round `Pᵀ` and `dSᵀ` to the input's dtype
before their `dot` (the tensor cores want 16 bits). The check runs the lesson's forward, then its
backward with your step in it (a fresh copy of `triton_bwd.py`), and compares dQ, dK and dV with
float64 autograd: causal and not, Sq < Sk and Sq > Sk, ragged lengths, one query, large scores,
blocks of 16 queries over 64 keys.""")
def check_backward_dkdv(dkdv_block, report) -> None:
    from kernels.attention import triton_bwd, triton_fwd

    device, dtypes = where_checked()
    seen: list[str] = []
    module = patched_module(triton_bwd, "dkdv_block", watched(dkdv_block, ("dk", "dv"), seen))
    checked = 0
    for dtype in dtypes:
        tol = GRAD_TOL[dtype]
        for label, tensors, causal, blocks, why in _backward_cases(device, dtype):
            q, k, v = tensors
            do = torch.randn(q.shape, device=device).to(dtype)
            o, lse2 = quiet(triton_fwd.forward, q, k, v, causal)  # the course's forward
            configs = None if blocks is None else tuple(module.Config(*b) for b in blocks)
            got = dict(zip(("dQ", "dK", "dV"),
                           quiet(module.backward, q, k, v, o, lse2, do, causal,
                                  configs=configs), strict=True))
            expect_float32(seen, "dkdv_block", f"{label} {str(dtype).removeprefix('torch.')}")
            exact = _exact_gradients(q, k, v, causal, do)
            # errors relative to each gradient's largest value (a hundredth of the largest of
            # the three where one is all but zero: one causal query has dQ = 0)
            floor = 1e-2 * max(e.abs().max().item() for e in exact.values())
            for name, hint in (("dV", DV_WRONG), ("dK", DK_WRONG), ("dQ", DQ_WRONG)):
                scale = max(exact[name].abs().max().item(), floor)
                compare(got[name], exact[name].to(dtype),
                        what=f"{label} {str(dtype).removeprefix('torch.')}: {name}",
                        atol=tol * scale, rtol=tol, hint=why or hint)
            checked += 1
    report.line(f"dQ, dK and dV within {', '.join(f'{GRAD_TOL[d]:g}' for d in dtypes)} of "
                f"float64 autograd (relative to the largest) on {checked // len(dtypes)} "
                f"problems (causal and not, Sq != Sk both ways, ragged, one query, large "
                f"scores); {ran_on(device, dtypes)}")
    if not device_is_cpu():
        from course_utils import timing

        q, k, v, do = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16)
                       for _ in range(4))
        o, lse2 = triton_fwd.forward(q, k, v, False)
        mine = timing.benchmark(lambda: module.backward(q, k, v, o, lse2, do, False),
                                device="cuda").median
        ours = timing.benchmark(lambda: triton_bwd.backward(q, k, v, o, lse2, do, False),
                                device="cuda").median
        report.line(timing.verdict("your backward ≥ 0.9× the course's", f"{ours / mine:.2f}×",
                                   ours / mine >= 0.9, "B=4, H=16, S=4096, D=128, bf16, same "
                                   "run"))
