"""Exercise attention_variants.combine_splits of lesson 14: the merge of split-KV decoding's
partial results
(``combine_splits`` of ``kernels/attention/triton_decode.py``), a ``@triton.jit`` function that
``combine_kernel`` calls once per query row.

The check first runs a probe kernel that calls your function as ``combine_kernel`` does (one
program per row, the partial results in the forward's layout) on partial results it made up,
and compares each row's output and log-sum-exp with float64: one split, splits that fill
``BLOCK_S`` and ragged ones that do not, splits that saw no key (``lse_s = −inf``), rows where
every split is empty, log-sum-exps far past float32's exponents both ways, D = 64 and 128. Past
the last split lies one more, poisoned (it would dominate the merge), so a read beyond
``splits`` shows in the values. Only then does it run the decoding forward with your function in
it against float64 attention (groups packed, keys split with a ragged last split, causal ranges
that see no key). ``exercises/solutions/attention_combine.py`` keeps the wrong answers.
"""

from __future__ import annotations

import math

import torch

from exercises import compare, exercise, load_cell
from exercises.attention_problems import LN2, patched_module, ran_on, where_checked
from exercises.triton_precision import quiet

# the exercise closes this subsection of section 3
SECTION_COMBINE = "Write the merge of the splits"

COMBINE_STUB = '''
import triton
import triton.language as tl


@triton.jit
def combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM: tl.constexpr,
                   BLOCK_S: tl.constexpr):
    """Query row `row`'s output and log-sum-exp, merged from its `splits` partial results.
    Split s (0 <= s < splits) left O_s, HEAD_DIM float32 values normalised by its own sum, at
    part_o_ptr + (s * rows_total + row) * HEAD_DIM, and lse_s (float32, base 2: log2 of its sum
    of 2^scores) at part_lse_ptr + s * rows_total + row; lse_s = -inf when the split saw no key
    (its O_s is 0). BLOCK_S is a power of 2, >= splits. Return (o, lse): o (HEAD_DIM,) float32
    = sum_s 2^(lse_s - lse) * O_s and lse = log2 sum_s 2^lse_s; when every split is empty,
    o = 0 and lse = -inf."""
    ...
'''

FORMULA = ("each O_s is normalised by its own sum 2^lse_s: weigh it by w_s = 2^(lse_s − m) "
           "(tl.math.exp2, the lse are base 2), O = Σ w_s·O_s / Σ w_s, lse = m + log2(Σ w_s), "
           "with m = max_s lse_s added back")
LANES = ("BLOCK_S is a power of 2 ≥ splits: the lanes s >= splits must weigh nothing, so load "
         "their lse with mask=s < splits, other=float('-inf') (2^−inf = 0; other=0.0 weighs "
         "2^0 = 1), and read no split past splits − 1")
EMPTY = ("a split that saw no key has lse_s = −inf and weighs 2^−inf = 0; when every split is "
         "empty the max is −inf too, and −inf − (−inf) is NaN: subtract 0 instead "
         "(tl.where(m == float('-inf'), 0.0, m)) and divide by 1 where the total is 0, so O = 0 "
         "and lse = −inf")
RANGE = ("2^lse_s overflows float32 past lse_s = 128 and is 0 below −149: subtract the largest "
         "lse_s before exp2 (the largest weight is then 1) and add it back to the log")

POISON_LSE = 1.0e4  # the split past the last one: it would outweigh every real split
POISON_O = 1.0e3


def _lse(gen, rows: int, splits: int, scale: float = 3.0, shift: float = 0.0, empty=()):
    """(splits, rows) base-2 log-sum-exps, ``scale``-sized around ``shift``; the (split, row)
    pairs of ``empty`` saw no key (``-inf``)."""
    lse = shift + scale * torch.randn(splits, rows, dtype=torch.float64, generator=gen)
    for s, r in empty:
        lse[s, r] = float("-inf")
    return lse


def _empty_rows(splits: int, rows) -> list[tuple[int, int]]:
    return [(s, r) for r in rows for s in range(splits)]


# (label, lse (splits, rows), HEAD_DIM, BLOCK_S or None = the kernel's, what a mismatch shows)
def _cases(gen):
    return [
        ("4 splits, lse ~ ±3, D=64", _lse(gen, 5, 4), 64, None, FORMULA),
        ("one split, D=64", _lse(gen, 4, 1), 64, None, LANES),
        ("3 splits (a ragged BLOCK_S of 4), D=128", _lse(gen, 5, 3), 128, None, LANES),
        ("13 splits (BLOCK_S 16), D=64", _lse(gen, 3, 13), 64, None, LANES),
        ("4 splits in a BLOCK_S of 16, D=64", _lse(gen, 3, 4), 64, 16, LANES),
        ("6 splits, lse ~ 3000 ± 20 (2^lse overflows float32), D=128",
         _lse(gen, 4, 6, scale=20.0, shift=3000.0, empty=[(2, 2)]), 128, None, RANGE),
        ("6 splits, lse ~ −3000 ± 20 (2^lse underflows), D=64",
         _lse(gen, 4, 6, scale=20.0, shift=-3000.0, empty=[(5, 0)]), 64, None, RANGE),
        ("7 splits, lse from −200 to 200, D=128",
         torch.linspace(-200.0, 200.0, 7 * 3, dtype=torch.float64).view(3, 7).T.contiguous(),
         128, None, RANGE),
        ("5 splits, some that saw no key (lse −inf), D=64",
         _lse(gen, 4, 5, empty=[(0, 0), (4, 0), (1, 1), (2, 1), (3, 1), (4, 1), (2, 3)]), 64,
         None, EMPTY),
        ("3 splits, rows 1 and 3 saw no key at all, D=128",
         _lse(gen, 4, 3, empty=_empty_rows(3, (1, 3))), 128, None, EMPTY),
        ("one split that saw no key, D=64", _lse(gen, 2, 1, empty=[(0, 1)]), 64, None, EMPTY),
    ]


_PROBE = '''
import triton
import triton.language as tl


@triton.jit
def combine_probe(part_o_ptr, part_lse_ptr, o_ptr, lse_ptr, splits, rows_total,
                  HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr):
    # combine_kernel's program: one row, your merge, then stored where the check reads it
    row = tl.program_id(0).to(tl.int64)
    o, lse = combine_splits(part_o_ptr, part_lse_ptr, row, splits, rows_total, HEAD_DIM,
                            BLOCK_S)
    tl.store(o_ptr + row * HEAD_DIM + tl.arange(0, HEAD_DIM), o)
    tl.store(lse_ptr + row, lse)
'''


def exact(part_o: torch.Tensor, lse: torch.Tensor):
    """float64 ``(O, lse)`` of the merge: ``part_o`` ``(splits, rows, D)``, ``lse``
    ``(splits, rows)`` base 2; a row of empty splits gives ``O = 0``, ``lse = -inf``."""
    total = torch.logsumexp(lse * LN2, 0) / LN2
    w = torch.exp2(lse - total.nan_to_num(neginf=0.0))  # 0 where a split (or the row) is empty
    return (w[..., None] * part_o).sum(0), total


def _merged(probe, gen, lse: torch.Tensor, d: int, block_s: int | None, device: str):
    """(what your merge gives, what float64 gives) for the partial results of ``lse``."""
    splits, rows = lse.shape
    part_o = torch.randn(splits, rows, d, dtype=torch.float64, generator=gen)
    part_o[lse == float("-inf")] = 0.0  # as the forward leaves a split that saw no key
    # one split more, poisoned: a merge that reads it comes out near POISON_O
    fenced_o = torch.full((splits + 1, rows, d), POISON_O, dtype=torch.float32, device=device)
    fenced_lse = torch.full((splits + 1, rows), POISON_LSE, dtype=torch.float32, device=device)
    fenced_o[:splits] = part_o.float()
    fenced_lse[:splits] = lse.float()
    o = torch.empty(rows, d, dtype=torch.float32, device=device)
    got_lse = torch.empty(rows, dtype=torch.float32, device=device)
    block = block_s or max(2, 1 << (splits - 1).bit_length())  # as forward() sizes it
    quiet(probe[(rows,)], fenced_o, fenced_lse, o, got_lse, splits, rows, HEAD_DIM=d,
          BLOCK_S=block)
    # float64 of the float32 values the kernel read
    want_o, want_lse = exact(part_o.float().double(), lse.float().double())
    return (o, got_lse), (want_o, want_lse), block


def _check_probe(combine_splits, device: str) -> int:
    names = load_cell(_PROBE, "08_combine_probe")
    names["combine_splits"] = combine_splits  # called by this name
    gen = torch.Generator().manual_seed(8)  # the same cases each run; the global seed untouched
    cases = _cases(gen)
    for label, lse, d, block_s, hint in cases:
        (o, got_lse), (want_o, want_lse), block = _merged(names["combine_probe"], gen,
                                                          lse, d, block_s, device)
        what = f"{label}, BLOCK_S={block}"
        compare(got_lse, want_lse.float(), what=f"{what}: the merged lse (base 2)", atol=1e-5,
                rtol=1e-6, hint=hint)
        compare(o, want_o.float(), what=f"{what}: the merged output", atol=1e-5, rtol=1e-4,
                hint=hint)
    return len(cases)


# (H, H_kv, Sq, Sk, causal, window, D, keys per split): groups packed, the keys split
FORWARD = ((8, 2, 1, 70, False, None, 64, 32),  # 3 splits, the last ragged
           (4, 4, 1, 20, False, None, 64, 32),  # one split
           (8, 1, 3, 97, True, None, 64, 16),  # causal: most splits see no key
           (16, 2, 2, 65, True, 2, 128, 16),  # a window of 2: only the first split sees keys
           (4, 1, 1, 150, False, None, 128, 16))  # 10 splits (BLOCK_S 16)


def _check_forward(combine_splits, device: str, dtypes) -> int:
    from kernels.attention import attention_eager, triton_decode, visible
    from kernels.registry import OPS

    module = patched_module(triton_decode, "combine_splits", combine_splits)
    for dtype in dtypes:
        atol, rtol = OPS["attention"].tol(dtype)
        for h, h_kv, sq, sk, causal, window, d, split in FORWARD:
            what = (f"decoding B=2, H={h}, H_kv={h_kv}, Sq={sq}, Sk={sk}, D={d}, "
                    f"{'causal' if causal else 'not causal'}, window={window}, {split} keys a "
                    f"split, {str(dtype).removeprefix('torch.')}")
            q = torch.randn(2, h, sq, d, device=device).to(dtype)
            k, v = (torch.randn(2, h_kv, sk, d, device=device).to(dtype) for _ in range(2))
            got, lse2 = quiet(module.forward, q, k, v, causal, window, split_keys=split)
            q64, k64, v64 = (t.double() for t in (q, k, v))
            want = attention_eager(q64, k64, v64, causal, window)
            kk = k64.repeat_interleave(h // h_kv, dim=1)
            s = (q64 @ kk.transpose(-2, -1)) / math.sqrt(d)
            s = s.masked_fill(~visible(sq, sk, causal, window, s.device), float("-inf"))
            hint = ("every merge was right on the probe: compare the lines around "
                    "combine_splits with combine_kernel")
            compare(got, want.to(got.dtype), what=what, atol=atol, rtol=rtol, hint=hint)
            compare((lse2 * LN2).nan_to_num(neginf=-1e30),
                    s.logsumexp(-1).float().nan_to_num(neginf=-1e30),
                    what=f"{what}: the saved log-sum-exp (lse2 · ln 2)", atol=1e-3, rtol=1e-4,
                    hint=hint)
    return len(FORWARD)


@exercise("attention_variants.combine_splits", title="Merge the splits of a decoding step",
          stub=COMBINE_STUB, answers=("combine_splits",), section=SECTION_COMBINE, isolated=True,
          intro="""
Write `combine_splits` of `triton_decode.py`, what `combine_kernel` does for one query row:
read the row's `splits` partial outputs `O_s` (each normalised by its own sum) and base-2
log-sum-exps `lse_s`, and merge them by the online softmax's rule, `lse = log₂ Σₛ 2^lseₛ`,
`O = Σₛ 2^(lseₛ − lse)·Oₛ`. Subtract the largest `lse_s` before `exp2` (they can lie far outside
float32's exponents), let a split that saw no key (`lse_s = −inf`) weigh nothing, and give a row
whose every split is empty `O = 0`, `lse = −inf`, not NaN. `BLOCK_S`, the number of lanes, is a
power of 2: the lanes past the last split must weigh nothing too. The check runs your function
in a probe on made-up partial results (one split, ragged and full `BLOCK_S`, empty splits and
rows, `lse` near ±3000, D = 64 and 128; a poisoned split past the last) against float64, then
runs the decoding forward with your `combine_splits` in it against float64 attention.
`tl.load(..., mask=, other=)`, `tl.max`, `tl.math.exp2`, `tl.sum` and `tl.where` are all it
takes.""")
def check_combine_splits(combine_splits, report) -> None:
    device, dtypes = where_checked()
    cases = _check_probe(combine_splits, device)
    n = _check_forward(combine_splits, device, dtypes)
    report.line(f"every row's merged output and lse right on {cases} sets of partial results "
                f"(1 to 13 splits, empty splits and rows, lse near ±3000, D 64 and 128); the "
                f"decoding forward with your combine_splits right on {n} problems (output and "
                f"saved log-sum-exp); {ran_on(device, dtypes)}")
