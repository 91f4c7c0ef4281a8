"""Wrong answers to exercise hopper_matmul.parity, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "hopper_matmul.parity"
BLIND: dict[str, str] = {
        "parity of the tile index (kt & 1), not of the slot's phase": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt) & 1u;  // phases alternate 0, 1, 0, 1, ...
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    const u32 address = static_cast<u32>(__cvta_generic_to_shared(bar));
    u32 done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(address), "r"(parity)
                     : "memory");
    } while (!done);
}
"""
''',
        "one try_wait, no loop (it may time out before the phase completes)": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt / 2) & 1u;  // tile kt is phase kt / 2 of its slot
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    const u32 address = static_cast<u32>(__cvta_generic_to_shared(bar));
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n}"
                 :: "r"(address), "r"(parity) : "memory");
}
"""
''',
        "barrier passed as a generic 64-bit pointer, not its shared-state-space address": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt / 2) & 1u;
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    u32 done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "l"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
"""
''',
        "phase index kt / 2 returned without & 1 (0, 0, 1, 1, 2, 2, ...)": r'''
# ✏️ Exercise hopper_matmul.parity: edit this cell, run it, then run the check below
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return u32(kt >> 1);  // the slot's phase number
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
    const u32 address = static_cast<u32>(__cvta_generic_to_shared(bar));
    u32 done = 0;
    while (!done) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(address), "r"(parity)
                     : "memory");
    }
}
"""
''',
    }
