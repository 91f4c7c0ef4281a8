"""Wrong answers to exercise mma_matmul.swizzle_cuda, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "mma_matmul.swizzle_cuda"
BLIND: dict[str, str] = {
        "swizzle added to store_offset only; ldmatrix_offset left unswizzled": r'''
# ✏️ Exercise mma_matmul.swizzle_cuda: edit this cell, run it, then run the check below
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + (chunk ^ ((row / (8 / CHUNKS)) % CHUNKS)) * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    return (16 * warp + lane % 16) * ROW_BYTES + (2 * step + lane / 16) * 16;
}
"""
''',
        "XOR with row % CHUNKS (the 128-byte-row pattern): rows r and r + 4 still collide": r'''
# ✏️ Exercise mma_matmul.swizzle_cuda: edit this cell, run it, then run the check below
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + (chunk ^ (row % CHUNKS)) * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    const int row = 16 * warp + lane % 16;
    const int chunk = 2 * step + lane / 16;
    return row * ROW_BYTES + (chunk ^ (row % CHUNKS)) * 16;
}
"""
''',
        "XOR key taken % 8 instead of % CHUNKS (chunks land past the row)": r'''
# ✏️ Exercise mma_matmul.swizzle_cuda: edit this cell, run it, then run the check below
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + (chunk ^ ((row / (8 / CHUNKS)) % 8)) * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    const int row = 16 * warp + lane % 16;
    const int chunk = 2 * step + lane / 16;
    return row * ROW_BYTES + (chunk ^ ((row / (8 / CHUNKS)) % 8)) * 16;
}
"""
''',
    }
