"""Exercises of lesson 07: the tensor-core matmul, on paper: the swizzle's offsets. The
kernels the student writes (the
shared-memory K loop and the swizzle of a tile loader in CUDA, a ``tl.dot`` matmul in Triton)
are in :mod:`exercises.mma_matmul_kernels`. Each sits at the end of the notebook section of its
idea (``section=``). Lesson 08's exercises (the full kernel's variants and tiles) are in
:mod:`exercises.mma_variants`."""

from __future__ import annotations

from exercises import exercise, expect

# ldmatrix reads 8 rows of 16 bytes per phase; shared memory serves 32 banks of 4 bytes, i.e. 8
# groups of 16 bytes, per cycle: 8 rows in 8 different groups cost one wavefront, not several
BANK_GROUPS = 8


def _bank_group(offset: int) -> int:
    return (offset // 16) % BANK_GROUPS


# --------------------------------------------------------------------------------------------
SWIZZLE_STUB = '''
def swizzled_offset(row, chunk, row_bytes):
    """Byte offset, in a shared-memory slice of rows of row_bytes (64 or 128) bytes, where
    mma.cu stores the 16-byte chunk `chunk` of row `row` (the XOR swizzle)."""
    # a row holds chunks = row_bytes // 16 chunks of 16 bytes: 4 or 8
    ...
'''


@exercise("mma_matmul.swizzle", title="The swizzle: 8 rows, 8 bank groups", stub=SWIZZLE_STUB,
          answers=("swizzled_offset",), section="The structure of an Ampere matmul", intro="""
One `ldmatrix` phase reads 8 rows of 16 bytes, all at the same logical chunk of K. Shared memory
serves 8 groups of 16 bytes (32 banks of 4 bytes) per cycle, and group = (offset / 16) mod 8. With
rows 64 bytes long, rows r and r + 2 land in the same group: a 4-way conflict (8-way with
128-byte rows). `mma.cu` stores chunk `c` of row `r` at chunk `c XOR ((r / (8 / CHUNKS)) mod
CHUNKS)` of that row (see `swizzled()` in `kernels/matmul/mma.cu`). Write the byte offset. The
check computes, for both row lengths, every (row, chunk) of a 64-row slice: each row's chunks
must stay in the row and not collide, the 8 rows of each `ldmatrix` phase must hit 8 different
bank groups, and the layout must be the one `mma.cu` uses (its cp.async stores and its ldmatrix
loads must agree). No GPU needed.""")
def check_swizzle(swizzled_offset, report) -> None:
    from kernels.matmul import mma

    for row_bytes in (64, 128):
        chunks = row_bytes // 16
        for row in range(64):
            got = [swizzled_offset(row, c, row_bytes) for c in range(chunks)]
            expect(all(isinstance(g, int) for g in got),
                   f"swizzled_offset({row}, 0, {row_bytes}) returned {got[0]!r}; expected an "
                   "int (a byte offset)", "use // and ^ on ints, << 4 to turn chunks into bytes")
            expected = sorted(row * row_bytes + 16 * c for c in range(chunks))
            expect(sorted(got) == expected,
                   f"row {row} of {row_bytes}-byte rows: chunks 0..{chunks - 1} go to byte "
                   f"offsets {got}; expected a permutation of {expected} (each chunk in its own "
                   "row, none sharing a place)",
                   "offset = row * row_bytes + 16 * (chunk XOR something below chunks)")
        for start in range(0, 64, 8):
            for c in range(chunks):
                rows = range(start, start + 8)
                groups = [_bank_group(swizzled_offset(r, c, row_bytes)) for r in rows]
                expect(len(set(groups)) == 8,
                       f"{row_bytes}-byte rows: the ldmatrix phase of rows {start}..{start + 7} "
                       f"at chunk {c} hits bank groups {groups}: a "
                       f"{max(groups.count(g) for g in groups)}-way conflict",
                       f"with {chunks} chunks a row, {8 // chunks} consecutive rows share a "
                       "16-byte-group pattern: XOR with (row / (8 / chunks)) % chunks, "
                       "not row % chunks")
        for row in range(64):
            for c in range(chunks):
                want = row * row_bytes + 16 * mma.swizzle(row, c, chunks)
                got = swizzled_offset(row, c, row_bytes)
                expect(got == want,
                       f"conflict-free, but not mma.cu's layout: swizzled_offset({row}, {c}, "
                       f"{row_bytes}) = {got}, mma.cu stores that chunk at {want}",
                       "cp.async (stores) and ldmatrix (loads) both call swizzled(): use its "
                       "XOR, chunk ^ ((row / (8 / chunks)) % chunks)")
    report.line("64- and 128-byte rows: every ldmatrix phase hits 8 bank groups (no conflict), "
                "and the layout is mma.cu's")
