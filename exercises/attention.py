"""Exercises of lesson 09, the forward half: attention's online softmax (attention.online_step),
FlashAttention's inner loop (attention.attend_block) and causal block skipping
(attention.key_range), each a ``@triton.jit`` function that runs inside a kernel of the course
(what the lesson's checks share, where a check runs, the problems, the float64 scores, a fresh
copy of a kernel module with the student's function patched in, is
:mod:`exercises.attention_problems`). The backward's dK/dV step
(attention.backward_dkdv) is in :mod:`exercises.attention_backward`; what the interpreter is made to
do like a GPU (tf32 ``tl.dot``, float32 running sums) is in :mod:`exercises.triton_precision`.

Where it runs: on a CPU in Triton's interpreter, in fp32 and fp16 (the interpreter computes bf16
``tl.dot`` wrongly: it converts bf16 after loading, so bf16 is checked only on a GPU; and its
float32 ``tl.dot`` is made to round to tf32 unless asked for ``"ieee"``, as a GPU does); on a GPU
compiled, in fp32, fp16 and bf16, then measured against SDPA's flash backend. Each check says
which.

The checks try the math's corners, not only random inputs: blocks of ``-inf`` before and after
real values, rows whose every value is negative (about -200), large scores with and without a
causal mask, causal with Sq < Sk and Sq > Sk, block shapes whose causal diagonal leaves a row a
fully masked block after real ones, and the log-sum-exp the forward saves for the backward
beside its output.
``exercises/solutions/attention.py`` keeps the wrong answers each must reject.
"""

from __future__ import annotations

import torch

from exercises import compare, exercise, expect, load_cell
from exercises.attention_problems import (
    LN2,
    config_of,
    device_is_cpu,
    exact_scores,
    forward_with,
    ran_on,
    random_qkv,
    where_checked,
)
from exercises.triton_precision import expect_float32, quiet, watched

# the exercises close these subsections; the course's own code is shown after them
SECTION_SOFTMAX = "Write the update"
SECTION_FORWARD = "Write the loop body and the ranges"


# --------------------------------------------------------------------------------------------
ONLINE_STUB = '''
import triton
import triton.language as tl


@triton.jit
def online_step(m, l, x):
    """Fold one block x of a row (BLOCK float32 values, -inf where the row has ended) into the
    row's running maximum m and running sum l = Σ exp(seen - m); return (m_new, l_new)."""
    ...
'''

NO_MAX = ("subtract the running maximum before exp: exp(x) overflows float32 past x = 88, and "
          "exp(x - m_new) never does")
KEEP_MAX = ("m_new is the largest value seen so far, tl.maximum(m, tl.max(x, 0)), not the "
            "block's own maximum")
STILL_INF = ("exp(-inf - (-inf)) is NaN: while the maximum is still -inf, subtract 0 instead "
             "(tl.where(m_new == float('-inf'), 0.0, m_new))")
MASKED_AFTER = ("a block of -inf after real values adds nothing: m stays, l stays; subtract the "
                "running maximum m_new (finite by then) from every value, not the block's own "
                "maximum (-inf there)")
NEGATIVE = ("m_new must be the largest value seen, negative or not: the guard against -inf "
            "(0 while nothing real was seen) belongs only in what you subtract, never in the m "
            "you return, and m must not be clamped at 0; with every value about -200, m = 0 "
            "makes every exp(x - m) underflow to 0 (l = 0, log l = -inf)")

# The check's kernel: one program per row, your online_step over blocks, then one more pass
_STREAM_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def streamed_softmax_kernel(x_ptr, y_ptr, lse_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.max(tl.full((BLOCK,), float("-inf"), tl.float32), 0)
    l = tl.sum(tl.zeros((BLOCK,), tl.float32), 0)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m, l = online_step(m, l, x)
    tl.store(lse_ptr + row, m + tl.log(l))
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + start + cols, tl.exp(x - m) / l, mask=ok)
'''


def _streamed(online_step, x: torch.Tensor, block: int):
    names = load_cell(_STREAM_KERNEL, "08_stream")
    seen: list[str] = []
    names["online_step"] = watched(online_step, ("m", "l"), seen)  # called by this name
    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    lse = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    quiet(names["streamed_softmax_kernel"][(x.shape[0],)], x, y, lse, x.shape[1], BLOCK=block)
    expect_float32(seen, "online_step", f"{tuple(x.shape)} {str(x.dtype)[6:]}")
    return y, lse


@exercise("attention.online_step", title="The online-softmax update", stub=ONLINE_STUB,
          answers=("online_step",), section=SECTION_SOFTMAX, intro="""
Write the update that lets a softmax stream over a row in blocks. The check's kernel (one program
per row) keeps a running maximum `m` and a running sum `l = Σ exp(seen − m)` (both float32
scalars, starting at `−inf` and `0`), calls your `online_step(m, l, x)` on each block `x` of
`BLOCK` values (padded with `−inf` past the row's end), then writes `exp(x − m) / l` and the
log-sum-exp `m + log l`. Rescale what was summed when the maximum grows, and mind a block that
is all `−inf` while `m` is still `−inf` (`exp(−inf − (−inf))` is NaN): padding masks and
bottom-right causal masks make such blocks. The running maximum is the largest value seen, even
when every value is negative (the check has rows of values about −200). `tl.max(x, 0)`,
`tl.sum(x, 0)`, `tl.exp`, `tl.maximum`, `tl.where` are all you need.""")
def check_online_step(online_step, report) -> None:
    device, _ = where_checked()
    block = 64
    first = torch.randn(3, 200)
    first[:, :70] = float("-inf")  # the first block (and 6 more) masked: m is still -inf
    after = torch.randn(3, 300)
    after[:, 110:] = float("-inf")  # blocks 2-4 all -inf after real ones (a padding mask)
    rows = torch.randn(4, 256)  # every row ends elsewhere: 1, 64, 65 and 200 real values
    for row, n in enumerate((1, 64, 65, 200)):
        rows[row, n:] = float("-inf")
    # every value negative (each row's maximum below -190), and the same after a masked first
    # block with masked entries scattered among the real ones: a maximum clamped at 0, or a
    # guard's 0 returned as m, is larger than every value there
    negative = torch.randn(3, 200) - 200
    late = torch.randn(3, 200) - 200
    late[:, :70] = float("-inf")
    late[:, 75::7] = float("-inf")
    cases = [("one column 3x1", torch.randn(3, 1), ""),
             ("5x300 (ragged last block)", torch.randn(5, 300), ""),
             ("4x64 (one block)", torch.randn(4, 64), ""),
             ("large values 3x200, |x| ~ 1e3", 1e3 * torch.randn(3, 200), NO_MAX),
             ("rising 2x256 (the max grows every block)",
              torch.arange(256.0).repeat(2, 1) / 4 + torch.randn(2, 256), ""),
             ("falling 2x256 (the first block holds the max)",
              -torch.arange(256.0).repeat(2, 1) / 4 + torch.randn(2, 256), KEEP_MAX),
             ("first 70 of 3x200 masked (-inf)", first, STILL_INF),
             ("last 190 of 3x300 masked (whole -inf blocks after real ones)", after, MASKED_AFTER),
             ("rows of 4x256 ending at 1, 64, 65, 200 (-inf after)", rows, MASKED_AFTER),
             ("every value about -200, 3x200 (each row's maximum below -190)", negative,
              NEGATIVE),
             ("first 70 of 3x200 masked (-inf), then values about -200 with every 7th masked",
              late, NEGATIVE)]
    hint = ("when the maximum grows from m to m_new, every term summed so far shrinks by "
            "exp(m - m_new): l_new = l * exp(m - m_new) + sum(exp(x - m_new))")
    for dtype in (torch.float32, torch.float16):  # the row's dtype (loaded, then float32)
        for label, x, why in cases:
            x = x.to(device, dtype)
            label = f"{label}, {str(dtype).removeprefix('torch.')}"
            y, lse = _streamed(online_step, x, block)
            expect(not lse.isnan().any(), f"{label}: the log-sum-exp came out NaN",
                   why or STILL_INF)
            compare(lse, torch.logsumexp(x.double(), dim=1).float(),
                    what=f"{label}: log-sum-exp m + log l", atol=1e-4, rtol=1e-5,
                    hint=why or hint)
            compare(y, torch.softmax(x.double(), dim=1).float(), what=f"{label}: softmax",
                    atol=1e-6, rtol=1e-5, hint=why or hint)
    report.line(f"softmax and log-sum-exp right on {len(cases)} rows in float32 and float16 "
                f"(-inf blocks before and after real values, |x| ~ 1e3, every value about "
                f"-200); "
                f"{ran_on(device, [torch.float32, torch.float16])}")


# --------------------------------------------------------------------------------------------
ATTEND_STUB = '''
import triton
import triton.language as tl


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of FlashAttention-2's loop, for BLOCK_M queries and a block of BLOCK_N keys:
    acc (BLOCK_M, D) float32 = Σ 2^(s - m_i) v so far, m_i (BLOCK_M,) the running max of the
    scores in log2 units (s * qk_scale, qk_scale = log2(e) / sqrt(D)), l_i (BLOCK_M,) the running
    sum of 2^(s - m_i); q (BLOCK_M, D), k and v (BLOCK_N, D) in the input dtype.
    When MASKED, scores where key_ok (BLOCK_M, BLOCK_N) is False must count as -inf.
    IEEE (fp32 inputs): pass input_precision="ieee" to tl.dot. Return (acc, m_new, l_new)."""
    ...
'''


ONE_BLOCK = ("one block of keys, no mask: s = q kᵀ (tl.dot with tl.trans(k)), m_new = max(m_i, "
             "max(s) · qk_scale), p = exp2(s · qk_scale − m_new) (exp2: qk_scale holds log2 e), "
             "l = l_i · alpha + Σ p, acc = acc · alpha + p v; with float32 inputs (IEEE) both "
             "tl.dot need input_precision=\"ieee\", or the tensor cores multiply in tf32")
RESCALE = ("with several blocks, what was summed relative to the old maximum shrinks when it "
           "grows: multiply both l_i and acc by alpha = exp2(m_i − m_new) before adding the "
           "block")
MASK = ("the ragged last block and the causal diagonal come with MASKED = True: scores where "
        "key_ok is False must count as −inf (tl.where(key_ok, s, float('-inf'))) before the max")
LARGE = ("with large scores the weights of the keys a query sees underflow to 0 when the "
         "maximum includes scores it may not see: mask s before the maximum, not p after it")
AFTER = ("with BLOCK_M = 2 · BLOCK_N the first queries of a diagonal block see none of the "
         "second key block: its scores are all −inf after real ones, and the running maximum "
         "must stay: m_new = max(m_i, max(s) · qk_scale), never the block's maximum alone")
LSE = ("the output is right, but the log-sum-exp the kernel saves for the backward "
       "(m_i + log2 l_i) is not: m_i must be the running maximum of s · qk_scale, in log2 units, "
       "and l_i the sum of 2^(s · qk_scale − m_i)")


def _attention_cases(device: str, dtype: torch.dtype, causal_only: bool = False):
    """(label, (q, k, v), causal, (BLOCK_M, BLOCK_N) or None, what a mismatch there points to),
    simplest first. None: the lesson's configuration here (32 x 32 in the interpreter)."""
    def qkv(*shape, scale=1.0):
        return random_qkv(device, dtype, *shape, scale=scale)

    cases = [] if causal_only else [
        ("one block 1x2x32x64", qkv(1, 2, 32, 32, 64), False, None, ONE_BLOCK),
        ("four blocks 1x2x128x64", qkv(1, 2, 128, 128, 64), False, None, RESCALE),
        ("large scores 1x1x128x64, |s| ~ 36", qkv(1, 1, 128, 128, 64, scale=6.0), False, None,
         RESCALE),
        ("ragged 2x3x77x64", qkv(2, 3, 77, 77, 64), False, None, MASK),
        ("one query 1x2x1x50x64", qkv(1, 2, 1, 50, 64), False, None, MASK)]
    return cases + [
        ("causal 1x2x130x64", qkv(1, 2, 130, 130, 64), True, None, MASK),
        ("causal cross 1x2x40x97x64", qkv(1, 2, 40, 97, 64), True, None, MASK),
        ("causal 1x1x64x32", qkv(1, 1, 64, 64, 32), True, None, MASK),
        ("causal, queries past the keys 1x1x100x33x64", qkv(1, 1, 100, 33, 64), True, None,
         MASK),
        ("causal, large scores 1x2x96x64, |s| ~ 36", qkv(1, 2, 96, 96, 64, scale=6.0), True,
         None, LARGE),
        ("causal 1x2x100x64 in 64x32 blocks", qkv(1, 2, 100, 100, 64), True, (64, 32), AFTER),
        ("causal, large scores 1x1x70x45x32 in 64x32 blocks",
         qkv(1, 1, 70, 45, 32, scale=6.0), True, (64, 32), AFTER)]


def _check_forward(forward, device: str, dtypes, causal_only: bool, hint: str = "",
                   seen: list[str] | None = None) -> int:
    """Compare ``forward``'s output with the eager reference, and the log-sum-exp it saves for
    the backward with float64 ``torch.logsumexp`` of the scaled scores, on every case; ``hint``
    replaces the cases' own. Returns how many problems it checked."""
    from kernels.attention import attention_eager
    from kernels.registry import OPS

    checked = 0
    for dtype in dtypes:
        atol, rtol = OPS["attention"].tol(dtype)
        for label, (q, k, v), causal, blocks, why in _attention_cases(device, dtype,
                                                                      causal_only):
            what = f"{label} {str(dtype).removeprefix('torch.')}"
            config = {} if blocks is None else {"config": config_of(forward, *blocks)}
            got, lse2 = quiet(forward, q, k, v, causal, **config)
            expect_float32(seen or [], "attend_block", what)
            compare(got, attention_eager(q, k, v, causal), what=what, atol=atol, rtol=rtol,
                    hint=hint or why)
            compare(lse2 * LN2, exact_scores(q, k, v, causal).logsumexp(-1).float(),
                    what=f"{what}: the saved log-sum-exp (lse2 · ln 2)", atol=1e-3, rtol=1e-4,
                    hint=hint or LSE)
            checked += 1
    return checked // len(dtypes)


def _gpu_ratio(report, forward, causal: bool, label: str, target: float) -> None:
    """On a GPU: your forward at B=4, H=16, S=4096, D=128 bf16 against SDPA's flash backend."""
    if device_is_cpu():
        report.line("speed: measured only on a GPU (the peer is SDPA's flash backend)")
        return
    from course_utils import timing
    from kernels.attention import sdpa

    q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    mine = timing.benchmark(lambda: forward(q, k, v, causal), device="cuda").median
    flash = timing.benchmark(lambda: sdpa.attention("flash", q, k, v, causal),
                             device="cuda").median
    report.line(timing.verdict(f"{label} ≥ {target}× SDPA flash", f"{flash / mine:.2f}×",
                               flash / mine >= target, "B=4, H=16, S=4096, D=128, bf16, "
                               "same run"))


@exercise("attention.attend_block", title="FlashAttention's inner loop", stub=ATTEND_STUB,
          answers=("attend_block",), section=SECTION_FORWARD, isolated=True, intro="""
Write the body of the forward's loop over key blocks: `attend_block` of `triton_fwd.py`, with
the same signature. The check runs the lesson's own kernel with your function in its place
(fresh copies of `triton_fwd.py`, your `attend_block` patched in), on causal and non-causal
problems whose lengths are not block multiples (large scores, Sq ≠ Sk both ways, 64 × 32 blocks
whose diagonal gives some queries a fully masked block after real ones), and compares the output
with the eager reference and the log-sum-exp it saves for the backward with
`torch.logsumexp` of the scaled scores. Scores in
log2 units: `s = q kᵀ`, the new maximum `m_new = max(m_i, max_j s · qk_scale)`, weights
`p = exp2(s · qk_scale − m_new)`, the rescale `alpha = exp2(m_i − m_new)`; then `l` and `acc`
(round `p` to `v.dtype` before the second `tl.dot`, as the tensor cores want).""")
def check_attend_block(attend_block, report) -> None:
    device, dtypes = where_checked()
    seen: list[str] = []
    forward, _ = forward_with("attend_block", attend_block, seen)
    n = _check_forward(forward, device, dtypes, False, seen=seen)
    report.line(f"output and saved log-sum-exp right on {n} problems (one block, many, causal "
                f"and not, ragged, Sq != Sk both ways, large scores, 64x32 blocks); "
                f"{ran_on(device, dtypes)}")
    _gpu_ratio(report, forward, False, "your forward", 1.0)


# --------------------------------------------------------------------------------------------
RANGE_STUB = '''
import triton
import triton.language as tl


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end) for the program whose queries are [q_start, q_start + BLOCK_M)
    (q_start a multiple of BLOCK_M, itself a multiple of BLOCK_N): keys [0, full_end) run with
    no mask, keys [full_end, end) with a mask, keys from end on are skipped. Query i sees key j
    when j < seq_k and, if CAUSAL, j <= i."""
    ...
'''

@exercise("attention.key_range", title="Skip the blocks a causal mask hides", stub=RANGE_STUB,
          answers=("key_range",), section=SECTION_FORWARD, isolated=True, intro="""
A causal program need not touch the keys after its last query, and only the blocks that cross
the diagonal (or the ragged end of the keys) need a mask. Write `key_range` of `triton_fwd.py`:
the forward's two loops run `range(0, full_end, BLOCK_N)` unmasked and
`range(full_end, end, BLOCK_N)` masked. The check asks your function for every program's range
(block sizes 32/32, 64/32, 128/64; lengths that are not block multiples; Sq ≠ Sk), counts the
blocks each loop would run against the fewest that are right, then runs the lesson's forward
with your `key_range` in it. `tl.minimum` helps.""")
def check_key_range(key_range, report) -> None:
    device, dtypes = where_checked()
    forward, module = forward_with("key_range", key_range)
    for causal in (True, False):
        for bm, bn in ((32, 32), (64, 32), (128, 64)):
            for seq_q, seq_k in ((300, 300), (100, 257), (260, 33), (64, 64)):
                for q_start, full_end, end in module.key_ranges(seq_q, seq_k, causal, bm, bn,
                                                                device):
                    visible = min(q_start, seq_k) if causal else seq_k  # seen by every query
                    want_full = visible // bn * bn
                    want_end = min(q_start + bm, seq_k) if causal else seq_k
                    where = (f"{'causal' if causal else 'not causal'}, BLOCK_M={bm}, "
                             f"BLOCK_N={bn}, Sq={seq_q}, Sk={seq_k}, q_start={q_start}: you "
                             f"returned (full_end, end) = ({full_end}, {end})")
                    expect(full_end <= want_full and full_end % bn == 0,
                           f"{where}; the unmasked loop would run a block some query may not "
                           f"see (at most {want_full}, a multiple of BLOCK_N)",
                           "keys before q_start are seen by every query of the program, and "
                           "only whole blocks below seq_k run without a mask")
                    expect(full_end == want_full,
                           f"{where}; {(want_full - full_end) // bn} block(s) that every query "
                           f"sees whole go through the masked loop (full_end could be "
                           f"{want_full})", "mask only the diagonal block(s) and the ragged end")
                    expect(-(-(end - full_end) // bn) == -(-(want_end - want_full) // bn),
                           f"{where}; the masked loop runs {-(-(end - full_end) // bn)} "
                           f"block(s), the keys these queries may see need "
                           f"{-(-(want_end - want_full) // bn)}",
                           "a causal program's last query is q_start + BLOCK_M - 1: keys after "
                           "it are never seen (skip them), keys up to it are")
    n = _check_forward(forward, device, dtypes, True,
                       "compare your (full_end, end) with the keys each query may see")
    report.line(f"fewest blocks, masks only where needed, on 24 (lengths, blocks) "
                f"combinations; the forward with your key_range right on {n} causal problems; "
                f"{ran_on(device, dtypes)}")
    if not device_is_cpu():
        from course_utils import timing

        q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        full = timing.benchmark(lambda: forward(q, k, v, False), device="cuda").median
        half = timing.benchmark(lambda: forward(q, k, v, True), device="cuda").median
        report.line(timing.verdict("causal ≥ 1.6× faster than full (half the blocks)",
                                   f"{full / half:.2f}×", full / half >= 1.6,
                                   "B=4, H=16, S=4096, D=128, bf16"))
