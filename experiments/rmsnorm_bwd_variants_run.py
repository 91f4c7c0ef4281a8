"""Probe (not course material): the RMSNorm backward kernel's variants at 16k rows on a GPU,
and the registered calls timed before and after the bench's own measurement in one process.

    python3 docs/results/rmsnorm_bwd_variants_run.py
"""
import time

import torch
import triton
import triton.language as tl

from course_utils import timing
from kernels.rmsnorm import bench
from kernels.rmsnorm import triton_rmsnorm as T
from kernels.triton_launch import cdiv, next_power_of_2

print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)


@triton.jit
def bwd_prefetch(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                 rows_per_program, stride, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    # contiguous rows only (probe): the next row's x and dy are loaded before this row's
    # reduction, so one program keeps a row's loads in flight while it reduces another
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    if EVICT:
        x_next = tl.load(x_ptr + first * stride + cols, mask=mask, other=0.0,
                         eviction_policy="evict_first")
        dy_next = tl.load(dy_ptr + first * stride + cols, mask=mask, other=0.0,
                          eviction_policy="evict_first")
    else:
        x_next = tl.load(x_ptr + first * stride + cols, mask=mask, other=0.0)
        dy_next = tl.load(dy_ptr + first * stride + cols, mask=mask, other=0.0)
    for row in range(first, last):
        x = x_next.to(tl.float32)
        dy = dy_next.to(tl.float32)
        ok = mask & (row + 1 < last)
        if EVICT:
            x_next = tl.load(x_ptr + (row + 1) * stride + cols, mask=ok, other=0.0,
                             eviction_policy="evict_first")
            dy_next = tl.load(dy_ptr + (row + 1) * stride + cols, mask=ok, other=0.0,
                              eviction_policy="evict_first")
        else:
            x_next = tl.load(x_ptr + (row + 1) * stride + cols, mask=ok, other=0.0)
            dy_next = tl.load(dy_ptr + (row + 1) * stride + cols, mask=ok, other=0.0)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)


@triton.jit
def bwd_staged(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
               rows_per_program, stride, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # the course's loop, handed to Triton's software pipeliner (tl.range num_stages)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in tl.range(first, last, num_stages=STAGES):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)


def variants(hidden: int, rows: int = 16384) -> None:
    x = torch.randn(rows, hidden, device="cuda").bfloat16()
    w = (1 + 0.1 * torch.randn(hidden, device="cuda")).bfloat16()
    dy = torch.randn(rows, hidden, device="cuda").bfloat16()
    y, rstd = T.forward(x, w)
    dx_ref, dw_ref = T.backward(dy, x, w, rstd)
    moved = (3 * rows + 2) * hidden * 2
    copy = timing.copy_bandwidth(rows * hidden * 2)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ms = timing.benchmark(lambda: T.backward(dy, x, w, rstd), device="cuda").median
    print(f"hidden {hidden}: copy {copy:.0f} GB/s; course backward() {ms * 1e3:.1f} us = "
          f"{timing.gbps(moved, ms) / copy:.3f} of copy", flush=True)
    block = next_power_of_2(hidden)
    for name, kern, extra in (("prefetch", bwd_prefetch, {"EVICT": False}),
                              ("prefetch+evict", bwd_prefetch, {"EVICT": True}),
                              ("staged2", bwd_staged, {"STAGES": 2}),
                              ("staged3", bwd_staged, {"STAGES": 3})):
        for pps in (1, 2, 4):
            for warps in (8, 16):
                programs = min(rows, pps * sms)
                rpp = cdiv(rows, programs)
                programs = cdiv(rows, rpp)
                dx = torch.empty_like(x)
                partial = torch.empty(programs, hidden, device="cuda")

                def call(kern=kern, programs=programs, dx=dx, partial=partial, rpp=rpp,
                         warps=warps, extra=extra):  # (bound now: called inside this step)
                    kern[(programs,)](dy, x, w, rstd, dx, partial, rows, hidden, rpp, hidden,
                                      BLOCK=block, num_warps=warps, **extra)
                try:
                    call()
                    torch.cuda.synchronize()
                except Exception as err:  # noqa: BLE001 - a probe: say and go on
                    print(f"  {name} pps {pps} warps {warps}: {type(err).__name__}: {err}"[:200])
                    continue
                ok = torch.allclose(dx.float(), dx_ref.float(), atol=2e-2, rtol=2e-2) and \
                    torch.allclose(partial.sum(0), dw_ref.float(), atol=0.5, rtol=2e-2)
                t = timing.benchmark(call, device="cuda").median
                print(f"  {name:15s} pps {pps} warps {warps:2d}: {t * 1e3:6.1f} us = "
                      f"{timing.gbps(moved, t) / copy:.3f} of copy{'' if ok else '  WRONG'}",
                      flush=True)


def registered(hidden: int, label: str, rows: int = 16384) -> None:
    x = torch.randn(rows, hidden, device="cuda").bfloat16().requires_grad_()
    w = (1 + 0.1 * torch.randn(hidden, device="cuda")).bfloat16().requires_grad_()
    dy = torch.randn(rows, hidden, device="cuda").bfloat16()
    kernel = next(k for k in bench.all_kernels("rmsnorm") if k.label == "triton")
    out = []
    for direction, make in (("fwd", bench._forward), ("bwd", bench._backward),
                            ("f+b", bench._forward_backward)):
        call, setup = make(kernel, x, w, dy)
        out.append(f"{direction} {timing.benchmark(call, device='cuda', setup=setup).median:.3f}")
    call, _ = bench._forward(kernel, x, w, dy)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(50):
        call()
    host = (time.perf_counter() - start) / 50 * 1e6
    torch.cuda.synchronize()
    print(f"registered triton at {hidden} ({label}): ms {', '.join(out)}; host enqueue of a "
          f"forward {host:.1f} us", flush=True)


registered(4096, "first thing in the process")
registered(8192, "first thing in the process")
for hidden in (8192, 4096):
    variants(hidden)
registered(4096, "after the variants")
for hidden in bench.HIDDEN:
    copy, table = bench.measure(hidden)
    for r in table:
        if r["ms"]:
            print(f"  bench.measure {hidden} {r['kernel']:10s} {r['pass']:16s} {r['ms']:.3f} ms "
                  f"{r['of copy']:.3f} of copy", flush=True)
    registered(hidden, "after bench.measure")
