"""patterns.block_scan's problems and verdicts: the inputs chosen to break wrong block scans,
their float64 reference, the launch in every order of threads, and the words for each mistake.

Values. Most cases hold small integers stored as float32 (-8 ... 8, or shifted by -200): every
partial sum of a tile is an integer below 2^24, exact in float32 whatever the order of the
additions, so the answer must match the reference bit for bit and any difference is a wrong
sum, not rounding. One case holds floats of twelve orders of magnitude, whose sums depend on the
order of the additions: there the bound is what any order of float32 additions stays within
(``BLOCK`` roundings of the running absolute sum), so a correct tree scan passes and a sum kept
in fewer bits does not.

Sizes: 1, 31, 32, 33 (a warp, and either side of it), 255, 256, 257 (a block, and either side),
several blocks with a ragged tail, and 0 (one block launched, nothing to write). Each case runs
in the three orders of threads of :mod:`course_utils.cuda_on_cpu` (lowest first, highest first,
shuffled) on a CPU, with x inside NaN and y fenced on both sides.
"""

from __future__ import annotations

import json

import torch

from exercises import Mismatch
from exercises.sentinels import FENCE, fenced, poisoned

BLOCK = 256  # threads per block = elements per tile
WARP = 32
SIZES = (1, 31, 32, 33, 255, 256, 257, 3 * BLOCK + 77, 0)
ORDERS = (0, 1, 2)  # cuda_on_cpu's orders of threads, by index
ORDER_NAMES = ("lowest thread first", "highest thread first", "threads shuffled")
EPS32 = 2.0 ** -24


def cdiv(n: int, d: int) -> int:
    return max(1, -(-n // d))  # at least one block: an empty problem must still do nothing


def launch(kernel, x: torch.Tensor, y: torch.Tensor, order: int | None = None) -> None:
    """The launch the statement describes: ceil(n / 256) blocks (at least one) of 256."""
    extra = {} if order is None else {"order": order}
    kernel(x, y, x.numel(), grid=cdiv(x.numel(), BLOCK), block=BLOCK, **extra)


def integers(n: int, shift: float = 0.0, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, (n,), generator=g).float() + shift


def magnitudes(n: int, seed: int = 0) -> torch.Tensor:
    """Normal floats times 10^k, k uniform in -6 ... 6: sums whose order matters."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g) * 10.0 ** torch.randint(-6, 7, (n,), generator=g).float()


def cancelling(n: int) -> torch.Tensor:
    """1e-3 everywhere but the last lane of each tile's warp 1, 1e8: a warp prefix taken as
    (warps 0..w) minus warp w's own total loses the small totals before it in the subtraction
    (1e8 + 0.032 - 1e8 is 0 in float32), where a sum of the earlier warps keeps them."""
    x = torch.full((n,), 1e-3)
    x[WARP + WARP - 1::BLOCK] = 1e8
    return x


def cases() -> list[tuple[str, torch.Tensor, bool]]:
    """(label, x, exact): every size in small integers, negative ones, mixed magnitudes, and
    a large value after small ones."""
    found = [(f"n={n}", integers(n, seed=n), True) for n in SIZES]
    found.append((f"n={2 * BLOCK + 40}, values shifted by -200 (every sum negative)",
                  integers(2 * BLOCK + 40, shift=-200.0, seed=7), True))
    found.append((f"n={3 * BLOCK + 5}, floats from 1e-6 to 1e6 (sums whose order matters)",
                  magnitudes(3 * BLOCK + 5, seed=3), False))
    found.append((f"n={2 * BLOCK}, 1e-3 everywhere but 1e8 at lane 31 of warp 1 of each tile "
                  "(a sum that a subtraction would cancel)", cancelling(2 * BLOCK), False))
    return found


def tiles(x: torch.Tensor) -> torch.Tensor:
    """x padded with zeros to whole tiles, one tile a row (float64)."""
    n = x.numel()
    padded = torch.zeros(cdiv(n, BLOCK) * BLOCK, dtype=torch.float64)
    padded[:n] = x.double()
    return padded.view(-1, BLOCK)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Each tile's inclusive scan, in float64."""
    return tiles(x).cumsum(1).flatten()[:x.numel()]


def bound(x: torch.Tensor) -> torch.Tensor:
    """What any order of float32 additions of a tile's prefix stays within: BLOCK roundings of
    its absolute sum (each addition rounds once, at most by eps of the running magnitude)."""
    return BLOCK * EPS32 * tiles(x).abs().cumsum(1).flatten()[:x.numel()] + 1e-30


# --------------------------------------------------------------------------------------------
# The mistakes a wrong y shows, named
# --------------------------------------------------------------------------------------------


def _exclusive(x):
    return reference(x) - x.double()


def _per_warp(x):
    n = x.numel()
    padded = torch.zeros(cdiv(n, WARP) * WARP, dtype=torch.float64)
    padded[:n] = x.double()
    return padded.view(-1, WARP).cumsum(1).flatten()[:n]


def _whole_array(x):
    return x.double().cumsum(0)


def _own_warp_twice(x):
    """Every warp's own total added to its lanes too (w <= warp where w < warp was meant)."""
    n = x.numel()
    last_of_warp = torch.clamp((torch.arange(n) // WARP + 1) * WARP, max=n) - 1
    return reference(x) + _per_warp(x)[last_of_warp]


KNOWN = (
    (_exclusive, "y is the exclusive scan of each tile: y[i] leaves x[i] out (y[i] must be "
                 "x[start] + ... + x[i], x[i] included)",
     "an inclusive scan: after the warp and block steps, each thread's own value is in its sum; "
     "do not shift by one"),
    (_per_warp, "each warp scanned its own 32 values only: the totals of the warps before it "
                "in the block were never added",
     "lane 31 holds its warp's total after the shuffles: store it in shared memory, "
     "__syncthreads(), then add the totals of the warps w < yours"),
    (_whole_array, "y is the scan of the whole array: the blocks carried their sums across "
                   "tiles, but block b must scan its own tile from 0",
     "y[i] = x[256 b] + ... + x[i] for i in block b's tile: start each tile at zero"),
    (_own_warp_twice, "each warp added its own total too (the warps w <= yours, not w < yours)",
     "the warp's own values are already in its shuffle scan: add the totals of the warps "
     "before it only"),
)


def diagnose(x: torch.Tensor, got: torch.Tensor) -> tuple[str, str] | None:
    """(what the mistake is, a hint) when ``got`` is one of the known wrong scans of ``x``."""
    for wrong, said, hint in KNOWN:
        expected = wrong(x)
        if not torch.equal(expected, reference(x)) and torch.equal(got.double(), expected):
            return said, hint
    return None


def judge(label: str, x: torch.Tensor, got: torch.Tensor, exact: bool) -> None:
    """Mismatch naming the mistake unless ``got`` is x's tile scan (bit for bit where ``exact``,
    within any order's rounding otherwise)."""
    want = reference(x)
    if exact:
        if torch.equal(got.double(), want):
            return
        if named := diagnose(x, got):
            raise Mismatch(f"{label}: {named[0]}", named[1])
        bad = torch.nonzero(got.double() != want)
        first = int(bad[0])
        raise Mismatch(f"{label}: {len(bad)} of {x.numel()} elements differ (their sums are exact "
                       f"in float32, whatever the order); first at y[{first}] (block "
                       f"{first // BLOCK}, warp {first % BLOCK // WARP}, lane {first % WARP}): "
                       f"got {float(got[first]):.7g}, expected {float(want[first]):.7g}",
                       "y[i] = x[start] + ... + x[i], start = the first element of i's tile "
                       "(256 b); a thread past n adds a 0, and stores nothing")
    error = (got.double() - want).abs()
    over = torch.nonzero(~(error <= bound(x)))
    if len(over):
        first = int(over[0])
        raise Mismatch(f"{label}: y[{first}] = {float(got[first]):.9g}, the float64 scan is "
                       f"{float(want[first]):.9g}: off by {float(error[first]):.3g}, more than "
                       f"any order of float32 additions can be ({float(bound(x)[first]):.3g})",
                       "keep every partial sum in float32 (no __half, no int), and add each "
                       "value of the tile exactly once")


def run_cases(kernel, device: str, orders=ORDERS, small: bool = False) -> dict:
    """Every case in every order of threads (``orders``: None on a GPU, which has its own):
    x inside NaN, y fenced on both sides, x unchanged; ``small``: the last exact case alone,
    each tensor an allocation of its own size (for compute-sanitizer)."""
    chosen = cases()
    if small:
        chosen = [c for c in chosen if c[2]][-1:]
    for label, x_cpu, exact in chosen:
        for order in orders:
            said = label if order is None else f"{label}, {ORDER_NAMES[order]}"
            print(json.dumps({"case": said}), flush=True)  # the parent names it if we crash
            made = x_cpu.to(device)
            if small:
                x, y, outside = made, torch.full_like(made, FENCE), (lambda: None)
            else:
                x = poisoned(made)
                y, outside = fenced(made.numel(), device)
            launch(kernel, x, y, order)
            if device == "cuda":
                torch.cuda.synchronize()
            if where := outside():
                return {"mismatch": f"{said}: your kernel wrote {where}",
                        "hint": "a thread whose index is n or more must not store"}
            if not small and not torch.equal(x, made):
                return {"mismatch": f"{said}: your kernel changed x (its input)",
                        "hint": "store into y only"}
            try:
                judge(said, x_cpu, y.cpu(), exact)
            except Mismatch as wrong:
                return {"mismatch": wrong.message, "hint": wrong.hint}
    return {"ok": True}


# Offsets past 2^32 elements. n is a long long: a tile index computed in 32 bits
# (blockIdx.x * blockDim.x, unsigned) wraps around at 2^32 elements, and a signed int one at
# 2^31, so the last blocks of a 16 GiB problem would scan the first tile's place instead. On
# the CPU x and y are reserved, not allocated (only the pages the last two blocks touch are
# committed), and only those blocks run: the tile that starts at element 2^32 and the ragged one
# after it. y's first elements, fenced, must stay as they were. (On a GPU the child runs the
# other problems only: 32 GiB is more than a student's GPU may have.)
WIDE_N = (1 << 32) + BLOCK + 44
WIDE_HINT = ("compute i in 64 bits: long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;"
             " blockIdx.x * blockDim.x is a 32-bit product, and wraps around past 2^32 elements")


def run_wide(kernel) -> dict:
    """:data:`WIDE_N` on this CPU, its last two blocks only: the child's verdict."""
    from course_utils import cuda_on_cpu
    from course_utils.cuda_on_cpu import reserved

    label = (f"n = 2^32 + {WIDE_N - (1 << 32)} (x and y reserved, not allocated; the last two "
             "blocks run)")
    print(json.dumps({"case": label}), flush=True)
    try:
        x, y = reserved(WIDE_N)
    except OSError as err:
        return {"unsupported": f"this CPU cannot reserve 40 GiB of address space for offsets "
                               f"past 2^32 elements ({err})"}
    grid = cdiv(WIDE_N, BLOCK)
    start = (grid - 2) * BLOCK  # = 2^32: the last two tiles, one whole, one ragged
    x[start:] = integers(WIDE_N - start, seed=11)
    y[start:] = FENCE
    y[:2 * BLOCK] = FENCE
    try:
        kernel(x, y, WIDE_N, grid=grid, block=BLOCK, blocks=[(grid - 2,), (grid - 1,)])
    except cuda_on_cpu.KernelFault as fault:
        return {"mismatch": f"{label}: {fault}", "hint": WIDE_HINT}
    if not torch.equal(y[:2 * BLOCK], torch.full((2 * BLOCK,), FENCE)):
        return {"mismatch": f"{label}: the last blocks stored into y[0 ... {2 * BLOCK - 1}], "
                            "the first tiles' place: their element index wrapped around at "
                            "2^32", "hint": WIDE_HINT}
    try:
        judge(label, x[start:].clone(), y[start:].clone(), exact=True)
    except Mismatch as wrong:
        return {"mismatch": wrong.message, "hint": WIDE_HINT}
    return {"ok": True}
