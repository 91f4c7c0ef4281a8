"""Probe (not course material): the course's RMSNorm backward() (both kernels, allocations)
against the bare loaded-ahead kernel of rmsnorm_bwd_variants_run.py, programs per SM 2 and 4,
interleaved in one process, at 16k rows bf16.

    python3 docs/results/rmsnorm_bwd_course_run.py
"""
import importlib.util
import sys

import torch

from course_utils import timing
from kernels.rmsnorm import triton_rmsnorm as T
from kernels.triton_launch import cdiv

spec = importlib.util.spec_from_file_location("variants",
                                              "docs/results/rmsnorm_bwd_variants_run.py")
source = open(spec.origin).read().split("\ndef variants")[0]  # the kernels, not the runs
variants = type(sys)("variants")
exec(compile(source, spec.origin, "exec"), variants.__dict__)

sms = torch.cuda.get_device_properties(0).multi_processor_count
for hidden in (8192, 4096):
    rows = 16384
    x = torch.randn(rows, hidden, device="cuda").bfloat16()
    w = (1 + 0.1 * torch.randn(hidden, device="cuda")).bfloat16()
    dy = torch.randn(rows, hidden, device="cuda").bfloat16()
    _, rstd = T.forward(x, w)
    moved = (3 * rows + 2) * hidden * 2
    copy = timing.copy_bandwidth(rows * hidden * 2)
    results = {}
    for _ in range(3):  # rounds, interleaved
        for pps in (2, 4):
            T.PROGRAMS_PER_SM = pps
            T._split.cache_clear()
            for prefetch in (True, False):
                ms = timing.benchmark(T.backward, dy, x, w, rstd, prefetch=prefetch).median
                results.setdefault(f"backward() pps {pps} prefetch={prefetch}", []).append(ms)
            programs = cdiv(rows, cdiv(rows, pps * sms))
            dx, partial = torch.empty_like(x), torch.empty(programs, hidden, device="cuda")
            rpp = cdiv(rows, programs)
            launch = variants.bwd_prefetch[(programs,)]
            ms = timing.benchmark(launch, dy, x, w, rstd, dx, partial, rows, hidden, rpp,
                                  hidden, BLOCK=hidden, EVICT=False, num_warps=8).median
            results.setdefault(f"bare prefetch kernel pps {pps}", []).append(ms)
    print(f"hidden {hidden}, copy {copy:,.0f} GB/s (each: the median of 3 rounds)")
    for name, times in results.items():
        ms = sorted(times)[1]
        print(f"  {name:34s} {ms * 1e3:6.1f} us = {timing.gbps(moved, ms) / copy:.3f} of copy")
