"""Probe (not course material): the RMSNorm forward+backward at 16k rows on a GPU."""
import torch

from course_utils import timing
from kernels.rmsnorm import triton_rmsnorm as T

print(torch.cuda.get_device_name(), torch.__version__)


def probe(hidden: int, rows: int = 16384) -> None:
    x = torch.randn(rows, hidden, device="cuda").bfloat16().requires_grad_()
    w = torch.ones(hidden, device="cuda").bfloat16().requires_grad_()
    dy = torch.randn(rows, hidden, device="cuda").bfloat16()
    xd, wd = x.detach(), w.detach()
    y, rstd = T.forward(xd, wd)

    def direct():
        yy, r = T.forward(xd, wd)
        return T.backward(dy, xd, wd, r)

    def via_grad():
        return torch.autograd.grad(T.RMSNormFunction.apply(x, w, 1e-6), (x, w), dy)

    def via_backward():
        T.RMSNormFunction.apply(x, w, 1e-6).backward(dy)
        x.grad = w.grad = None

    def ms(fn):
        return timing.benchmark(fn, device="cuda").median

    print(f"hidden {hidden}: fwd {ms(lambda: T.forward(xd, wd)):.3f} ms, "
          f"bwd {ms(lambda: T.backward(dy, xd, wd, rstd)):.3f} ms, direct f+b {ms(direct):.3f}, "
          f"autograd.grad {ms(via_grad):.3f}, .backward {ms(via_backward):.3f}", flush=True)
    torch.autograd.set_multithreading_enabled(False)
    print(f"  single-threaded autograd: autograd.grad {ms(via_grad):.3f}, "
          f".backward {ms(via_backward):.3f}", flush=True)
    torch.autograd.set_multithreading_enabled(True)
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        via_grad()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            via_grad()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA"),
                 key=lambda e: e.time_range.start)
    last = None
    for e in evs[-8:]:
        gap = "" if last is None else f" gap {e.time_range.start - last:.1f} us"
        print(f"  {e.name[:40]:40s} {e.time_range.elapsed_us():8.1f} us{gap}")
        last = e.time_range.end
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


for hidden in (4096, 8192):
    probe(hidden)
