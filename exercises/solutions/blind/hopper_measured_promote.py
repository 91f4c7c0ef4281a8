"""Wrong answers to exercise hopper_measured.promote, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "hopper_measured.promote"
BLIND: dict[str, str] = {
        "half h ignored: always adds into d[0..63] (right for BN = 128 only)": r'''
# ✏️ Exercise hopper_measured.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;
    for (int j = 0; j < 16; ++j) {
        d[4 * j + 0] += part[4 * j + 0] * lo;
        d[4 * j + 1] += part[4 * j + 1] * lo;
        d[4 * j + 2] += part[4 * j + 2] * hi;
        d[4 * j + 3] += part[4 * j + 3] * hi;
    }
}
"""
''',
        "row scale chosen by the register's parity (even: row_lo, odd: row_hi)": r'''
# ✏️ Exercise hopper_measured.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;
    for (int i = 0; i < 64; ++i) d[64 * h + i] += part[i] * (i % 2 == 0 ? lo : hi);
}
"""
''',
        "scale products computed per register (64 extra multiplies)": r'''
# ✏️ Exercise hopper_measured.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    for (int j = 0; j < 16; ++j) {
        d[64 * h + 4 * j + 0] += part[4 * j + 0] * row_lo * block;
        d[64 * h + 4 * j + 1] += part[4 * j + 1] * row_lo * block;
        d[64 * h + 4 * j + 2] += part[4 * j + 2] * row_hi * block;
        d[64 * h + 4 * j + 3] += part[4 * j + 3] * row_hi * block;
    }
}
"""
''',
        "assigns instead of adding: each K tile overwrites the running sum": r'''
# ✏️ Exercise hopper_measured.promote: edit this cell, run it, then run the check below
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled.
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
    const float lo = row_lo * block, hi = row_hi * block;
    for (int j = 0; j < 16; ++j) {
        d[64 * h + 4 * j + 0] = part[4 * j + 0] * lo;
        d[64 * h + 4 * j + 1] = part[4 * j + 1] * lo;
        d[64 * h + 4 * j + 2] = part[4 * j + 2] * hi;
        d[64 * h + 4 * j + 3] = part[4 * j + 3] * hi;
    }
}
"""
''',
    }
