"""Solution (and known-wrong answers) of lesson 18's exercise: the ping-pong's turns."""

SOLUTIONS = {
    "hopper_attention.pingpong": '''
TURNS = r"""
// Consumer `consumer` waits on its own barrier until the other warpgroup's pass completes it:
// 256 threads, its own 128 (bar.sync: they wait) and the other's 128 (bar.arrive).
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}

// The other consumer's barrier: signal it and go on (bar.arrive does not wait).
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 256;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
"""
''',
}


def _turns(old: str, new: str) -> str:
    source = SOLUTIONS["hopper_attention.pingpong"]
    assert old in source, old
    return source.replace(old, new)


WAIT_ID = '"r"(PINGPONG_FIRST_ID + consumer)'
PASS_ID = '"r"(PINGPONG_FIRST_ID + 1 - consumer)'

WRONG = {
    "hopper_attention.pingpong": {
        # the bodies left empty (the comments rewritten, so it is not the stub): every value
        # stays right, the warpgroups just issue whenever they like (step 3 with extra calls)
        "empty functions": '''
TURNS = r"""
// my turns
__device__ __forceinline__ void turn_wait(int consumer) {
    (void)consumer;
}
__device__ __forceinline__ void turn_pass(int consumer) {
    (void)consumer;
}
"""
''',
        # both consumers wait on barrier 1 and pass on it: a warpgroup's own pass and its next
        # wait complete the barrier alone, so the turns stop alternating
        "both consumers on the same barrier": _turns(WAIT_ID, '"r"(PINGPONG_FIRST_ID)')
        .replace(PASS_ID, '"r"(PINGPONG_FIRST_ID)'),
        # each consumer waits on the other's barrier, where it also passes: consumer 0 waits on
        # barrier 2, which nobody else signals (a hang)
        "waits on the other's barrier": _turns(WAIT_ID, PASS_ID),
        # one warpgroup's count: every barrier completes with the caller's own 128 threads
        "128 threads": _turns("bar.sync %0, 256;", "bar.sync %0, 128;")
        .replace("bar.arrive %0, 256;", "bar.arrive %0, 128;"),
        # bar.sync where bar.arrive belongs: the passing warpgroup waits until the other takes
        # its turn, so its softmax no longer overlaps the other's matmuls
        "bar.sync in turn_pass": _turns("bar.arrive %0, 256;", "bar.sync %0, 256;"),
        # the ids swapped in turn_pass only: each consumer passes to its own barrier and the
        # other one is never released (a hang)
        "turn_pass on its own barrier": _turns(PASS_ID, WAIT_ID),
        # __syncthreads for both: barrier 0, the whole block (the producer warp has left)
        "__syncthreads": '''
TURNS = r"""
__device__ __forceinline__ void turn_wait(int consumer) {
    __syncthreads();
}
__device__ __forceinline__ void turn_pass(int consumer) {
    __syncthreads();
}
"""
''',
        # no thread count: bar.sync 1 waits for all 288 threads of the block (a hang)
        "no thread count": _turns("bar.sync %0, 256;", "bar.sync %0;"),
        "plain PyTorch": '''
import torch

def TURNS(consumer):
    torch.cuda.synchronize()
''',
    },
}
