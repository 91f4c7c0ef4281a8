"""Exercise attention_variants.flash_triton of lesson 14, the second half of its assignment:
FlashAttention-2 whole in Triton, forward and backward, from an empty cell with only the
interface given (the first half, attention_variants.flash_tiles, is the same algorithm in
PyTorch tiles: :mod:`exercises.attention_tiles`).

The check runs the student's ``torch.autograd.Function`` on the problems of
:mod:`exercises.attention_triton_checks` against float64, with flash_tiles' reference,
tolerances and verdicts that name the mistake; in Triton's interpreter (a CPU) every address of
every launch is checked, the programs run shuffled, a race between programs is named, and two
problems run twice, bit for bit. On a GPU it runs compiled in a child process (a wrong kernel
may fault), with bfloat16 and larger problems, and prints one speed line beside the course's
registered Triton attention and SDPA. ``exercises/solutions/attention_triton.py`` keeps the
solution and the wrong answers.
"""

from __future__ import annotations

import torch

from course_utils import env
from exercises import exercise, expect
from exercises.attention_tiles import speed_line
from exercises.attention_triton_checks import (
    check_problem,
    expect_head_dims,
    problems,
    repeated,
)

# the subsection of the assignment this exercise closes
SECTION_TRITON = "then in Triton"

TRITON_STUB = '''
import math

import torch
import triton
import triton.language as tl

# your @triton.jit kernels here: the forward, and the backward's dK/dV (and dQ)


class TritonFlashAttention(torch.autograd.Function):
    """softmax(q kᵀ / √D) v by Triton kernels: q (B, H, Sq, D), k and v (B, H, Sk, D);
    causal: query i sees key j when j <= i. Called as
    TritonFlashAttention.apply(q, k, v, causal)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        """out (B, H, Sq, D) in q's dtype from your forward kernel (a program per tile of
        queries, the online softmax over tiles of keys); ctx.save_for_backward(q, k, v, out, L),
        L (B, H, Sq) float32, the log-sum-exp of each query's scaled scores (base e or 2)."""
        ...

    @staticmethod
    def backward(ctx, do):
        """(dq, dk, dv, None) from your kernels: dK and dV by a program per tile of keys; dQ
        by a kernel of its own over tiles of queries, or tl.atomic_add."""
        ...
'''


@exercise("attention_variants.flash_triton", title="FlashAttention-2 from an empty file, in "
          "Triton", stub=TRITON_STUB, answers=("TritonFlashAttention",), section=SECTION_TRITON,
          isolated=True, intro="""
Write `TritonFlashAttention`, a `torch.autograd.Function` whose forward and backward launch
Triton kernels you write in the cell (`@triton.jit`, launched `kernel[grid](...)`): nothing of the
course's kernels imported, nothing of the work in PyTorch operations.

- **Inputs** as in flash_tiles: q `(B, H, Sq, D)`, k and v `(B, H, Sk, D)`, any strides,
  float32, float16 or bfloat16; `causal` a bool; scale `1/√D`; causal aligned top-left
  (query i sees key j when `j <= i`, whatever Sq and Sk). **D** is 16, 32, 64 or 128
  (`tl.arange` needs a power of two); any other D raises `ValueError` naming `q`. Sk may be 0:
  output 0, gradients 0, never NaN.
- **Forward**: a program per tile of `BLOCK_M` queries of one (batch, head) walks the keys in
  tiles of `BLOCK_N` (powers of two from 16 to 128, your choice: the check's lengths are
  ragged for all of them) with the online softmax in float32 (m from −∞, l, the accumulator
  rescaled); the ragged last tile and the causal diagonal masked, in the loads and in the
  scores. float32 inputs multiply exactly (`tl.dot(..., input_precision="ieee")`); 16-bit
  inputs round P to their dtype for the second `tl.dot`. `ctx.save_for_backward(q, k, v, out,
  L)`, L `(B, H, Sq)` float32 (base e, or base 2 as `exp2` wants). No tensor of the `(Sq, Sk)`
  scores, in memory or in a program (a tile as wide as Sk).
- **Backward**: `Δ = rowsum(dO ∘ O)` (in a kernel, or one PyTorch product and sum), then a
  dK/dV kernel, a program per tile of keys walking the queries that see them, with
  `P = exp(S − L)` (no row maximum again); dQ either by a kernel of its own over tiles of
  queries (the course's choice, `triton_bwd.py`) or summed with `tl.atomic_add` from the dK/dV
  kernel (into float32). Return `(dq, dk, dv, None)` in the inputs' dtypes.
- **Determinism**: out, L, dK and dV must come out the same bit for bit when the programs run
  in another order; dQ is held to the tolerance only (atomics are allowed there, nowhere else).
  Two programs of one launch storing the same element with `tl.store` is a race.

The check runs in Triton's interpreter on a CPU (float32 and float16; bf16 `tl.dot` is wrong
there, so bfloat16 waits for a GPU), about a second a problem, with flash_tiles' float64
reference on 19 problems: one tile, ragged tiles both ways, one query, one key, no keys, causal
with Sq < Sk and Sq > Sk, D of 16, 32, 64 and 128, B ≠ H, (B, S, H, D) strides, a stride of 2
along D, a transposed dO, scores near −200 and of several hundred. Every load and store is
checked against the launch's tensors (NaN-fenced), masked-off lanes of a load without `other=`
read as NaN, each launch's programs run in a shuffled order, and two problems run twice. On a
GPU it runs compiled, adds bfloat16 and larger problems, and prints your forward + backward
time beside the course's Triton kernel and SDPA.""")
def check_flash_triton(TritonFlashAttention, report) -> None:
    cls = TritonFlashAttention
    expect(isinstance(cls, type) and issubclass(cls, torch.autograd.Function),
           f"TritonFlashAttention is {type(cls).__name__}, not a torch.autograd.Function",
           "keep the class of the stub: class TritonFlashAttention(torch.autograd.Function)")
    gpu = env.HAS_CUDA and not env.TRITON_INTERPRET
    device = "cuda" if gpu else "cpu"
    passed: set[str] = set()
    cases = problems(device)
    for number, case in enumerate(cases):
        check_problem(cls, case, passed, seed=7 * number, device=device)
        if case.dtype == torch.float32:
            passed.add("large" if case.kind == "large" else
                       "one tile" if case.sk <= 64 and not case.causal else case.kind)
    refused = expect_head_dims(cls)
    dtypes = "float32, float16 and bfloat16" if gpu else "float32 and float16"
    where = (f"compiled on {torch.cuda.get_device_name()}, inputs NaN-fenced" if gpu else
             "in Triton's interpreter on the CPU (bfloat16 is checked on a GPU: the "
             "interpreter computes bf16 tl.dot wrongly), every load and store inside its "
             "tensor, each launch's programs in a shuffled order, no two programs storing one "
             "element")
    twice = sum(map(repeated, cases))
    report.line(f"out, the saved L and dq, dk, dv right against float64 on {len(cases)} "
                f"problems ({dtypes}, to flash_tiles' tolerances); out, L, dk and dv the same "
                f"bit for bit on a second run of {twice} problems; all the work in Triton, no "
                f"tile as wide as Sk at 300 × 260; {refused}; checked {where}")
    if gpu:
        report.line(speed_line(cls))
    else:
        report.line("speed: needs a GPU (the interpreter's times say nothing of a kernel's)")
