"""The problems of exercise nvrtc.tiled_matmul (lesson 06's assignment: a tiled fp32 matmul in
CUDA) and how one is run and judged against float64.

The launch is the statement's: 256 threads a block, a grid of (ceil(N / 64), ceil(M / 64))
blocks (at least one each way), block (bx, by) computing C's 64 x 64 tile at rows 64 by and
columns 64 bx. M and N sit on both sides of the tile (63, 64, 65, 127, 129, 130) and below a
warp (1, 3, 5), K on both sides of the steps a student may choose (8, 9, 17, 31, 33, 64, 65) and
below them (1), M != N != K, K = 0 and M = 0 where the grid still has a block, rows and columns
scaled from 2^-40 to 2^40 (a value read from the wrong row or column is then wrong by orders of
magnitude, never within the tolerance), N = 0, +inf down A's and B's first columns (a tile
padded with anything but its own exact zeros makes 0 x inf = NaN), and a C, an A, then a B (past
2^32) past 2^31 elements of which only a few blocks run (:mod:`course_utils.cuda_on_cpu`'s
``blocks=``, the large operand reserved, not allocated). A wrong C is read against the mistakes
that make it (:func:`diagnose`): C never written, added to instead of overwritten, the last
partial step of K dropped, rows and columns swapped, the ragged edge of the last tiles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch

from exercises import Mismatch, compare

TILE = 64  # C's tile per block, fixed by the launch
THREADS = 256  # threads per block: 16 outputs each
GARBAGE = 7.0  # what C holds before the launch: a kernel must overwrite it, not add to it
WIDE_C = (32833, 65600, 9)  # M x N past 2^31 (2^31 + 6.4 M elements); its last rows' offsets too
# M x K past 2^31 (2^31 + 4.2 M elements): M as tall as a grid goes (65535 blocks of 64 rows),
# so K must pass 512; only the last block row runs (65 steps of 8, a second on this CPU)
WIDE_A = (65535 * 64, 1, 513)
# K x N past 2^32 (5 x (2^30 + 64) elements): k * N passes 2^31 from k = 2 and 2^32 at k = 4, and
# so does (row in tile) * N; one row of C, only its last block runs
WIDE_B = (1, (1 << 30) + 64, 5)


def cdiv(n: int, d: int) -> int:
    return max(1, -(-n // d))  # at least one block: an empty C must still launch


def grid_of(m: int, n: int) -> tuple[int, int]:
    return cdiv(n, TILE), cdiv(m, TILE)


def launch(kernel, a, b, c, m: int, n: int, k: int, blocks=None) -> None:
    """The statement's launch (``blocks``: only those blocks, on the CPU runner)."""
    extra = {} if blocks is None else {"blocks": blocks}
    kernel(a, b, c, m, n, k, grid=grid_of(m, n), block=THREADS, **extra)


@dataclass(frozen=True)
class Problem:
    m: int
    n: int
    k: int
    why: str  # what the sizes try, in words
    scaled: bool = False  # rows of A and columns of B scaled from 2^-40 to 2^40
    # +inf down A's and B's first columns, everything else positive: C is +inf where a row of
    # A meets B's column 0 or A's column 0 meets any column, and a padding value that is not
    # an exact 0 of the tile's own (a neighbouring row's inf, a previous step's) makes 0 x inf
    infinite: bool = False
    wide: str = ""  # "C", "A" or "B": that operand past 2^31 elements, reserved (CPU runner only)

    def __post_init__(self):
        for name in ("m", "n", "k"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} expected a size (an int >= 0), got {value!r}")

    @property
    def label(self) -> str:
        return f"M={self.m}, N={self.n}, K={self.k} ({self.why})"

    @property
    def flop(self) -> int:
        return 2 * self.m * self.n * self.k


# the counted problem first: one tile, rows 32-byte aligned (coalescing is counted on it)
COUNTED = Problem(64, 64, 64, "one 64 x 64 tile, K = 64")
PROBLEMS = (
    COUNTED,
    Problem(1, 1, 1, "one element"),
    Problem(65, 63, 17, "M one past the tile, N one short, K = 16 + 1"),
    Problem(63, 65, 8, "M one short of the tile, N one past, K = 8"),
    Problem(50, 60, 65, "one ragged tile, K = 64 + 1"),
    Problem(33, 129, 31, "M = 32 + 1, N = 128 + 1, K = 32 - 1"),
    Problem(130, 70, 9, "a few tiles and a ragged tail both ways, K = 8 + 1"),
    Problem(127, 3, 33, "N smaller than a warp, K = 32 + 1"),
    Problem(5, 200, 1, "K = 1"),
    Problem(40, 24, 0, "K = 0: C is all zeros"),
    Problem(0, 70, 5, "M = 0: nothing to store"),
    Problem(70, 0, 9, "N = 0: B is empty, nothing to store"),
    Problem(70, 70, 33, "+inf down A's and B's column 0, the rest positive: ragged tiles of K "
            "must pad with exact zeros", infinite=True),
    Problem(64, 96, 24, "rows of A and columns of B scaled from 2^-40 to 2^40", scaled=True),
)
# past 2^31 elements of C, then of A: on the CPU runner only (the large operand reserved, not
# allocated; a few blocks run), since a student's GPU may not hold 8 GiB more
WIDE_PROBLEMS = (
    Problem(*WIDE_C, "C past 2^31 elements: offsets need 64 bits; its four corner blocks run",
            wide="C"),
    Problem(*WIDE_A, "A past 2^31 elements: offsets need 64 bits; its last block row runs",
            wide="A"),
    Problem(*WIDE_B, "B past 2^32 elements: offsets need 64 bits; its last block runs",
            wide="B"),
)


def make(problem: Problem, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A (M x K) and B (K x N), float32; scaled ones by powers of 2 per row and column, so
    products stay exact in float32's range and a wrong row or column is off by far more than
    any rounding."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(problem.m, problem.k, generator=g)
    b = torch.randn(problem.k, problem.n, generator=g)
    if problem.scaled:
        a *= 2.0 ** torch.randint(-40, 41, (problem.m, 1), generator=g)
        b *= 2.0 ** torch.randint(-40, 41, (1, problem.n), generator=g)
    if problem.infinite:
        a, b = a.abs() + 0.5, b.abs() + 0.5
        a[:, :1], b[:, :1] = float("inf"), float("inf")
    return a.to(device), b.to(device)


def bound(a64: torch.Tensor, b64: torch.Tensor) -> torch.Tensor:
    """The error a float32 sum of K products may have, per element: K ulps of the sum of the
    products' magnitudes (and a floor for the all-zero rows of K = 0)."""
    k = max(1, a64.shape[1])
    return (a64.abs() @ b64.abs()) * (k * 2.0 ** -23) + 1e-30


# --------------------------------------------------------------------------------------------
# What a wrong C is (the mistakes that make one)
# --------------------------------------------------------------------------------------------


def _close(got: torch.Tensor, want: torch.Tensor, tol: torch.Tensor) -> bool:
    got, finite = got.double(), want.isfinite()
    return bool(torch.equal(got[~finite], want[~finite])
                and ((got - want).abs()[finite] <= tol[finite]).all())


def diagnose(problem: Problem, got: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
             rows: slice = slice(None), cols: slice = slice(None)) -> None:
    """Mismatch naming the mistake, unless ``got`` (C, or its ``rows`` x ``cols`` part the
    blocks that ran cover) equals A @ B within :func:`bound`."""
    # only the part read (A may be reserved past 2^31 elements: converting it whole would
    # commit every page)
    a_part, b_part = a[rows].double().cpu(), b[:, cols].double().cpu()
    want, tol = a_part @ b_part, bound(a_part, b_part)
    got = got.cpu()
    if _close(got, want, tol):
        return
    what = problem.label
    untouched = torch.nonzero(got == GARBAGE)
    if len(untouched) and not _close(got, want + GARBAGE, tol):
        r, c = (int(v) for v in untouched[0])
        r0 = rows.start or 0
        c0 = cols.start or 0
        raise Mismatch(f"{what}: C[{r + r0}][{c + c0}] was never written (it still holds the "
                       f"{GARBAGE:g} the check put there; {len(untouched)} elements like it): "
                       f"no thread of block ({(c + c0) // TILE}, {(r + r0) // TILE}) stored it",
                       "each of a block's 256 threads stores 16 outputs of its 64 x 64 tile: "
                       "check that the rows and columns of the 16 cover the tile")
    if _close(got, want + GARBAGE, tol):
        raise Mismatch(f"{what}: C holds A @ B plus its old contents ({GARBAGE:g} everywhere "
                       "before the launch): your kernel adds into C (C[...] += ...) instead of "
                       "overwriting it", "sum into registers that start at 0, then store each "
                       "output once: C[r * N + c] = acc")
    if problem.infinite and bool((got.isnan() & ~want.isnan()).any()):
        r, c = (int(v) for v in torch.nonzero(got.isnan() & ~want.isnan())[0])
        raise Mismatch(f"{what}: C[{r}][{c}] is NaN where A @ B is +inf: an inf met a 0 "
                       "(0 x inf is NaN), so a padding value of your tiles was an inf where it "
                       "had to be an exact 0: a tile element past K (or past M, N) read from "
                       "a neighbouring row or kept from the previous step",
                       "in every step, write 0 into each tile element whose row or column is "
                       "outside the matrix: A's if r >= M or k0 + k >= K, B's if k0 + k >= K or "
                       "c >= N, tested on r, k and c themselves, not on a linear index")
    k = problem.k
    for step in (4, 8, 16, 32, 64):
        whole = k - k % step
        if k % step and _close(got, a_part[:, :whole] @ b_part[:whole], tol):
            held = f"the sum over the first {whole} values of k only" if whole else "zeros"
            raise Mismatch(f"{what}: C holds {held}: the last partial step of K "
                           f"(K % {step} = {k % step}) is never added", "step through K while "
                           "k0 < K, and load 0 into the tiles where k0 + k >= K")
    if got.numel() == want.numel() and rows == slice(None):
        flipped = got.reshape(-1).view(problem.n, problem.m).t()
        if _close(flipped, want, tol):
            raise Mismatch(f"{what}: C holds A @ B stored column by column (C[c * M + r]): the "
                           "row and the column of the output are swapped",
                           "C is row-major M x N: C[r][c] at r * N + c")
    compare(got, want.float(), what=what, atol=tol, rtol=0.0,
            hint=("a wrong element far from the last tiles is an index or a tile mix-up; only "
                  "in the last rows or columns, a bound (r < M, c < N, k < K) misplaced"))


# --------------------------------------------------------------------------------------------
# Running the problems on one device (this CPU's runner or a GPU)
# --------------------------------------------------------------------------------------------


def run_problem(kernel, problem: Problem, device: str, seed: int = 0) -> None:
    """One problem: A and B unchanged, C right (:func:`diagnose`). A fault of the CPU runner
    propagates (the caller names the problem)."""
    a, b = make(problem, device, seed)
    before = (a.clone(), b.clone())
    c = torch.full((problem.m, problem.n), GARBAGE, device=device)
    launch(kernel, a, b, c, problem.m, problem.n, problem.k)
    if device == "cuda":
        torch.cuda.synchronize()
    if not (torch.equal(a, before[0]) and torch.equal(b, before[1])):
        raise Mismatch(f"{problem.label}: your kernel changed A or B (its inputs)",
                       "store into C only")
    diagnose(problem, c, a, b)


def run_wide(kernel, problem: Problem) -> str | None:
    """``problem.wide`` ("C", "A" or "B") past 2^31 elements, reserved (not allocated) on the
    CPU runner, only some blocks run (C: its four corners; A: its last block row; B: its last
    block): None when right, else why it could not run here (a wrong one raises)."""
    from course_utils.cuda_on_cpu import reserved

    m, n, k = problem.m, problem.n, problem.k
    gx, gy = grid_of(m, n)
    try:
        flat, other = reserved({"C": m * n, "A": m * k, "B": k * n}[problem.wide])
    except OSError as err:
        return (f"this CPU cannot reserve the address space for {problem.wide} past 2^31 "
                f"elements ({err})")
    if problem.wide == "C":
        c = flat.view(m, n)
        a, b = make(problem, "cpu", seed=3)
        blocks = [(bx, by) for by in (0, gy - 1) for bx in (0, gx - 1)]
    elif problem.wide == "B":  # the last block's columns of B hold data, the rest reads 0
        b, c = flat.view(k, n), other[:m * n].view(m, n)
        a = torch.randn(m, k, generator=torch.Generator().manual_seed(6))
        cols = slice((gx - 1) * TILE, n)
        b[:, cols] = torch.randn(k, n - cols.start, generator=torch.Generator().manual_seed(7))
        blocks = [(gx - 1, 0)]
    else:  # the last block row's rows of A hold data, the rest stays reserved (reads give 0)
        # (C reserved too, after A: an offset of A that wrapped lands before A, nearest to it)
        a, c = flat.view(m, k), other[:m * n].view(m, n)
        rows = slice((gy - 1) * TILE, m)
        a[rows] = torch.randn(m - rows.start, k, generator=torch.Generator().manual_seed(4))
        b = torch.randn(k, n, generator=torch.Generator().manual_seed(5))
        blocks = [(bx, gy - 1) for bx in range(gx)]
    pieces = [(slice(by * TILE, min(m, by * TILE + TILE)),
               slice(bx * TILE, min(n, bx * TILE + TILE))) for bx, by in blocks]
    for rows, cols in pieces:  # the only pages of C committed: what the blocks write
        c[rows, cols] = GARBAGE
    launch(kernel, a, b, c, m, n, k, blocks=blocks)
    for rows, cols in pieces:
        diagnose(problem, c[rows, cols].clone(), a, b, rows, cols)
    return None


def say(case: str) -> None:
    """A progress line: the GPU child's parent names the case it crashed on."""
    print(json.dumps({"case": case}), flush=True)
