"""Where a training step's time and memory go, read from the profiler.

* :func:`by_category`: a profile's kernels (device time on a GPU; on a CPU, the ATen ops with a
  CPU kernel) summed into the step's parts: the matmuls (cuBLAS), attention, the norms, the
  activation, the optimizer, and everything else (embeddings, casts, the loss, residual adds);
* :func:`launch_gaps`: the step's time (CUDA events around the whole step) minus the time some
  kernel was running: the GPU idle, waiting for the host to launch the next kernel;
* :func:`memory_timeline`: the memory allocated during one step, from the profiler's memory
  events (``profile_memory=True``; on a GPU the device's, on a CPU the host's), with the
  forward, backward and optimizer phases marked;
* :func:`saved_square_bytes`: the bytes of the tensors autograd keeps for the backward whose
  last two dims are (S, S): the attention probabilities and scores an unfused attention saves.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils.profiling import Profile
from kernels.model.train import Trainer

# first match wins: the names of cuBLAS's and PyTorch's kernels on a GPU, ATen's ops on a CPU
CATEGORIES = (
    # AdamW: one fused kernel on a GPU; on a CPU its ops (the norms use rsqrt, never sqrt)
    ("optimizer", re.compile(r"adam|multi_tensor|foreach|lerp_|addcdiv_|addcmul_|aten::sqrt\b",
                             re.I)),
    ("attention", re.compile(r"attention|attn|flash|fmha|softmax|masked_fill|triu", re.I)),
    ("norm", re.compile(r"rmsnorm|rms_norm|rsqrt", re.I)),
    ("activation", re.compile(r"gelu", re.I)),
    ("matmuls", re.compile(r"gemm|nvjet|cutlass|xmma|sm90_|sm80_|ampere|aten::(mm|addmm|bmm|"
                           r"matmul|linear)\b", re.I)),
)
ORDER = ("matmuls", "attention", "norm", "activation", "optimizer", "other")


def category(kernel: str) -> str:
    """The part of the step a kernel (or CPU op) belongs to, from its name."""
    for name, pattern in CATEGORIES:
        if pattern.search(kernel):
            return name
    return "other"


def by_category(profile: Profile) -> dict[str, float]:
    """Milliseconds per step in each part (:data:`ORDER`), from ``profile``'s kernels."""
    found = dict.fromkeys(ORDER, 0.0)
    for kernel, ms in profile.kernel_ms.items():
        found[category(kernel)] += ms
    return found


def launch_gaps(step_ms: float, profile: Profile) -> float:
    """Milliseconds of a step with no kernel running (negative values clamped: the two come
    from different runs)."""
    return max(0.0, step_ms - profile.kernel_time_ms)


@dataclass
class Timeline:
    """Memory allocated during one step: ``points`` are (ms since the step began, MiB above the
    start); ``phases`` (name -> (start ms, end ms))."""

    device: str
    points: list[tuple[float, float]]
    phases: dict[str, tuple[float, float]]

    @property
    def peak(self) -> float:
        return max((mib for _, mib in self.points), default=0.0)


PHASES = ("forward", "backward", "optimizer")


def memory_timeline(trainer: Trainer, tokens: torch.Tensor, targets: torch.Tensor) -> Timeline:
    """One training step under the profiler's memory tracking: allocated memory over time."""
    cuda = tokens.is_cuda
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    start = torch.cuda.memory_allocated() if cuda else 0
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        with torch.profiler.record_function("forward"):
            loss = trainer.loss(tokens, targets)
        with torch.profiler.record_function("backward"):
            loss.backward()
        with torch.profiler.record_function("optimizer"):
            trainer.optimizer.step()
            trainer.optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    phases = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in events
              if e.get("name") in PHASES and e.get("ph") == "X"}
    begin = min((a for a, _ in phases.values()), default=0.0)
    kind = 1 if cuda else 0  # the events' "Device Type": 0 the host, 1 CUDA
    base = start if cuda else 0  # CUDA's totals are absolute; the host's count from the start
    points = [((e["ts"] - begin) / 1e3, (e["args"]["Total Allocated"] - base) / 2**20)
              for e in events if e.get("name") == "[memory]"
              and e["args"].get("Device Type") == kind]
    return Timeline("cuda" if cuda else "cpu", sorted(points),
                    {k: ((a - begin) / 1e3, (b - begin) / 1e3) for k, (a, b) in phases.items()})


def saved_square_bytes(trainer: Trainer, tokens: torch.Tensor, targets: torch.Tensor) -> int:
    """Bytes autograd saved in one forward whose last two dims are (S, S), S the sequence
    length: measured by a saved-tensors hook (each storage counted once), not computed."""
    seq = tokens.shape[1]
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        if t.dim() >= 2 and tuple(t.shape[-2:]) == (seq, seq):
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = trainer.loss(tokens, targets)
    del loss  # no backward: the graph and what it saved are freed here
    return sum(seen.values())
