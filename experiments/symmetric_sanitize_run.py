r"""Probe (not course material): the course's symmetric-memory all-reduces under compute-sanitizer
on two GPUs, every method on ragged and round sizes, bf16 and fp32, each sum checked.

    compute-sanitizer --tool memcheck --target-processes all \
        python3 docs/results/symmetric_sanitize_run.py
"""
import torch

from kernels.distributed import launch, symmetric


def work() -> list[bool]:
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    ok = []
    for method in symmetric.METHODS:
        for numel in (1, 1000, 2049, 70001, 1 << 20):
            for dtype in (torch.bfloat16, torch.float32):
                t = torch.full((numel,), rank + 1.0, device="cuda", dtype=dtype)
                r = symmetric.all_reduce(t, method)
                torch.cuda.synchronize()
                ok.append(bool((r.float() == world * (world + 1) / 2).all()))
    return ok


if __name__ == "__main__":
    import symmetric_sanitize_run as me  # (a rank imports the function by its module's name)

    results = launch.run(me.work, 2, device="cuda")
    print("every sum right on every rank:", all(all(r) for r in results), len(results[0]),
          "calls per rank")
