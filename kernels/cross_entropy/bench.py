"""Cross-entropy benchmark (lesson 12's assignment): forward + backward of the course's Triton
kernel against ``F.cross_entropy`` and the copy bandwidth, at GPT-2's 8192 x 50257 in bf16.

One call is the loss and the logits' gradient (``torch.autograd.grad``). Its bytes are counted
as the least any version must move: the logits read once and the gradient written once, both
bf16. The fused kernel reads the logits twice (the log-sum-exp, then the gradient), so by this
count its ceiling is 2/3 of the copy bandwidth, more where its second read hits L2. The peer is
``F.cross_entropy`` on the bf16 logits (what a model calls); beside it the op's reference (the
logits upcast to float32, as ``kernels/model/train.py`` computes its loss) and ``torch.compile``
of ``F.cross_entropy``, each with the memory it takes above the logits, all in the same run.

    python -m course bench cross_entropy      # on a GPU; on a CPU it says so and records nothing
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils import env, results, timing
from course_utils.plots import stamped_table
from kernels.registry import get_kernel, reference

LESSON = "model.cross_entropy"
PROBLEM = (8192, 50257)  # GPT-2 small at 8 x 1024 tokens
QUICK = (1024, 50257)
PEER = "F.cross_entropy (bf16 logits)"


def providers() -> dict:
    """name -> ``fn(logits, targets)``: the course's kernel, its peers."""
    return {"triton": get_kernel("cross_entropy", "triton"),
            PEER: F.cross_entropy,
            "eager reference (float32 logits)": reference("cross_entropy"),
            "torch.compile(F.cross_entropy)": torch.compile(F.cross_entropy)}


def measure(n: int, v: int, min_time_s: float = 0.2) -> tuple[float, int, list[dict]]:
    """(copy bandwidth in GB/s on the same bytes, the bytes counted, one row per provider:
    ms, GB/s, of copy, memory above the logits)."""
    logits = torch.randn(n, v, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, v, (n,), device="cuda")
    nbytes = 2 * timing.tensor_bytes(logits)  # logits read, gradient written
    copy = timing.copy_bandwidth(nbytes // 2, min_time_s=min_time_s)
    rows = []
    for name, fn in providers().items():
        def step(fn=fn):
            return torch.autograd.grad(fn(logits, targets), logits)

        step()  # compiles (Triton, torch.compile) outside the timing
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        ms = timing.benchmark(step, name=name, min_time_s=min_time_s).median
        gbs = timing.gbps(nbytes, ms)
        rows.append({"kernel": name, "ms": ms, "GB/s": gbs, "of copy": gbs / copy,
                     "GB above the logits": (torch.cuda.max_memory_allocated() - base) / 1e9})
    return copy, nbytes, rows


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if not env.HAS_CUDA:
        print("cross-entropy bench skipped: it times forward + backward on a CUDA GPU, and this "
              "machine has none (nothing recorded)")
        return []
    n, v = QUICK if quick else PROBLEM
    copy, nbytes, rows = measure(n, v)
    print(stamped_table([{**r, "copy GB/s": copy} for r in rows],
                        title=f"Cross-entropy forward + backward, {n}x{v} bf16 "
                              f"({nbytes / 1e9:.2f} GB: logits read, gradient written)"))
    peer = next(r for r in rows if r["kernel"] == PEER)
    records: list[results.Record | results.Note] = []
    for row in rows:
        if row["kernel"] == PEER:
            continue
        records.append(results.Record(
            lesson=LESSON, what=f"cross_entropy {row['kernel']} forward+backward bf16 {n}x{v}",
            value=round(row["GB/s"], 1), unit="GB/s",
            ceiling=round(copy, 1), ceiling_what="device copy bandwidth, same run",
            peer=round(peer["GB/s"], 1), peer_what=f"{PEER}, same run"))
    records.append(results.Note(LESSON, "Memory above the logits during one forward + backward: "
                                + "; ".join(f"{r['kernel']} {r['GB above the logits']:.2f} GB"
                                            for r in rows)))
    return records
