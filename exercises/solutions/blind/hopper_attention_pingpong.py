"""Wrong answers to exercise hopper_attention.pingpong, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "hopper_attention.pingpong"
BLIND: dict[str, str] = {
        "barrier thread count 128 (a warpgroup completes it alone)": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 128;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 128;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
        "turn_pass uses bar.sync: the passing warpgroup waits too": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
        "turn_pass signals its own barrier, not the other consumer's": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}
"""
''',
        "bar.sync without a thread count (defaults to every thread of the block)": r'''
# ✏️ Exercise hopper_attention.pingpong: edit this cell, run it, then run the check below
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 256;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
    }
