"""Wrong answers to exercise hopper_backward.dq_add, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "hopper_backward.dq_add"
BLIND: dict[str, str] = {
        "row guard is <= sq (the first row past Sq is added)": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    const int row = q_row + 8 * h;
    if (row <= sq) {
        float* out = dq_sum + (i64(bh) * sq + row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
''',
        "guard tests the thread's first row only, not row + 8": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
if (q_row < sq) {
    float* base = dq_sum + (i64(bh) * sq + q_row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float* out = base + 8 * h * D;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
''',
        "element offset computed in 32-bit int (bh not cast to i64)": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    const int row = q_row + 8 * h;
    if (row < sq) {
        const int offset = (bh * sq + row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(dq_sum + offset + 8 * j, dq_acc[4 * j + 2 * h] * scale,
                     dq_acc[4 * j + 2 * h + 1] * scale);
        }
    }
}
"""
''',
        "pairs taken as registers 4j + h and 4j + h + 2 (mixes rows r and r + 8)": r'''
# ✏️ Exercise hopper_backward.dq_add: edit this cell, run it, then run the check below
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
const int q_row = m0 + 16 * (t / 32) + lane / 4;
#pragma unroll
for (int h = 0; h < 2; ++h) {
    const int row = q_row + 8 * h;
    if (row < sq) {
        float* out = dq_sum + (i64(bh) * sq + row) * D + dq_col0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            red_add2(out + 8 * j, dq_acc[4 * j + h] * scale, dq_acc[4 * j + h + 2] * scale);
        }
    }
}
"""
''',
    }
