"""Wrong answers to exercise nvrtc.divergence, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "nvrtc.divergence"
BLIND: dict[str, str] = {
        "block's base left out: every block maps onto elements 0 .. 255": r'''
# ✏️ Exercise nvrtc.divergence: edit this cell, run it, then run the check below
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x): warps 0-3 take the even
// elements of the block, warps 4-7 the odd ones.
__host__ __device__ constexpr long long element_of(long long t) {
    return 2 * (t % 128) + (t % 256) / 128;
}
"""
''',
        "parity per half-warp (16 lanes), so each warp still holds both kinds": r'''
# ✏️ Exercise nvrtc.divergence: edit this cell, run it, then run the check below
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x): each group of 16 threads
// takes one parity of 32 neighbouring elements.
__host__ __device__ constexpr long long element_of(long long t) {
    return (t / 32) * 32 + 2 * (t % 16) + (t / 16) % 2;
}
"""
''',
        "warp w takes elements w, w + 8, w + 16, ... of the block: one parity, but 256 floats apart": r'''
# ✏️ Exercise nvrtc.divergence: edit this cell, run it, then run the check below
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x): lane l of warp w takes
// element 8 l + w of the block, so a warp's elements all have the parity of w.
__host__ __device__ constexpr long long element_of(long long t) {
    return (t / 256) * 256 + 8 * (t % 32) + (t % 256) / 32;
}
"""
''',
    }
