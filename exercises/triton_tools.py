"""Lesson 13: Triton's everyday tools. One exercise, triton_tools.transpose: a tiled transpose
written with a tensor descriptor (or a block pointer), checked by the puzzle engine of lesson 03
(:func:`exercises.puzzle_checks.check_puzzle`: every lane's address in Triton's interpreter,
every output element written, then the values), after a check that the answer uses one of the
two tools the section teaches.
"""

from __future__ import annotations

import re

from course_utils import env
from exercises import exercise, expect, triton_checks, triton_launchers
from exercises.puzzle_checks import Puzzle, check_puzzle


def _cdiv(a: int, b: int) -> int:
    return max(1, -(-a // b))


def _launch(kernel, tensors, z, sizes) -> None:
    """The puzzle's launch: BM = 16 rows by BN = 32 columns of x per program (non-square tiles,
    so a swapped tile shape shows), an allocator for compiled descriptors first."""
    if not env.TRITON_INTERPRET:
        from kernels.tiles.triton_tiles import use_torch_allocator

        use_torch_allocator()
    m, n = sizes["M"], sizes["N"]
    kernel[(_cdiv(m, 16), _cdiv(n, 32))](tensors["x"], z, m, n, BM=16, BN=32)


TRANSPOSE = Puzzle(
    id="triton_tools.transpose", kernel="transpose_kernel",
    params="x_ptr, z_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr",
    does="z = x transposed (x: M x N, z: N x M, both row-major; M and N multiples of 4, so "
         "every row is a multiple of 16 bytes). Grid (cdiv(M, BM), cdiv(N, BN)), BM = 16, "
         "BN = 32: program (p0, p1) loads the BM x BN tile of x at rows p0 * BM, columns "
         "p1 * BN through a tensor descriptor (or a block pointer) and stores its transpose.",
    inputs=(("x", lambda s: (s["M"], s["N"])),), output=lambda s: (s["N"], s["M"]),
    reference=lambda x: x.t().contiguous(),
    launch=_launch,
    cases=({"M": 40, "N": 24}, {"M": 16, "N": 32}, {"M": 4, "N": 4}, {"M": 52, "N": 100}),
    hint="x's descriptor: shape [M, N], strides [N, 1], block [BM, BN]; z's: shape [N, M], "
         "strides [M, 1], block [BN, BM]; load at [p0 * BM, p1 * BN] (elements, not tiles), "
         "store tl.trans(tile) at [p1 * BN, p0 * BM]")

PUZZLES = {TRANSPOSE.id: TRANSPOSE}

_TOOLS = re.compile(r"\btl\.make_tensor_descriptor\b|\btl\.make_block_ptr\b")


@exercise(TRANSPOSE.id, title="A tiled transpose with a tensor descriptor",
          stub=TRANSPOSE.stub(), answers=(TRANSPOSE.kernel,),
          intro=("Write `transpose_kernel` with `tl.make_tensor_descriptor` (or "
                 "`tl.make_block_ptr`, with `boundary_check`); the check launches it itself.\n\n"
                 f"{TRANSPOSE.does}\n\nThe check runs it on "
                 f"{'; '.join(TRANSPOSE.label(s) for s in TRANSPOSE.cases)}: in Triton's "
                 "interpreter first, each lane's address checked against the tensors and every "
                 "output element required, then for its values (compiled, on a GPU)."),
          section="Block pointers and tensor descriptors")
def check_transpose(transpose_kernel, report) -> None:
    # the code without its comments: a tool named in a comment is not a tool used
    source = re.sub(r"#.*", "", triton_checks.kernel_source(transpose_kernel))
    # (not a kernel at all: check_puzzle says so)
    is_kernel = isinstance(transpose_kernel, tuple(triton_launchers()))
    expect(not is_kernel or not source or _TOOLS.search(source),
           "transpose_kernel addresses memory by pointer arithmetic: correct, perhaps, but this "
           "exercise is the tool of the section",
           "describe x and z with tl.make_tensor_descriptor (or tl.make_block_ptr) and load and "
           "store whole tiles through them")
    check_puzzle(TRANSPOSE, transpose_kernel, report)
