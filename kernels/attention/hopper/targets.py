"""The Hopper forward's part of the attention measurements (``make bench``'s lesson key
``08_attention``; lesson 18 reads it): its target read from the records, and its timeline
saved for CPU students.

The timings themselves come from ``kernels.attention.bench`` (``make bench``): it measures every
registered attention kernel, so the five ``wgmma`` steps stand there beside SDPA's flash, cuDNN
and memory-efficient backends in the same run. This module adds:

* :func:`verdicts`: the targets (the last step's forward at least 0.85x SDPA's cuDNN backend at
  D = 128, S = 4096 to 16384; with the backward, forward + backward at least cuDNN's), read from
  those records, one line per problem;
* :func:`capture_timelines`: every step's in-kernel timeline at B=1, H=16, S=4096, D=128, saved
  as ``docs/results/<device>-attention-timeline.json`` (the Hopper matmul's format, lesson 17).
"""

from __future__ import annotations

from course_utils import env, results, timing

TARGET = 0.85  # x SDPA's cuDNN backend, forward, D = 128, S = 4096 ... 16384
BACKWARD_TARGET = 1.0  # x cuDNN's forward + backward, same problems (issue 34)
# what the H100's runs found limits the backward (attention_bwd.cu's header says more)
BACKWARD_LIMIT = ("two kernels recompute S = QKᵀ and dP = dO Vᵀ (7 matmuls per block pair where "
                  "one kernel summing dQ through atomics has 5); producer warpgroups for both "
                  "kernels (the dK/dV ring no longer refilled by a consumer, dQ overlapped with "
                  "the next tile) were correct and no faster (git 086fc23, docs/results/nvidia-"
                  "h100-80gb-hbm3-hopper-bwd-warpgroups-086fc23.log); the one kernel, version 2, "
                  "was slower (below)")
# and what limits version 2 (attention_bwd_fused.cu), the one kernel
FUSED_LIMIT = ("the one kernel saves the two recomputed matmuls, and its fp32 atomics into dQ and "
               "the trip of dSᵀ through shared memory cost more (git 32553e0, docs/results/"
               "nvidia-h100-80gb-hbm3-hopper-bwd-fused-32553e0.log)")
RECORDED = "nvidia-h100-80gb-hbm3"


def timeline_path(slug: str | None = None):
    return env.RESULTS_DIR / f"{slug or env.device_slug()}-attention-timeline.json"


def verdicts(records: list[results.Record], provider: str = "wgmma",
             passes: str = "fwd") -> list[str]:
    """``provider``'s forward (``passes="fwd"``) or forward + backward (``"fwd+bwd"``) against
    the cuDNN record of the same problem, one line each."""
    if passes not in ("fwd", "fwd+bwd"):
        raise ValueError(f"passes expected 'fwd' or 'fwd+bwd', got {passes!r}")
    target, why = ((TARGET, "same run, interleaved rounds") if passes == "fwd"
                   else (BACKWARD_TARGET, FUSED_LIMIT if "fused_bwd" in provider
                         else BACKWARD_LIMIT))
    by_what = {r.what: r for r in records if r.unit == "TFLOP/s"}
    lines = []
    for what, r in by_what.items():
        name, _, problem = what.partition(" ")
        if name != provider or not problem.startswith(f"{passes} ") or " D=128" not in problem:
            continue
        s = int(problem.split(" S=")[1].split()[0])
        cudnn = by_what.get(f"sdpa_cudnn {problem}")
        if cudnn is None or not 4096 <= s <= 16384:
            continue
        ratio = r.value / cudnn.value
        lines.append(timing.verdict(f"{provider} {problem} ≥ {target}× SDPA cuDNN",
                                    f"{ratio:.2f}× ({r.value:.0f} vs {cudnn.value:.0f} TFLOP/s)",
                                    ratio >= target, why))
    return lines


def runs_here() -> bool:
    """Whether this machine runs the Hopper steps (an sm_90 GPU)."""
    from kernels.matmul.hopper import wgmma

    return env.HAS_CUDA and wgmma.gpu_reason(env.device_info().capability) is None


def capture_timelines(path=None, shape=(1, 16, 4096, 128)):
    """Every step's timeline (GPU), saved for CPU students; prints each step's time shares."""
    from kernels.attention.hopper import fwd, timeline

    captured = {f"{s.name}: {s.idea}": timeline.capture(s.number, shape)
                for s in fwd.STEPS.values()}
    path = timeline.save(captured, path or timeline_path())
    for label, events in captured.items():
        shares = ", ".join(f"{k} {v:.0%}" for k, v in timeline.fractions(events).items())
        print(f"  {label[:40]:40s} consumers: {shares}")
    return path
