"""Lesson 03: the Triton puzzle ladder. Twelve kernels of a few lines each, from a 1-D map to a
single-block attention, each with its picture (:func:`draw`) and its check
(:func:`exercises.puzzle_checks.check_puzzle`). The student writes the kernel only: the check
launches it with the grid and block sizes the statement gives.

In the spirit of Sasha Rush's Triton-Puzzles (the same climb: 1-D, 2-D, reductions, softmax,
``tl.dot``, attention), written for this course's checks.
"""

from __future__ import annotations

import contextlib
import functools
import io

import torch

from course_utils import env
from exercises import CannotCheck, exercise, footprints, triton_checks, triton_launchers
from exercises.puzzle_checks import Puzzle, check_puzzle, footprint


def _cdiv(a: int, b: int) -> int:
    return max(1, -(-a // b))


# --------------------------------------------------------------------------------------------
# The ladder: (puzzle, title, what is new in it)
# --------------------------------------------------------------------------------------------

_ADD = Puzzle(
    id="puzzles.add", kernel="add_kernel", params="x_ptr, z_ptr, N0, B0: tl.constexpr",
    does="z[i] = x[i] + 10 for i < N0. One program, B0 = N0 lanes (a power of two).",
    inputs=(("x", lambda s: (s["N0"],)),), output=lambda s: (s["N0"],),
    reference=lambda x: x + 10,
    launch=lambda k, t, z, s: k[(1,)](t["x"], z, s["N0"], B0=s["N0"]),
    cases=({"N0": 32}, {"N0": 8}),
    hint="offsets = tl.arange(0, B0); z = tl.load(x_ptr + offsets) + 10; tl.store(z_ptr + "
         "offsets, z)")

_ADD_BLOCKS = Puzzle(
    id="puzzles.add_blocks", kernel="add_blocks_kernel",
    params="x_ptr, z_ptr, N0, B0: tl.constexpr",
    does="z[i] = x[i] + 10 for i < N0. Grid (cdiv(N0, B0),), B0 = 32: the last program is "
         "ragged.",
    inputs=(("x", lambda s: (s["N0"],)),), output=lambda s: (s["N0"],),
    reference=lambda x: x + 10,
    launch=lambda k, t, z, s: k[(_cdiv(s["N0"], 32),)](t["x"], z, s["N0"], B0=32),
    cases=({"N0": 100}, {"N0": 1}, {"N0": 64}),
    hint="program p owns elements p * B0 + tl.arange(0, B0); mask = offsets < N0 on the load "
         "and on the store")

_OUTER = Puzzle(
    id="puzzles.outer", kernel="outer_kernel", params="x_ptr, y_ptr, z_ptr, N0, N1, "
    "B0: tl.constexpr, B1: tl.constexpr",
    does="z[j, i] = x[i] + y[j] (z row-major, N1 x N0). One program, B0 = N0, B1 = N1.",
    inputs=(("x", lambda s: (s["N0"],)), ("y", lambda s: (s["N1"],))),
    output=lambda s: (s["N1"], s["N0"]),
    reference=lambda x, y: y[:, None] + x[None, :],
    launch=lambda k, t, z, s: k[(1,)](t["x"], t["y"], z, s["N0"], s["N1"], B0=s["N0"],
                                      B1=s["N1"]),
    cases=({"N0": 32, "N1": 16}, {"N0": 8, "N1": 8}),
    hint="i = tl.arange(0, B0) and j = tl.arange(0, B1); y[:, None] + x[None, :] is a B1 x B0 "
         "block, stored at z_ptr + j[:, None] * N0 + i[None, :]")

_OUTER_BLOCKS = Puzzle(
    id="puzzles.outer_blocks", kernel="outer_blocks_kernel", params="x_ptr, y_ptr, z_ptr, N0, N1, "
    "B0: tl.constexpr, B1: tl.constexpr",
    does="z[j, i] = relu(x[i] * y[j]) (z row-major, N1 x N0). Grid (cdiv(N0, B0), cdiv(N1, "
         "B1)), B0 = 32, B1 = 16: program (p0, p1) owns a B1 x B0 tile, ragged at both edges.",
    inputs=(("x", lambda s: (s["N0"],)), ("y", lambda s: (s["N1"],))),
    output=lambda s: (s["N1"], s["N0"]),
    reference=lambda x, y: torch.relu(y[:, None] * x[None, :]),
    launch=lambda k, t, z, s: k[(_cdiv(s["N0"], 32), _cdiv(s["N1"], 16))](
        t["x"], t["y"], z, s["N0"], s["N1"], B0=32, B1=16),
    cases=({"N0": 100, "N1": 40}, {"N0": 1, "N1": 1}, {"N0": 32, "N1": 16}),
    hint="offsets from tl.program_id(0) along x and tl.program_id(1) along y; the store's mask "
         "is the 2-D (j < N1)[:, None] & (i < N0)[None, :]; relu is tl.maximum(v, 0.0)")

_ROW_SUM = Puzzle(
    id="puzzles.row_sum", kernel="row_sum_kernel", params="x_ptr, z_ptr, N0, T, "
    "B0: tl.constexpr, BT: tl.constexpr",
    does="z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T). Grid (cdiv(N0, B0),), "
         "B0 = 4 rows per program, BT = 128 >= T: a program's rows fit in one block.",
    inputs=(("x", lambda s: (s["N0"], s["T"])),), output=lambda s: (s["N0"],),
    reference=lambda x: x.sum(1),
    launch=lambda k, t, z, s: k[(_cdiv(s["N0"], 4),)](t["x"], z, s["N0"], s["T"], B0=4,
                                                       BT=128),
    cases=({"N0": 5, "T": 100}, {"N0": 8, "T": 128}, {"N0": 1, "T": 1}),
    reduces=True,
    hint="load a B0 x BT block masked on rows and columns with other=0.0, then tl.sum(block, "
         "axis=1): one sum per row")

_LONG_SUM = Puzzle(
    id="puzzles.long_sum", kernel="long_sum_kernel", params="x_ptr, z_ptr, N0, T, "
    "B0: tl.constexpr, BT: tl.constexpr",
    does="z[r] = x[r, 0] + ... + x[r, T - 1] (x row-major, N0 x T) with rows longer than a "
         "block: grid (cdiv(N0, B0),), B0 = 4, BT = 64; loop over the row in chunks of BT.",
    inputs=(("x", lambda s: (s["N0"], s["T"])),), output=lambda s: (s["N0"],),
    reference=lambda x: x.sum(1),
    launch=lambda k, t, z, s: k[(_cdiv(s["N0"], 4),)](t["x"], z, s["N0"], s["T"], B0=4,
                                                       BT=64),
    cases=({"N0": 3, "T": 1000}, {"N0": 9, "T": 200}, {"N0": 4, "T": 64}, {"N0": 2, "T": 1}),
    tolerance=1e-4,
    reduces=True,
    hint="acc = tl.zeros((B0,), tl.float32); for t0 in range(0, T, BT): add tl.sum of the "
         "masked chunk (other=0.0) along axis 1; store acc once")

_COL_SUM = Puzzle(
    id="puzzles.col_sum", kernel="col_sum_kernel", params="x_ptr, z_ptr, N0, N1, "
    "B0: tl.constexpr, B1: tl.constexpr",
    does="z[c] = x[0, c] + ... + x[N0 - 1, c] (x row-major, N0 x N1): a reduction along axis "
         "0. Grid (cdiv(N1, B1),), B1 = 32 columns per program, B0 = 16 rows per step of a "
         "loop down the columns.",
    inputs=(("x", lambda s: (s["N0"], s["N1"])),), output=lambda s: (s["N1"],),
    reference=lambda x: x.sum(0),
    launch=lambda k, t, z, s: k[(_cdiv(s["N1"], 32),)](t["x"], z, s["N0"], s["N1"], B0=16,
                                                        B1=32),
    cases=({"N0": 100, "N1": 40}, {"N0": 1, "N1": 1}, {"N0": 33, "N1": 64}), tolerance=1e-4,
    reduces=True,
    hint="each step loads a B0 x B1 block (rows r0 + tl.arange(0, B0), this program's columns), "
         "masked on both with other=0.0, and adds tl.sum(block, axis=0)")

_SOFTMAX = Puzzle(
    id="puzzles.softmax", kernel="softmax_kernel", params="x_ptr, z_ptr, N0, T, BT: tl.constexpr",
    does="z[r] = softmax(x[r]) over a row of T (x row-major, N0 x T). Grid (N0,): one program "
         "per row, BT = 128 >= T.",
    inputs=(("x", lambda s: (s["N0"], s["T"])),), output=lambda s: (s["N0"], s["T"]),
    reference=lambda x: torch.softmax(x, dim=1),
    launch=lambda k, t, z, s: k[(s["N0"],)](t["x"], z, s["N0"], s["T"], BT=128),
    cases=({"N0": 4, "T": 100}, {"N0": 3, "T": 1}, {"N0": 2, "T": 128},
           {"N0": 2, "T": 100, "scale": 100.0}, {"N0": 3, "T": 127, "shift": -200.0}),
    reduces=True, shift=lambda s: {"x": s}, row_max=lambda x: x.amax(1),
    hint="load the row with other=-float('inf') (exp(-inf) = 0 adds nothing), subtract "
         "tl.max(x, axis=0) before tl.exp, divide by tl.sum")

_LONG_SOFTMAX = Puzzle(
    id="puzzles.long_softmax", kernel="long_softmax_kernel", params="x_ptr, z_ptr, N0, T, "
    "BT: tl.constexpr",
    does="z[r] = softmax(x[r]) over rows longer than a block: grid (N0,), BT = 64. One loop "
         "keeps a running max m and a running sum s of exp(x - m) (rescaled when m grows); a "
         "second loop writes exp(x - m) / s.",
    inputs=(("x", lambda s: (s["N0"], s["T"])),), output=lambda s: (s["N0"], s["T"]),
    reference=lambda x: torch.softmax(x, dim=1),
    launch=lambda k, t, z, s: k[(s["N0"],)](t["x"], z, s["N0"], s["T"], BT=64),
    cases=({"N0": 3, "T": 1000}, {"N0": 2, "T": 64}, {"N0": 2, "T": 1},
           {"N0": 2, "T": 300, "scale": 100.0}, {"N0": 2, "T": 63}, {"N0": 2, "T": 65},
           {"N0": 3, "T": 129, "shift": -200.0}),
    reduces=True, shift=lambda s: {"x": s}, row_max=lambda x: x.amax(1),
    hint="per chunk: m_new = max(m, tl.max(chunk)); s = s * exp(m - m_new) + tl.sum(exp(chunk - "
         "m_new)); chunks load with other=-float('inf'); then a second pass stores")

_MATVEC = Puzzle(
    id="puzzles.matvec", kernel="matvec_kernel", params="a_ptr, x_ptr, z_ptr, N0, N1, "
    "B0: tl.constexpr, B1: tl.constexpr",
    does="z[r] = a[r, 0] * x[0] + ... + a[r, N1 - 1] * x[N1 - 1] (a row-major, N0 x N1). Grid "
         "(cdiv(N0, B0),), B0 = 16 rows per program, a loop over the columns in steps of "
         "B1 = 32.",
    inputs=(("a", lambda s: (s["N0"], s["N1"])), ("x", lambda s: (s["N1"],))),
    output=lambda s: (s["N0"],),
    reference=lambda a, x: a @ x,
    launch=lambda k, t, z, s: k[(_cdiv(s["N0"], 16),)](t["a"], t["x"], z, s["N0"], s["N1"],
                                                        B0=16, B1=32),
    cases=({"N0": 40, "N1": 100}, {"N0": 1, "N1": 1}, {"N0": 16, "N1": 32}), tolerance=1e-4,
    reduces=True,
    hint="each step: a B0 x B1 block of a and B1 elements of x (both masked, other=0.0); add "
         "tl.sum(block * x[None, :], axis=1)")

_DOT = Puzzle(
    id="puzzles.dot", kernel="dot_kernel", params="a_ptr, b_ptr, c_ptr, M, N, K, "
    "BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr",
    does="c = a @ b (a: M x K, b: K x N, c: M x N, all row-major). Grid (cdiv(M, BM), "
         "cdiv(N, BN)), BM = BN = BK = 16: program (p0, p1) owns a tile of c and loops over K.",
    inputs=(("a", lambda s: (s["M"], s["K"])), ("b", lambda s: (s["K"], s["N"]))),
    output=lambda s: (s["M"], s["N"]),
    reference=lambda a, b: a @ b,
    launch=lambda k, t, c, s: k[(_cdiv(s["M"], 16), _cdiv(s["N"], 16))](
        t["a"], t["b"], c, s["M"], s["N"], s["K"], BM=16, BN=16, BK=16),
    cases=({"M": 40, "N": 24, "K": 50}, {"M": 16, "N": 16, "K": 16}, {"M": 1, "N": 1, "K": 1}),
    tolerance=1e-4,
    reduces=True, tf32=True,
    hint="acc = tl.zeros((BM, BN), tl.float32); per K step load a BM x BK and a BK x BN block "
         "masked with other=0.0 (0 past K adds nothing) and acc = tl.dot(a, b, acc); store "
         "masked on both edges")

_ATTENTION = Puzzle(
    id="puzzles.attention", kernel="attention_kernel", params="q_ptr, k_ptr, v_ptr, o_ptr, S, "
    "BS: tl.constexpr, D: tl.constexpr",
    does="o = softmax(q k^T / sqrt(D)) v for one head (q, k, v, o: S x D, row-major). One "
         "program, BS = 32 >= S, D = 16: the whole problem in one block.",
    inputs=(("q", lambda s: (s["S"], 16)), ("k", lambda s: (s["S"], 16)),
            ("v", lambda s: (s["S"], 16))),
    output=lambda s: (s["S"], 16),
    reference=lambda q, k, v: torch.softmax(q @ k.T / 4.0, dim=1) @ v,
    # p is rounded to TF32 before p @ v: each output moves by up to 2^-10 of sum_j p_j |v_j|
    tf32_error=lambda q, k, v: torch.softmax(q @ k.T / 4.0, dim=1) @ v.abs(),
    launch=lambda kern, t, o, s: kern[(1,)](t["q"], t["k"], t["v"], o, s["S"], BS=32, D=16),
    cases=({"S": 20}, {"S": 32}, {"S": 1}, {"S": 20, "scale": 8.0}, {"S": 31, "shift": -200.0}),
    tolerance=1e-3, reduces=True, tf32=True,
    # q about s / 40 and k about 10 in every dimension: q k^T / 4 about 16 · (s / 40) · 10 / 4
    shift=lambda s: {"q": s / 40, "k": 10.0}, shifted="score",
    row_max=lambda q, k, v: (q @ k.T / 4.0).amax(1),
    hint="load q, k, v as BS x D blocks (rows < S, other=0.0); scores = tl.dot(q, tl.trans(k)) "
         "/ sqrt(D); set the columns of keys >= S to -inf before the row softmax; "
         "o = tl.dot(p, v), stored for rows < S")

PUZZLES = {p.id: p for p in (_ADD, _ADD_BLOCKS, _OUTER, _OUTER_BLOCKS, _ROW_SUM, _LONG_SUM,
                              _COL_SUM, _SOFTMAX, _LONG_SOFTMAX, _MATVEC, _DOT, _ATTENTION)}

TITLES = {
    "puzzles.add": ("A map over one block",
                    "`tl.arange`, `tl.load`, `tl.store`: the smallest kernel"),
    "puzzles.add_blocks": ("Many programs and a ragged end", "`tl.program_id` and a mask"),
    "puzzles.outer": ("An outer sum", "2-D blocks from 1-D ones: `[:, None]` and `[None, :]`"),
    "puzzles.outer_blocks": ("A 2-D grid with a 2-D mask", "two program ids, a mask on both edges"),
    "puzzles.row_sum": ("Sum each row", "a reduction along an axis: `tl.sum(block, axis=1)`"),
    "puzzles.long_sum": ("Sum rows longer than a block",
                         "a loop inside the kernel, an accumulator"),
    "puzzles.col_sum": ("Sum each column", "a reduction along axis 0, walking down the rows"),
    "puzzles.softmax": ("A row softmax", "max, exp, sum and divide in registers; `other=-inf`"),
    "puzzles.long_softmax": ("A softmax over long rows",
                             "the online softmax: a running max and sum"),
    "puzzles.matvec": ("A matrix-vector product", "a 2-D block times a broadcast vector, a K loop"),
    "puzzles.dot": ("A matmul with `tl.dot`", "tiles of the output, the tensor-core product"),
    "puzzles.attention": ("Attention in one block", "two `tl.dot`s and the softmax between them"),
}


@functools.cache
def _expected(id: str) -> dict:
    """The reference solution's footprint of puzzle ``id`` on its first problem (drawn before
    the puzzle and again under a wrong answer: interpreted once)."""
    from exercises import triton_child
    from exercises.solutions.puzzles import SOLUTIONS

    p = PUZZLES[id]
    return footprint(p, getattr(triton_child.imported(SOLUTIONS[id]), p.kernel), p.cases[0])


def draw(id: str, yours=None):
    """The picture of puzzle ``id``: which elements of each tensor its first programs load
    (inputs) and store (the output), on its first problem, as the reference solution does it
    (a pyplot figure: the notebook cell shows it). With ``yours`` (the student's kernel), what
    it did above that, the differences marked (:mod:`exercises.footprints`): the puzzle's
    picture under a "not yet", which raises :class:`exercises.CannotCheck` where it cannot be
    drawn, for :func:`exercises.run_check` to say why in one line."""
    import matplotlib.pyplot as plt

    p = PUZZLES[id]
    title = f"{id} on {p.label(p.cases[0])}"
    if yours is None:
        try:
            return footprints.picture(title, _expected(id),
                                      new_figure=lambda size: plt.figure(figsize=size))
        except Exception as err:
            if env.TRITON_INTERPRET or not triton_checks.copy_failed(err):
                raise
            import triton

            print(f"(no picture: it runs an interpreted copy of the kernel, which Triton "
                  f"{triton.__version__} cannot do here; the check says so too)")
            return None
    if not isinstance(yours, tuple(triton_launchers())):
        raise CannotCheck(f"{p.kernel} is not a @triton.jit kernel")
    try:
        expected = _expected(id)
        # (the student's prints, tl.device_print's included, ran in the check already)
        with contextlib.redirect_stdout(io.StringIO()):
            mine = footprint(p, yours, p.cases[0])
    except Exception as err:
        said = (str(err).strip().splitlines() or [""])[0][:100]
        if not env.TRITON_INTERPRET and triton_checks.copy_failed(err):
            said = "this Triton cannot run an interpreted copy of a kernel here"
        raise CannotCheck(f"Triton's interpreter could not run {p.kernel} "
                          f"({type(err).__name__}: {said})") from err
    return footprints.picture(title, expected, mine)


def _register(p: Puzzle) -> None:
    title, new = TITLES[p.id]
    intro = (f"**New here:** {new}.\n\n{p.does}\n\nThe check launches your kernel itself (the "
             f"grid and block sizes above) on {'; '.join(p.label(s) for s in p.cases)}: in "
             "Triton's interpreter first, each lane's address checked against the tensors and "
             "every output element required, then for its values (compiled, on a GPU). The "
             "picture below shows what the first programs load and store.")
    if p.reduces:
        intro += (" Its masked loads feed a reduction, so each gives `other=` (the value that "
                  "changes nothing): compiled, a masked-off lane without it often holds 0 by "
                  "luck, so the check refuses the load itself.")
    draw_cell = f"from exercises import puzzles\n\npuzzles.draw({p.id!r});"

    @exercise(p.id, title=f"Puzzle: {title}", stub=p.stub(), answers=(p.kernel,), intro=intro,
              before=(draw_cell,), section=title,
              picture=lambda kernel, id=p.id: draw(id, kernel))
    def check(kernel, report, p=p) -> None:
        check_puzzle(p, kernel, report)


for _p in PUZZLES.values():
    _register(_p)
