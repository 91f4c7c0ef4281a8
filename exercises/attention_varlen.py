"""Exercise attention_variants.varlen_locate of lesson 14: where a program of the packed (varlen)
forward
finds its data, ``locate`` of ``kernels/attention/varlen.py``: its sequence's first row and length
in ``q`` and in ``k``/``v`` (from the cumulative lengths ``cu_seqlens``), nothing to do past the
sequence's end, and the K/V head its query head reads (grouped-query attention).

The check first runs a probe kernel that calls your function exactly as the forward's programs
do (the same grid, the same arguments) and compares what each program gets with the cumulative
lengths read in Python: sequences of 0, 1 and more queries than a block, more keys than queries
and fewer, groups of 1, 2, 3 and 4 query heads, blocks of 16 to 128 queries, offsets that pass
2^31 once multiplied by a stride. ``cu_seqlens`` sits between poisoned entries, so a read
outside it shows in the values, compiled as in the interpreter. Only then (every address the
forward will compute now known to be right) does it run the varlen forward with your function
in it against float64 attention run sequence by sequence, output and saved log-sum-exp.
``exercises/solutions/attention_varlen.py`` keeps the wrong answers.
"""

from __future__ import annotations

import math

import torch
import triton

from exercises import compare, exercise, expect, load_cell
from exercises.attention_problems import LN2, patched_module, ran_on, where_checked
from exercises.triton_precision import quiet
from kernels.attention.varlen import cumulative

# the exercise closes this subsection of section 3
SECTION_VARLEN = "Write the addressing of a packed sequence"

LOCATE_STUB = '''
import triton
import triton.language as tl


@triton.jit
def locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start):
    """Where the program of sequence b, query head h and the sequence's queries
    [q_start, q_start + BLOCK_M) finds its data. cu_q_ptr and cu_k_ptr point to the int32
    cumulative lengths [0, n_0, n_0 + n_1, ..., total] of the queries and of the keys.
    Return (q_lo, seq_q, k_lo, seq_k, kv_h): the sequence's first row in q (int64) and its
    number of queries; its first row in k and v (int64) and its number of keys, 0 when the
    block starts past the sequence's last query (nothing to do); the K/V head that query head
    h reads (group = H / H_kv neighbouring query heads share one)."""
    ...
'''

START = ("sequence b's queries are rows cu_q[b] … cu_q[b + 1] − 1 of q: q_lo = cu_q[b], "
         "seq_q = cu_q[b + 1] − cu_q[b] (tl.load(cu_q_ptr + b), tl.load(cu_q_ptr + b + 1))")
KEY_START = ("sequence b's keys are rows cu_k[b] … cu_k[b + 1] − 1 of k and v: k_lo = cu_k[b], "
             "seq_k = cu_k[b + 1] − cu_k[b]")
KEYS = ("the keys have offsets of their own: k_lo and seq_k come from cu_k, not cu_q (a "
        "sequence may have more keys than queries, or fewer)")
LENGTH = ("seq_k is a length, cu_k[b + 1] − cu_k[b]: one more and the sequence's queries see "
          "the next sequence's first key, one fewer and they miss their own last key")
IDLE = ("the grid is sized by the longest sequence: a program whose block starts at or past "
        "its sequence's end (q_start >= seq_q) has no queries, and seq_k = 0 makes its loops "
        "run nothing (tl.where(q_start < seq_q, seq_k, 0))")
ACTIVE = ("a program with queries needs all its sequence's keys: seq_k = cu_k[b + 1] − cu_k[b], "
          "zeroed only where the block starts past the sequence's end (q_start >= seq_q)")
HEAD = ("query heads j·group … j·group + group − 1 share K/V head j (PyTorch's enable_gqa and "
        "FlashAttention group them so): kv_h = h // group; h % group mixes the groups")
INT64 = ("q_lo and k_lo are multiplied by strides: (q_lo + row) · stride indexes total · H · D "
         "elements, past 2^31 in a large packed batch, where int32 wraps around; return them "
         ".to(tl.int64), as the dense forward does with b")
OUTSIDE = ("read cu[b] and cu[b + 1] only: here cu_seqlens sits between poisoned entries "
           "(2^30), and your values came from outside it")

POISON = 1 << 30
STRIDE = 1 << 24  # an int32 stride: q_lo · STRIDE passes 2^31 from q_lo = 128 on
BLOCKS_M = (16, 32, 64, 128)  # the interpreter's 32 and the GPU's 64 and 128 among them
FIELDS = ("q_lo", "seq_q", "k_lo", "seq_k", "kv_h")

# (label, query lengths, key lengths, H, H_kv): the problems the probe asks about, simplest first
PROBLEMS = (
    ("one sequence of 45, H = H_kv = 2", (45,), (45,), 2, 2),
    ("lengths 5, 0, 1, 40, 33, H=4, H_kv=2", (5, 0, 1, 40, 33), (5, 0, 1, 40, 33), 4, 2),
    ("queries 3, 37, 0, 20 against keys 50, 9, 4, 0, H=4, H_kv=2", (3, 37, 0, 20),
     (50, 9, 4, 0), 4, 2),
    ("lengths 32, 64, 17 against keys 17, 64, 32, H=3, H_kv=1", (32, 64, 17), (17, 64, 32), 3,
     1),
    ("lengths 70, 2 against keys 2, 70, H=8, H_kv=2", (70, 2), (2, 70), 8, 2),
    ("lengths 100, 150, 7, 1 against keys 130, 90, 7, 300, H=2, H_kv=1",
     (100, 150, 7, 1), (130, 90, 7, 300), 2, 1),
)
# (problem, causal, head dim): the forward runs on these, once the probe has passed on them
FORWARD = ((1, False, 16), (1, True, 16), (2, True, 16), (2, False, 32), (3, True, 16),
           (4, False, 16))

_PROBE = '''
import triton
import triton.language as tl


@triton.jit
def locate_probe(cu_q_ptr, cu_k_ptr, out_ptr, n_heads, group, stride, BLOCK_M: tl.constexpr):
    # the first lines of varlen_fwd_kernel: the same grid, the same arguments to locate
    q_start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // n_heads
    h = (bh % n_heads).to(tl.int64)
    q_lo, seq_q, k_lo, seq_k, kv_h = locate(cu_q_ptr, cu_k_ptr, b, h, group, q_start)
    at = out_ptr + (bh * tl.num_programs(0) + tl.program_id(0)) * 7
    tl.store(at, q_lo)
    tl.store(at + 1, seq_q)
    tl.store(at + 2, k_lo)
    tl.store(at + 3, seq_k)
    tl.store(at + 4, kv_h)
    tl.store(at + 5, q_lo * stride)  # as the forward's (q_lo + rows) * sqs computes it
    tl.store(at + 6, k_lo * stride)
'''


def _fenced(cu: torch.Tensor) -> torch.Tensor:
    """``cu`` between entries of :data:`POISON`: a read outside it returns absurd offsets."""
    buffer = torch.full((cu.numel() + 8,), POISON, dtype=torch.int32, device=cu.device)
    inside = buffer[4:4 + cu.numel()]
    inside.copy_(cu)
    return inside


def _probe(probe, lengths_q, lengths_k, heads: int, kv_heads: int, block_m: int, device):
    """What the student's ``locate`` gives each program of the forward's grid, through
    ``probe`` (:data:`_PROBE`): ``{(b, h, q_start): 7 ints}``."""
    grid = (triton.cdiv(max(lengths_q), block_m), len(lengths_q) * heads)
    out = torch.zeros(grid[0] * grid[1] * 7, dtype=torch.int64, device=device)
    quiet(probe[grid], _fenced(cumulative(lengths_q, device)),
          _fenced(cumulative(lengths_k, device)), out, heads, heads // kv_heads, STRIDE,
          BLOCK_M=block_m)
    rows = out.view(grid[1], grid[0], 7).tolist()
    return {(bh // heads, bh % heads, m * block_m): tuple(rows[bh][m])
            for bh in range(grid[1]) for m in range(grid[0])}


def _expect_program(got, b, h, q_start, lengths_q, lengths_k, group: int, where: str) -> None:
    """``got`` (what one program's ``locate`` returned) against the cumulative lengths."""
    q_lo, k_lo = sum(lengths_q[:b]), sum(lengths_k[:b])
    seq_q, seq_k = lengths_q[b], lengths_k[b]
    active = q_start < seq_q
    want = (q_lo, seq_q, k_lo, seq_k if active else 0, h // group)
    said = ", ".join(f"{n}={v}" for n, v in zip(FIELDS, got, strict=False))
    where = f"{where}, sequence b={b}, query head h={h}, q_start={q_start}: you returned {said}"
    expect(all(abs(v) < POISON // 2 for v in got[:5]), where, OUTSIDE)
    if active:
        expect(got[:2] == want[:2], f"{where}; its queries are rows {q_lo}..{q_lo + seq_q - 1} "
               f"(q_lo={q_lo}, seq_q={seq_q})", START)
        from_q = got[2] == q_lo != k_lo or got[3] == seq_q != seq_k
        expect(got[2] == k_lo and got[3] == seq_k, f"{where}; its keys are rows "
               f"{k_lo}..{k_lo + seq_k - 1} (k_lo={k_lo}, seq_k={seq_k})",
               KEYS if from_q else KEY_START if got[2] != k_lo else ACTIVE if got[3] == 0
               else LENGTH)
    else:  # no row of the block is a query: nothing it loads or stores matters, only the work
        expect(got[1] <= q_start, f"{where}; the sequence has {seq_q} queries, so no row of "
               f"this block may count as one (seq_q <= q_start)", START)
        expect(got[3] == 0, f"{where}; the block starts past the sequence's {seq_q} queries, "
               f"yet its loops would walk {got[3]} keys", IDLE)
        return
    expect(got[4] == want[4], f"{where}; with {group} query head{'s' if group > 1 else ''} to a "
           f"group, head {h} reads K/V head {want[4]}", HEAD)
    expect(got[5] == q_lo * STRIDE and got[6] == k_lo * STRIDE,
           f"{where}; q_lo · stride and k_lo · stride (stride 2^24, an int32 as the forward's "
           f"strides are) came out {got[5]} and {got[6]}, not {q_lo * STRIDE} and "
           f"{k_lo * STRIDE}", INT64)


def _check_probe(locate, device: str) -> int:
    names = load_cell(_PROBE, "08_locate_probe")
    names["locate"] = locate  # called by this name
    checked = 0
    for label, lengths_q, lengths_k, heads, kv_heads in PROBLEMS:
        for block_m in BLOCKS_M:
            found = _probe(names["locate_probe"], lengths_q, lengths_k, heads, kv_heads,
                           block_m, device)
            for (b, h, q_start), got in found.items():
                _expect_program(got, b, h, q_start, lengths_q, lengths_k, heads // kv_heads,
                                f"{label}, BLOCK_M={block_m}")
                checked += 1
    return checked


def _exact(q, k, v, cu_q, cu_k, causal: bool):
    """float64 ``(O, lse)`` of the packed problem, sequence by sequence; lse in nats,
    ``(H, total_q)``."""
    from kernels.attention import attention_eager, visible
    from kernels.attention.varlen import per_sequence

    q, k, v = (t.double() for t in (q, k, v))
    out = per_sequence(attention_eager, q, k, v, cu_q, cu_k, causal)
    group = q.shape[1] // k.shape[1]
    lse = []
    for a, e, c, f in zip(cu_q.tolist(), cu_q.tolist()[1:], cu_k.tolist(), cu_k.tolist()[1:],
                          strict=False):
        ks = k[c:f].repeat_interleave(group, dim=1)
        s = torch.einsum("qhd,khd->hqk", q[a:e], ks) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~visible(e - a, f - c, causal, device=s.device), float("-inf"))
        lse.append(s.logsumexp(-1))
    return out, torch.cat(lse, dim=1)


def _check_forward(locate, device: str, dtypes) -> int:
    from kernels.attention import varlen
    from kernels.registry import OPS

    module = patched_module(varlen, "locate", locate)
    for dtype in dtypes:
        atol, rtol = OPS["attention"].tol(dtype)
        for index, causal, d in FORWARD:
            label, lengths_q, lengths_k, heads, kv_heads = PROBLEMS[index]
            what = (f"{label}, D={d}, {'causal' if causal else 'not causal'}, "
                    f"{str(dtype).removeprefix('torch.')}")
            cu_q, cu_k = cumulative(lengths_q, device), cumulative(lengths_k, device)
            q = torch.randn(sum(lengths_q), heads, d, device=device).to(dtype)
            k, v = (torch.randn(sum(lengths_k), kv_heads, d, device=device).to(dtype)
                    for _ in range(2))
            got, lse2 = quiet(module.forward, q, k, v, cu_q, cu_k, max(lengths_q), causal)
            want, lse = _exact(q, k, v, cu_q, cu_k, causal)
            hint = ("every program's values were right on the probe: compare the forward's "
                    "lines around locate with varlen_fwd_kernel")
            compare(got, want.to(got.dtype), what=what, atol=atol, rtol=rtol, hint=hint)
            compare((lse2 * LN2).nan_to_num(neginf=-1e30), lse.float().nan_to_num(neginf=-1e30),
                    what=f"{what}: the saved log-sum-exp (lse2 · ln 2)", atol=1e-3, rtol=1e-4,
                    hint=hint)
    return len(FORWARD)


@exercise("attention_variants.varlen_locate",
          title="Where a packed sequence's rows and K/V head are",
          stub=LOCATE_STUB, answers=("locate",), section=SECTION_VARLEN, intro="""
Write `locate` of `varlen.py`, the lines that make lesson 09's forward a varlen one: from the
cumulative lengths `cu_q = [0, n₀, n₀+n₁, …]` and `cu_k` (their own: a sequence may have more
keys than queries), program `(b, h, q_start)` gets its sequence's first row and length in `q`
and in `k`/`v`, `seq_k = 0` when its block starts past the sequence's last query (the grid is
sized by the longest sequence, so the shorter ones' last programs have nothing to do), and the
K/V head `kv_h` that query head `h` reads when `group` query heads share one. The kernel adds
`q_lo`, `k_lo` to its rows and masks with `seq_q`, `seq_k` as the dense one does with
`Sq`, `Sk`. The check asks your function what every program of the forward's grid gets (lengths
0, 1 and above a block, Sq ≠ Sk both ways, groups of 1 to 4, four block heights; `cu_seqlens`
between poisoned entries), then runs the varlen forward with your `locate` in it against float64
attention run sequence by sequence. `tl.load`, `tl.where` and `.to(tl.int64)` are all it
takes.""")
def check_varlen_locate(locate, report) -> None:
    device, dtypes = where_checked()
    programs = _check_probe(locate, device)
    n = _check_forward(locate, device, dtypes)
    report.line(f"every program's (q_lo, seq_q, k_lo, seq_k, kv_h) right on {programs} programs "
                f"({len(PROBLEMS)} packed batches, BLOCK_M 16 to 128); the varlen forward with "
                f"your locate right on {n} problems (output and saved log-sum-exp); "
                f"{ran_on(device, dtypes)}")
