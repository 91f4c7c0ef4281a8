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

import torch

from course_utils import env
from exercises import exercise, expect
from exercises.attention_tiles_checks import check_case, check_forward, check_gradients
from exercises.attention_tiles_problems import BLOCK, Case, problems, raised

# the exercise closes this subsection of the assignment's section
SECTION_TILES = "Write FlashAttention-2 in tiles"

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


# ---- the check ---------------------------------------------------------------------------------


def speed_line(cls) -> str:
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
    cases = problems()
    for case in cases:
        check_case(FlashAttention, case, passed)
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
                raise raised(case, "forward or backward", err) from None
            lse = check_forward(case, out, q.cpu(), k.cpu(), v.cpu(), passed)
            check_gradients(case, FlashAttention, q, k, v, do, lse.to("cuda"))
        line += f"; also on {torch.cuda.get_device_name()} (2 problems)"
    report.line(line + "; checked in PyTorch on the CPU")
    report.line(speed_line(FlashAttention))
