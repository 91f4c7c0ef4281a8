"""Solutions (and known-wrong answers) of lesson 01's exercises."""

SOLUTIONS = {
    "profiling.sync": '''
import time

import torch


def time_ms(fn, *args, reps=20):
    """Milliseconds per call of fn(*args) on a GPU."""
    fn(*args)                     # warm-up
    torch.cuda.synchronize()      # the warm-up's work must be done before the clock starts
    start = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    torch.cuda.synchronize()      # ...and the timed work done before it stops
    return (time.perf_counter() - start) * 1e3 / reps
''',
    "profiling.dominant": '''
DOMINANT = "matmul"  # 2n^3 FLOP against a few passes over n^2 elements
KERNELS = 3          # matmul, softmax, multiply
''',
    "profiling.tflops": '''
def matmul_tflops(m, n, k, ms):
    return 2 * m * n * k / (ms * 1e-3) / 1e12
''',
}

WRONG = {
    # synchronises at the end only: the warm-up's queued set-up lands in the timed loop
    "profiling.sync": '''
import time

import torch


def time_ms(fn, *args, reps=20):
    fn(*args)
    start = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / reps
''',
    "profiling.dominant": '''
DOMINANT = "softmax"
KERNELS = 3
''',
    "profiling.tflops": '''
def matmul_tflops(m, n, k, ms):
    return m * n * k / (ms * 1e-3) / 1e12
''',
}
