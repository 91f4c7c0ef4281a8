"""Exercise attention_variants.window_range of lesson 14: the key blocks a sliding window lets a
program skip
(``window_range`` of ``kernels/attention/triton_fwd.py``), a ``@triton.jit`` function run inside
fresh copies of the course's forward.

The check first asks your function, through the kernel module's own probe, for the range of many
query blocks (windows of 1 key, of exactly one or two key blocks, wider than every query's
position, ``q_start`` on and off the block grid, four block shapes) and compares each with a
brute force over the (query, key) pairs; then it runs the forward with your function in it on
small windowed problems (fp32 and fp16 in the interpreter) against the float64 reference and the
log-sum-exp the forward saves. ``exercises/solutions/attention.py`` keeps the wrong answers.
"""

from __future__ import annotations

import math

import torch

from exercises import compare, exercise, expect
from exercises.attention_problems import (
    LN2,
    config_of,
    forward_with,
    ran_on,
    random_qkv,
    where_checked,
)
from exercises.triton_precision import quiet

# the exercise closes this subsection of section 3
SECTION_WINDOW = "A sliding window"

WINDOW_STUB = '''
import triton
import triton.language as tl


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start) for the queries [q_start, q_start + BLOCK_M) under a sliding window:
    query i sees key j when i - window < j <= i (window >= 1, q_start >= 0; the forward passes
    multiples of BLOCK_M, the check others too). start: the first key block (a multiple of
    BLOCK_N) holding a key some query sees; the blocks before it are skipped. full_start: the
    first multiple of BLOCK_N from which every key (up to the diagonal) is inside every query's
    window, so the window's edge needs no mask there."""
    ...
'''

EDGE = ("query i sees keys i − window + 1 … i (window keys, itself included): the first key the "
        "first query sees is q_start − window + 1, the first the last query sees is "
        "q_start + BLOCK_M − window")
CLAMP = "no key comes before key 0: clamp the first visible key with tl.maximum(…, 0)"
ROUND_DOWN = ("start must be a block boundary at or before the first visible key: round it down "
              "to a multiple of BLOCK_N ((first // BLOCK_N) * BLOCK_N)")
ROUND_UP = ("full_start is the first block boundary at or after the first key the last query "
            "sees: round up (tl.cdiv(x, BLOCK_N) * BLOCK_N), so no unmasked block holds a key "
            "some query's window leaves out")

BLOCKS = ((32, 32), (64, 32), (128, 64), (16, 16))
WINDOWS = (1, 2, 15, 16, 31, 32, 33, 64, 100, 1000)
# on the block grid (as the forward passes them) and off it
Q_STARTS = (0, 1, 5, 16, 31, 32, 33, 64, 95, 96, 130, 256, 300)


def _brute_force(q_start: int, window: int, bm: int, bn: int) -> tuple[int, int, int]:
    """(first visible key, start, full_start) from every (query, key) pair of the program."""
    rows = torch.arange(q_start, q_start + bm)[:, None]
    keys = torch.arange(0, q_start + bm)[None, :]  # none after the last query is ever seen
    seen = (keys <= rows) & (keys > rows - window)
    first = int(seen.any(0).nonzero()[0])
    inside = (keys > rows - window).all(0)  # keys inside every query's window
    full = 0
    while not bool(inside[full:].all()):
        full += bn
    return first, first // bn * bn, full


def _ranges(module, q_starts, window: int, bm: int, bn: int, device: str):
    """What your ``window_range`` gives each q_start, through the forward module's probe."""
    starts = torch.tensor(q_starts, dtype=torch.int32, device=device)
    out = torch.zeros(2 * len(q_starts), dtype=torch.int32, device=device)
    quiet(module.window_range_probe[(len(q_starts),)], starts, out, window, BLOCK_M=bm,
          BLOCK_N=bn)
    return out.view(-1, 2).tolist()


def _check_ranges(module, device: str) -> int:
    checked = 0
    for bm, bn in BLOCKS:
        for window in WINDOWS:
            for q_start, (start, full) in zip(Q_STARTS, _ranges(module, Q_STARTS, window, bm,
                                                                 bn, device), strict=True):
                first, want_start, want_full = _brute_force(q_start, window, bm, bn)
                where = (f"q_start={q_start}, window={window}, BLOCK_M={bm}, BLOCK_N={bn}: you "
                         f"returned (start, full_start) = ({start}, {full}), the keys "
                         f"{first}..{q_start + bm - 1} are seen")
                expect(start >= 0, f"{where}; start is negative: the loop would read keys "
                       f"before key 0", CLAMP)
                expect(start % bn == 0, f"{where}; start is not a multiple of BLOCK_N",
                       ROUND_DOWN)
                expect(start <= first, f"{where}; the blocks before {start} are skipped, but "
                       f"key {first} is visible", EDGE if start - first < bn else ROUND_DOWN)
                expect(start == want_start, f"{where}; the blocks {start}..{want_start - 1} "
                       f"hold no key any query sees (start could be {want_start})",
                       EDGE)
                expect(full % bn == 0, f"{where}; full_start is not a multiple of BLOCK_N",
                       ROUND_UP)
                expect(full >= want_full, f"{where}; the unmasked blocks from {full} on hold "
                       f"keys before {want_full} that some query's window leaves out", ROUND_UP)
                expect(full == want_full, f"{where}; the block(s) {want_full}..{full - 1} are "
                       f"masked, but every query sees all their keys (full_start could be "
                       f"{want_full})", ROUND_UP if full - want_full == bn else EDGE)
                checked += 1
    return checked


def _window_cases(device: str, dtype: torch.dtype):
    """(label, (q, k, v), window, (BLOCK_M, BLOCK_N) or None): None is the interpreter's 32x32."""
    def qkv(*shape):
        return random_qkv(device, dtype, *shape)

    return [("window 1 (each query sees itself) 1x1x70x70x16", qkv(1, 1, 70, 70, 16), 1, None),
            ("window 32 = BLOCK_N 1x2x100x100x32", qkv(1, 2, 100, 100, 32), 32, None),
            ("window 40 1x2x150x150x64", qkv(1, 2, 150, 150, 64), 40, None),
            ("window 9, Sq < Sk 1x2x70x90x64", qkv(1, 2, 70, 90, 64), 9, None),
            ("window 100 > S 1x1x64x64x16", qkv(1, 1, 64, 64, 16), 100, None),
            ("window 33 in 64x32 blocks 1x1x130x130x32", qkv(1, 1, 130, 130, 32), 33, (64, 32)),
            ("window 5, queries past the keys 1x1x100x33x16", qkv(1, 1, 100, 33, 16), 5, None)]


def _check_forward(forward, device: str, dtypes) -> int:
    from kernels.attention import attention_eager, visible
    from kernels.registry import OPS

    for dtype in dtypes:
        atol, rtol = OPS["attention"].tol(dtype)
        for label, (q, k, v), window, blocks in _window_cases(device, dtype):
            what = f"{label} {str(dtype).removeprefix('torch.')}"
            config = {} if blocks is None else {"config": config_of(forward, *blocks)}
            got, lse2 = quiet(forward, q, k, v, True, window, **config)
            want = attention_eager(q.double(), k.double(), v.double(), True, window)
            compare(got, want.to(got.dtype), what=what, atol=atol, rtol=rtol,
                    hint="the ranges above were right on the probe: compare them with the "
                    "keys each query of this problem sees")
            s = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
            s = s.masked_fill(~visible(*s.shape[-2:], True, window, s.device), float("-inf"))
            compare((lse2 * LN2).nan_to_num(neginf=-1e30),
                    s.logsumexp(-1).float().nan_to_num(neginf=-1e30),
                    what=f"{what}: the saved log-sum-exp (lse2 · ln 2)", atol=1e-3, rtol=1e-4,
                    hint=EDGE)
    return len(_window_cases("cpu", torch.float32))


@exercise("attention_variants.window_range", title="The key blocks a sliding window skips",
          stub=WINDOW_STUB,
          answers=("window_range",), section=SECTION_WINDOW, isolated=True, intro="""
Write `window_range` of `triton_fwd.py`: for the queries `[q_start, q_start + BLOCK_M)` under a
window of `window` keys (query i sees key j when `i − window < j <= i`), `start` is the first key
block any of them sees (the forward skips every block before it) and `full_start` the first block
boundary from which every query's window holds every key (blocks in `[start, full_start)` cross
the window's edge and take the mask). The check compares your ranges with a brute force over
every (query, key) pair for windows of 1, of one and two key blocks exactly and wider than the
keys, `q_start` on and off the block grid and four block shapes, then runs the lesson's forward
with your `window_range` in it against the float64 reference. `tl.maximum` and `tl.cdiv`
help.""")
def check_window_range(window_range, report) -> None:
    device, dtypes = where_checked()
    forward, module = forward_with("window_range", window_range)
    ranges = _check_ranges(module, device)
    n = _check_forward(forward, device, dtypes)
    report.line(f"(start, full_start) equal to a brute force on {ranges} (q_start, window, "
                f"blocks) combinations; the forward with your window_range right on {n} "
                f"windowed problems (output and saved log-sum-exp); {ran_on(device, dtypes)}")
