"""Exercise hopper_backward.quantize of lesson 19: the per-block fp8 quantiser, ``quantize_kernel``
of ``kernels/scaled_attention/quantize.py``, a whole ``@triton.jit`` kernel with the module's
signature.

The check launches your kernel as :func:`~kernels.scaled_attention.quantize.quantize_blocks`
does (one program per block of ``SCALE_BLOCK`` rows of one (batch, head)) on awkward problems (S
not a multiple of 128, S < 128, D = 80, an all-zero block and one of values ~1e-30, an outlier
token, keys-contiguous V, B·H > 1 with non-contiguous strides, bf16 input) and holds it to
:func:`~kernels.scaled_attention.quantize.quantize_blocks_torch`: every scale within 2^-22 of
the reference's (a rounding or two of float32), every value within half an e4m3 step of ``x /
scale`` (what rounding to nearest allows). Not bit for bit: compiled, Triton's ``/`` on float32
is an approximate division (the course's kernel calls ``tl.math.div_rn`` to match the
reference's bits), so a right answer may differ from the reference in the last bit of a scale
and, where ``x / scale`` lies at a rounding tie, by one e4m3 step; the report says how many
values came out equal bit for bit. In Triton's interpreter every access is checked against the
launch's tensors (:mod:`exercises.triton_checks`), and the addresses are checked where a batch
or head starts past 2^31 elements, with the strides of such a tensor and no memory touched
(:mod:`exercises.hopper_backward_quantize_wide`: int32 offsets wrap around there); on a GPU an
interpreted copy runs first, then the compiled kernel, in a child process (a wrong address may
fault). ``exercises/solutions/hopper_backward.py`` keeps the wrong answers.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils import env
from exercises import CannotCheck, Mismatch, exercise, expect
from exercises.hopper_backward_quantize_wide import expect_wide_offsets
from exercises.triton_checks import (
    expect_in_bounds,
    interpreted,
    masked_loads_without_other,
    nan_fenced,
)

# the exercise closes this section of the lesson
SECTION_QUANTIZE = "fp8 attention with per-block scales"

QUANTIZE_STUB = '''
import triton
import triton.language as tl

# given: e4m3 rounding as the GPU does it, for the interpreter (whose own cast is wrong)
from kernels.scaled_attention.quantize import e4m3_grid


@triton.jit
def quantize_kernel(x_ptr, x8_ptr, scale_ptr, seq, head_dim, n_heads, n_blocks,
                    sxb, sxh, sxs, sxd, s8b, s8h, s8s, s8d, SCALE_FLOOR: tl.constexpr,
                    E4M3_MAX: tl.constexpr, SCALE_BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    """Program (block, bh) of the grid (n_blocks, B·H): rows block·SCALE_BLOCK ... of the
    (batch, head) bh = b·n_heads + h of x (seq rows of head_dim values; strides sx*), whose
    head_dim fits in BLOCK_D (a power of 2). Store the block's scale, max(largest |x| / E4M3_MAX,
    SCALE_FLOOR), at scale_ptr + bh·n_blocks + block, and x / scale, clamped to ±E4M3_MAX, as
    e4m3 at x8 (strides s8*; V's x8 is keys-contiguous). Before the cast, under INTERPRETED,
    round as the GPU does: y = tl.where(y < 0, -e4m3_grid(-y), e4m3_grid(y))."""
    ...
'''

WHOLE = ("each block of SCALE_BLOCK rows of a head has a scale of its own, from its own largest "
         "|x|: with one scale for the whole tensor (or head) an outlier token pushes every other "
         "block's small values below e4m3's 2^-6, where they lose bits or become 0")
PADDING = ("the rows past seq and the columns past head_dim must load as 0 (other=0.0): 0 "
           "changes no block's largest |x|, any other value may become it")
FLOOR = ("every block whose amax / 448 is below SCALE_FLOOR takes the floor as its scale, "
         "tl.maximum(amax / E4M3_MAX, SCALE_FLOOR): an all-zero block (amax 0, or x / scale is "
         "0 / 0 = NaN), and a block of values ~1e-30 too (amax / 448 ~ 2e-33, whose inverse "
         "float32 cannot hold)")
INT64 = ("the batch and head offsets pass 2^31 elements in a large tensor (16 × 32 × 32768 × "
         "128 is 2^31): tl.program_id and the strides below 2^31 are int32, and an int32 "
         "product wraps around; make b and h int64 (.to(tl.int64)) before they multiply the "
         "strides")
FORMAT_MAX = ("the scale maps the block's largest |x| onto e4m3's largest value, E4M3_MAX = 448; "
              "240 is e4m3fnuz's (AMD) and 127 int8's: they waste more than a bit of range")
DIVIDE = ("x8 = x / scale (so the block's largest |x| lands on 448 and x ≈ x8 · scale); x · scale "
          "makes every value tiny, and most of them round to 0")
PER_ROW = ("one scale per block, from the largest |x| over all its rows and columns "
           "(tl.max over both axes) before dividing: here every row reached 448 on its own, a "
           "scale per row that the stored scale does not describe")
PER_COLUMN = ("one scale per block of rows, from the largest |x| over the whole block (rows and "
              "head dim): here every column reached 448 on its own, a scale per column that the "
              "one stored scale does not describe")
STRIDES = ("address x8 with its own strides s8b, s8h, s8s, s8d (and x with sxb ... sxd): V's x8 "
           "is keys-contiguous, (B, H, D, S) memory seen as (B, H, S, D), and x may be a view "
           "that is not contiguous")
SCALE_AT = ("the scale of block `block` of head bh goes to scale_ptr + bh · n_blocks + block "
            "(scale is a contiguous (B, H, n_blocks) tensor)")
VALUES = ("x8 = x / scale clamped to ±E4M3_MAX, rounded once to e4m3 (under INTERPRETED through "
          "e4m3_grid), stored for every row < seq and column < head_dim")

# x ≈ x8 · scale holds to half an e4m3 step: 2^-4 of |x / scale| from 2^-6 up, 2^-10 below
HALF_STEP, HALF_SUBNORMAL = 2.0**-4, 2.0**-10
SCALE_RTOL = 2.0**-22  # a rounding or two of float32 (an approximate division)


def _x(*shape, dtype=torch.float32, device="cpu"):
    return (0.1 * torch.randn(*shape)).to(dtype).to(device)


def _cases(device: str):
    """(label, x, keys_contiguous), simplest first: values ~0.1, so a padding that loads 1
    becomes a block's largest |x|."""
    ragged = _x(1, 1, 300, 64, device=device)
    ragged[:, :, 256:] *= 0.01  # the last, ragged block's values are small
    zero = _x(1, 2, 384, 64, device=device)
    zero[:, 1, 128:256] = 0
    zero[:, 0, 128:256] *= 1e-29  # values ~1e-30: amax / 448 far below SCALE_FLOOR (2^-60)
    spike = _x(1, 2, 384, 64, device=device)
    spike[0, 0, 300] *= 1000  # one outlier token, in the last block of head 0
    strided = _x(2, 200, 3, 48, dtype=torch.bfloat16, device=device).transpose(1, 2)
    columns = _x(1, 2, 64, 150, device=device).transpose(2, 3)  # x's own stride along D is S
    return [("S = 300 (3 blocks, the last of 44 rows with small values), D = 64, 1x1",
             ragged, False),
            ("S = 50 < 128, D = 80 (not a power of 2), 1x2", _x(1, 2, 50, 80, device=device),
             False),
            ("an all-zero block (head 1, rows 128-255) and a block of values ~1e-30 (head 0, "
             "rows 128-255), S = 384, D = 64, 1x2", zero, False),
            ("an outlier token 1000x the others (head 0, row 300), S = 384, D = 64, 1x2", spike,
             False),
            ("V keys-contiguous (x8 (B, H, D, S) memory), S = 200, D = 64, 2x2",
             _x(2, 2, 200, 64, device=device), True),
            ("B·H = 6, x a non-contiguous (B, S, H, D) view, bf16, S = 200, D = 48", strided,
             False),
            ("x keys-contiguous too ((B, H, D, S) memory), S = 150, D = 64, 1x2", columns,
             False)]


def _run(kernel, x: torch.Tensor, keys_contiguous: bool, interpreting: bool):
    """``(x8, scale)`` from ``kernel`` launched as ``quantize_blocks`` launches it, the scale
    and x8 between NaN fences (a store outside them is out of bounds)."""
    from kernels.scaled_attention import quantize as q
    from kernels.scaled_matmul import E4M3
    from kernels.triton_launch import next_power_of_2

    b, h, s, d = x.shape
    n = q.scale_blocks(s)
    scale = nan_fenced(b * h * n, torch.float32, x.device).view(b, h, n)
    memory = nan_fenced(b * h * s * d, E4M3, x.device)
    x8 = (memory.view(b, h, d, s).transpose(2, 3) if keys_contiguous
          else memory.view(b, h, s, d))
    with np.errstate(all="ignore"):
        kernel[(n, b * h)](x, x8, scale, s, d, h, n, *x.stride(), *x8.stride(),
                           SCALE_FLOOR=q.SCALE_FLOOR, E4M3_MAX=q.E4M3_MAX,
                           SCALE_BLOCK=q.SCALE_BLOCK, BLOCK_D=next_power_of_2(d),
                           INTERPRETED=interpreting)
    return x8, scale


def _blocks(t: torch.Tensor, n: int) -> torch.Tensor:
    """(B, H, S, D) float64 padded with zeros to (B, H, n, SCALE_BLOCK, D)."""
    from kernels.scaled_attention.quantize import SCALE_BLOCK

    b, h, s, d = t.shape
    padded = torch.zeros(b, h, n * SCALE_BLOCK, d, dtype=torch.float64)
    padded[:, :, :s] = t
    return padded.view(b, h, n, SCALE_BLOCK, d)


def _hint(x, y, got, want, keys_contiguous: bool) -> str:
    """The mistake that explains a wrong (x8, scale): ``y`` float64 x8 on the CPU, ``got`` and
    ``want`` the student's and the reference's scales (float64)."""
    from kernels.scaled_attention.quantize import E4M3_MAX, SCALE_BLOCK, SCALE_FLOOR

    n = want.shape[-1]
    xs, ys = _blocks(x, n), _blocks(y, n)
    b, h, s, d = x.shape
    padded = torch.zeros_like(want, dtype=torch.bool)
    padded[..., -1] = s % SCALE_BLOCK != 0
    padded |= d & (d - 1) != 0  # BLOCK_D > head_dim: padding columns in every block
    if (padded & got.isnan()).any():
        return PADDING  # (a masked load without other=: its masked-off lanes are undefined)
    zero = want == SCALE_FLOOR
    if zero.any() and ((got[zero] < SCALE_FLOOR * (1 - SCALE_RTOL)) | got[zero].isnan()
                       | ys[zero].isnan().any(-1).any(-1)).any():
        return FLOOR
    live = ~zero & got.isfinite() & (got > 0)
    ratio = (got[live] / want[live]).median().item() if live.any() else float("nan")
    if any(abs(ratio - E4M3_MAX / m) < 1e-3 for m in (240.0, 127.0)):
        return FORMAT_MAX
    heads = want.amax(-1, keepdim=True)
    if n > 1 and torch.allclose(got, heads.expand_as(got), rtol=1e-6) or torch.allclose(
            got, want.max().expand_as(got), rtol=1e-6):
        return WHOLE
    if (padded & live & (got > want * (1 + 1e-3))).any():
        return PADDING
    if keys_contiguous or not x.is_contiguous():
        # the earlier cases (contiguous x and x8) passed: x8 stored with x's strides (or x read
        # with x8's) puts the values in the wrong places
        return STRIDES
    if not (torch.allclose(got, want, rtol=1e-5) or got.isnan().any()):
        return SCALE_AT if torch.allclose(got.flatten().sort()[0], want.flatten().sort()[0],
                                          rtol=1e-5) else WHOLE
    peak = ys.abs().amax(dim=(-2, -1))
    if (live & (peak < E4M3_MAX / 8)).any():
        return DIVIDE
    nonzero_rows = xs.abs().amax(-1) > 0
    row_peak = ys.abs().amax(-1)
    if (row_peak[nonzero_rows] == E4M3_MAX).float().mean() > 0.9:
        return PER_ROW
    cols = xs.abs().amax(-2) > 0
    if (ys.abs().amax(-2)[cols] == E4M3_MAX).float().mean() > 0.9:
        return PER_COLUMN
    return VALUES


def _expect_case(label: str, x, x8, scale, keys_contiguous: bool) -> int:
    """Mismatch unless ``(x8, scale)`` is ``x`` quantised; the number of values equal to the
    reference's bit for bit."""
    from kernels.scaled_attention.quantize import SCALE_BLOCK, quantize_blocks_torch

    x = x.cpu()
    want8, want = quantize_blocks_torch(x, keys_contiguous=keys_contiguous)
    want = want.double()
    got = scale.detach().cpu().double()
    y = x8.detach().cpu().float().double()
    xd = x.double()
    b, h, s, d = x.shape
    per_row = got.repeat_interleave(SCALE_BLOCK, -1)[..., :s, None]
    scale_ok = ((got - want).abs() <= SCALE_RTOL * want).all().item()
    exact = xd / per_row
    err = (y - exact).abs()
    bound = torch.maximum(HALF_STEP * exact.abs(), torch.full_like(exact, HALF_SUBNORMAL))
    values_ok = bool((err <= bound * (1 + 2.0**-16)).all())  # (NaN fails too)
    if scale_ok and values_ok:
        return int((x8.detach().cpu().view(torch.uint8)
                    == want8.view(torch.uint8)).sum())
    hint = _hint(xd, y, got, want, keys_contiguous)
    if not scale_ok:
        bad = ~((got - want).abs() <= SCALE_RTOL * want)
        i, j, k = (int(v) for v in bad.nonzero()[0])
        raise Mismatch(f"{label}: the scale of block {k} (rows {k * SCALE_BLOCK}-"
                       f"{min((k + 1) * SCALE_BLOCK, s) - 1}) of batch {i}, head {j} is "
                       f"{got[i, j, k].item():.6g}, the block's largest |x| / 448 (at least "
                       f"SCALE_FLOOR) is {want[i, j, k].item():.6g}", hint)
    bad = ~(err <= bound * (1 + 2.0**-16))
    i, j, r, c = (int(v) for v in bad.nonzero()[0])
    raise Mismatch(f"{label}: x8[{i}, {j}, {r}, {c}] is {y[i, j, r, c].item():.6g}, but x / "
                   f"scale there is {exact[i, j, r, c].item():.6g} (x = "
                   f"{xd[i, j, r, c].item():.6g}, the block's scale {got[i, j, r // SCALE_BLOCK]}"
                   f"); the reference stores {want8[i, j, r, c].float().item():.6g} there "
                   f"({int(bad.sum())} value(s) off by more than half an e4m3 step)", hint)


def _check_all(kernel, device: str, interpreting: bool) -> tuple[list[str], int, int]:
    labels, same, total = [], 0, 0
    for label, x, keys_contiguous in _cases(device):
        found = {}

        def run(x=x, keys_contiguous=keys_contiguous, found=found):
            found["out"] = _run(kernel, x, keys_contiguous, interpreting)

        if interpreting:
            unchecked = expect_in_bounds(run, f"{label}: your kernel")
            if unchecked:  # this Triton cannot interpret a copy (the GPU's compiled run checks)
                return [unchecked], 0, 0
        else:
            run()
        same += _expect_case(label, x, *found["out"], keys_contiguous)
        total += x.numel()
        labels.append(label)
    return labels, same, total


@exercise("hopper_backward.quantize", title="Quantise to fp8, a scale per block of 128 tokens",
          stub=QUANTIZE_STUB, answers=("quantize_kernel",), section=SECTION_QUANTIZE,
          isolated=True, intro="""
Write `quantize_kernel` of `kernels/scaled_attention/quantize.py`, what `quantize_qkv` runs on
Q, K and V before the fp8 forward. One program per block of `SCALE_BLOCK` = 128 rows (tokens) of
one (batch, head): load the block (rows past `seq` and columns past `head_dim` masked, reading
0, so that they cannot be its largest value), take its largest `|x|`, store the scale
`max(amax / 448, SCALE_FLOOR)`, and store `x / scale` clamped to ±448 as e4m3, every address
through its tensor's own strides (V's `x8` is keys-contiguous: the same code, other strides),
in int64 where it can pass 2³¹ elements (a batch or head offset of a large tensor).
The docstring gives the grid, where each scale goes, and the line that rounds to e4m3 under the
interpreter (`e4m3_grid`, given: the interpreter's own cast is wrong).

The check holds your kernel to `quantize_blocks_torch`, the PyTorch reference, on S = 300
(ragged), S = 50, D = 80, an all-zero block and a block of values ~1e-30 (both below the
floor), an outlier token 1000× the others, keys-contiguous V, and six heads of a non-contiguous
bf16 view; in the interpreter every load and store is checked against the tensors, and its
addresses where batch or head 2 starts at element 2³¹ (the strides of such a tensor, with no
memory touched). Not bit for bit: each scale must be within 2⁻²² of
the reference's and each value within half an e4m3 step of `x / scale`, because compiled,
Triton's `/` is an approximate division that may differ from the reference's IEEE one in the
last bit (`tl.math.div_rn` is the IEEE one); the report counts the values that came out
identical. `tl.max` over both axes, `tl.maximum`, `tl.clamp` and `.to(x8_ptr.dtype.element_ty)`
are all it takes.""")
def check_quantize(quantize_kernel, report) -> None:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    expect(isinstance(quantize_kernel, JITFunction | InterpretedFunction),
           f"quantize_kernel expected a @triton.jit kernel, got "
           f"{type(quantize_kernel).__name__}", "keep @triton.jit on quantize_kernel: the check "
           "launches it as quantize_blocks does")
    if lines := masked_loads_without_other(quantize_kernel):
        # (the interpreter's NaN for those lanes is dropped by tl.max, compiled they are often 0:
        # the values alone would pass it)
        raise Mismatch(f"line {lines[0]} of quantize_kernel (from @triton.jit): a masked tl.load "
                       "without other=: its masked-off lanes (rows past seq, columns past "
                       "head_dim) hold undefined values, and the block's largest |x| takes them "
                       "in", PADDING)
    if env.TRITON_INTERPRET:
        labels, same, total = _check_all(quantize_kernel, "cpu", True)
        wide = expect_wide_offsets(quantize_kernel, INT64, STRIDES)
        where = "checked in Triton's interpreter on the CPU, every access inside the tensors"
    elif env.HAS_CUDA:
        first, _, _ = _check_all(interpreted(quantize_kernel), "cpu", True)  # every address
        labels, same, total = _check_all(quantize_kernel, "cuda", False)
        if first[0].startswith("not verified"):  # (no interpreted copy on this Triton)
            memory = first[0]
            wide = ("not verified on this machine: the addresses past 2^31 elements (they are "
                    "checked on an interpreted copy of your kernel)")
        else:
            memory = "every access inside the tensors in Triton's interpreter"
            wide = expect_wide_offsets(interpreted(quantize_kernel), INT64, STRIDES)
        where = f"{memory}; compiled on {torch.cuda.get_device_name()}"
    else:
        raise CannotCheck("Triton needs a CUDA GPU or its interpreter (TRITON_INTERPRET=1)")
    expect(total > 0, "no case ran", VALUES)
    report.line(f"scales and e4m3 values right on {len(labels)} problems (ragged S, S < 128, "
                f"D = 80, an all-zero block and one of values ~1e-30, an outlier, "
                f"keys-contiguous V, a non-contiguous bf16 view); {same} of {total} values "
                f"equal to the reference bit for bit; {where}")
    report.line(wide)
