"""Every registered kernel of an op on one problem, side by side: memory-bound ops against the
copy bandwidth (:func:`memory_bound`), compute-bound ones in TFLOP/s (:func:`compute_bound`).

The ceiling of an elementwise or row-wise kernel is the device's copy bandwidth on the same
bytes, and its peer is the op's reference (PyTorch's own kernel); both are measured here, in the
same run as the kernels, so the ratios mean something on any machine.
"""

from __future__ import annotations

import torch

from course_utils import timing
from kernels.registry import Kernel, get_kernels, reference


def memory_bound(op: str, x: torch.Tensor, *, peer_column: str,
                 providers: list[Kernel] | None = None,
                 min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time each kernel of ``op`` on ``x`` (one read and one write of ``x``'s bytes).

    Returns (copy bandwidth in GB/s on the same bytes, one row per kernel with kernel, ms, GB/s,
    "of copy" and ``peer_column`` = reference time ÷ kernel time). A kernel that cannot run ``x``
    here gets a row with its reason in "note" instead of a time.
    """
    nbytes = 2 * timing.tensor_bytes(x)
    copy = timing.copy_bandwidth(nbytes // 2, device=x.device.type, min_time_s=min_time_s)
    peer_ms = timing.benchmark(reference(op), x, name=f"{op} reference",
                               min_time_s=min_time_s).median
    rows = []
    for kernel in providers or get_kernels(op):
        if reason := kernel.supports(x):
            rows.append({"kernel": kernel.label, "ms": None, "GB/s": None, "of copy": None,
                         peer_column: None, "note": reason})
            continue
        kernel.load()  # a first-call build is not part of the time
        ms = (peer_ms if kernel.is_reference else
              timing.benchmark(kernel, x, name=kernel.name, min_time_s=min_time_s).median)
        gbs = timing.gbps(nbytes, ms)
        rows.append({"kernel": kernel.label, "ms": ms, "GB/s": gbs, "of copy": gbs / copy,
                     peer_column: peer_ms / ms, "note": ""})
    return copy, rows


def compute_bound(op: str, *args: torch.Tensor, flop: int, peer_column: str,
                  providers: list[Kernel] | None = None,
                  min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time each kernel of ``op`` on ``args`` (``flop`` floating-point operations per call).

    Returns (the reference's TFLOP/s, one row per kernel with kernel, ms, TFLOP/s and
    ``peer_column`` = kernel TFLOP/s ÷ the reference's, measured in the same run). A kernel that
    cannot run ``args`` here gets a row with its reason in "note" instead of a time.
    """
    peer_ms = timing.benchmark(reference(op), *args, name=f"{op} reference",
                               min_time_s=min_time_s).median
    peer = timing.tflops(flop, peer_ms)
    rows = []
    for kernel in providers or get_kernels(op):
        if reason := kernel.supports(*args):
            rows.append({"kernel": kernel.label, "ms": None, "TFLOP/s": None,
                         peer_column: None, "note": reason})
            continue
        kernel.load()  # a first-call build is not part of the time
        ms = (peer_ms if kernel.is_reference else
              timing.benchmark(kernel, *args, name=kernel.name, min_time_s=min_time_s).median)
        rows.append({"kernel": kernel.label, "ms": ms, "TFLOP/s": timing.tflops(flop, ms),
                     peer_column: peer_ms / ms, "note": ""})
    return peer, rows
