"""RMSNorm benchmark: every provider, forward, backward and both, against copy bandwidth.

RMSNorm is memory-bound: per element it does a handful of flops and moves 2 (bf16) bytes each
way. So each timing becomes *bytes that must move ÷ time*, set against the device's copy
bandwidth on the same bytes, measured in the same run:

* forward: read x, write y (and the weight, once): ``2·R·H`` elements;
* backward: read dy and x, write dx (and the weight and dweight, once): ``3·R·H`` elements,
  timed as ``torch.autograd.grad`` of a forward made (untimed) before each call, so what a
  caller's ``.backward()`` runs: autograd's engine, the provider's backward and its kernels;
* forward + backward: the forward, then read dy and x again, write dx (and dweight, once):
  ``5·R·H`` elements. (x is read twice: between the two passes runs the rest of the network.)

A call alone leaves the GPU idle while the host works: autograd hands the backward to a thread
of its own and a Python ``autograd.Function`` takes the GIL there, about as long as the kernels
take at 4096 features (``docs/results/*rmsnorm-autograd*``). In a model that host time runs
while the layers queued before keep the GPU busy. The ``-deep`` passes measure that: the same
op ``DEPTH`` times in a row, each layer with its own weight and the next layer's input its
output, timed as one call and divided by ``DEPTH`` (the bytes per layer are the single call's).

The peer is PyTorch's own fused ``F.rms_norm``; Liger-Kernel's Triton RMSNorm joins as another
peer row where ``liger_kernel`` is installed (it is not a course requirement).

    python -m course bench rmsnorm      # bf16, 16384 rows of 4096 and 8192 on a GPU
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from course_utils import env, results, timing
from course_utils.plots import stamped_table
from kernels.registry import all_kernels
from kernels.rmsnorm.op import EPS

LESSON = "rmsnorm"  # its own records: running it alone keeps lesson 02's softmax records
HIDDEN = (4096, 8192)
GPU_ROWS = 16384
CPU_ROWS = 64  # the Triton kernel runs in the interpreter there: keep it small
PEER = "F.rms_norm"
DIRECTIONS = ("forward", "backward", "forward+backward", "backward-deep",
              "forward+backward-deep")
DEPTH = 8  # layers in a row for the -deep passes: the host's share spread over 8 kernels' time


def _liger() -> tuple[object | None, str]:
    """Liger-Kernel's RMSNorm as ``fn(x, weight, eps)``, or None and why not."""
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except ImportError as err:
        return None, f"liger_kernel is not installed ({err.name})"
    # in_place=False where the version has it: in place, its backward overwrites dy with dx
    takes_in_place = "in_place" in inspect.signature(LigerRMSNormFunction.forward).parameters
    extra = (0.0, "llama", False) if takes_in_place else ()
    return (lambda x, w, eps: LigerRMSNormFunction.apply(x, w, eps, *extra)), ""


def candidates(x: torch.Tensor, w: torch.Tensor, names: list[str] | None = None
               ) -> list[tuple[str, object | None, str]]:
    """``(label, fn(x, weight, eps), reason)`` per provider: every registered rmsnorm kernel,
    then the peers; ``fn`` is None where it cannot run here, with the reason."""
    found = []
    for kernel in all_kernels("rmsnorm"):
        reason = kernel.supports(x, w, EPS)
        found.append((kernel.label, None if reason else kernel, reason or ""))
    found.append((PEER, lambda a, b, eps: F.rms_norm(a, (a.shape[-1],), b, eps), ""))
    liger, why = _liger()
    if liger is not None and not x.is_cuda:
        liger, why = None, "Liger's kernels need a CUDA GPU"
    found.append(("liger", liger, why))
    return [c for c in found if names is None or c[0] in names]


def _forward(fn, x, w, dy):
    """(call, setup) of the forward alone: no graph, nothing saved for a backward."""
    def call():
        with torch.no_grad():
            return fn(x, w, EPS)
    return call, None


def _backward(fn, x, w, dy):
    """(call, setup) of the backward alone, as a caller's ``.backward()`` runs it: the setup
    makes a forward and its graph, untimed, before each call; the call is autograd's backward
    of it (the graph used up, as in training)."""
    def setup():
        return (fn(x, w, EPS),)

    def call(y):
        return torch.autograd.grad(y, (x, w), dy)
    return call, setup


def _forward_backward(fn, x, w, dy):
    """(call, setup) of both passes, as a training step runs them."""
    def call():
        y = fn(x, w, EPS)
        # grad(), not backward(): nothing accumulates into x.grad between calls
        return torch.autograd.grad(y, (x, w), dy)
    return call, None


def _layers(fn, x, weights):
    """``DEPTH`` layers of ``fn`` in a row, each with its weight: what a model's stack does."""
    y = x
    for w in weights:
        y = fn(y, w, EPS)
    return y


def _deep_backward(fn, x, w, dy):
    """(call, setup) of the backward of ``DEPTH`` layers: the setup runs their forwards, the
    call is autograd's backward through all of them (each layer's weight gets its gradient)."""
    weights = [w.detach().clone().requires_grad_() for _ in range(DEPTH)]

    def setup():
        return (_layers(fn, x, weights),)

    def call(y):
        return torch.autograd.grad(y, (x, *weights), dy)
    return call, setup


def _deep_forward_backward(fn, x, w, dy):
    """(call, setup) of the forwards and the backward of ``DEPTH`` layers, one training step's
    share of them."""
    weights = [w.detach().clone().requires_grad_() for _ in range(DEPTH)]

    def call():
        return torch.autograd.grad(_layers(fn, x, weights), (x, *weights), dy)
    return call, None


def measure(hidden: int, dtype: torch.dtype = torch.bfloat16, rows: int | None = None,
            device: str | None = None, names: list[str] | None = None,
            min_time_s: float = 0.2) -> tuple[float, list[dict]]:
    """Time every provider on a (rows x hidden) problem in every pass of ``DIRECTIONS``.

    Returns (copy bandwidth in GB/s, one row per provider and direction with ms, GB/s,
    "of copy", "vs F.rms_norm" (its time ÷ this one's), or the reason it did not run)."""
    device = device or env.DEFAULT_DEVICE
    rows = rows or (GPU_ROWS if device == "cuda" else CPU_ROWS)
    x = torch.randn(rows, hidden, device=device).to(dtype).requires_grad_()
    w = (1 + 0.1 * torch.randn(hidden, device=device)).to(dtype).requires_grad_()
    dy = torch.randn(rows, hidden, device=device).to(dtype)
    size = x.element_size()
    moved = {"forward": (2 * rows + 1) * hidden * size,
             "backward": (3 * rows + 2) * hidden * size,
             "forward+backward": (5 * rows + 2) * hidden * size}
    moved.update({f"{d}-deep": moved[d] for d in ("backward", "forward+backward")})  # per layer
    timed = {"forward": _forward, "backward": _backward, "forward+backward": _forward_backward,
             "backward-deep": _deep_backward, "forward+backward-deep": _deep_forward_backward}
    copy = timing.copy_bandwidth(rows * hidden * size, device=device, min_time_s=min_time_s)
    table = []
    for label, fn, reason in candidates(x, w, names):
        for direction in DIRECTIONS:
            row = {"kernel": label, "hidden": hidden, "pass": direction, "ms": None,
                   "GB/s": None, "of copy": None, f"vs {PEER}": None, "note": reason}
            if fn is not None:
                call, setup = timed[direction](fn, x, w, dy)
                ms = timing.benchmark(call, name=f"rmsnorm {label} {direction}", device=device,
                                      min_time_s=min_time_s, setup=setup).median
                ms /= DEPTH if direction.endswith("-deep") else 1  # per layer
                gbs = timing.gbps(moved[direction], ms)
                row.update({"ms": ms, "GB/s": gbs, "of copy": gbs / copy})
            table.append(row)
    for row in table:  # each direction against the peer's time in the same direction
        peer = next((r["ms"] for r in table if r["kernel"] == PEER
                     and r["pass"] == row["pass"]), None)
        if row["ms"] and peer:
            row[f"vs {PEER}"] = peer / row["ms"]
    return copy, table


def run(quick: bool = False) -> list[results.Record]:
    rows = (GPU_ROWS // (4 if quick else 1)) if env.HAS_CUDA else CPU_ROWS
    hiddens = HIDDEN[:1] if quick else HIDDEN
    records, table = [], []
    for hidden in hiddens:
        copy, found = measure(hidden, torch.bfloat16, rows)
        table += [{**r, "copy GB/s": copy} for r in found]
        for r in found:
            peer = next((p["GB/s"] for p in found if p["kernel"] == PEER
                         and p["pass"] == r["pass"]), None)
            if r["GB/s"] is None or r["kernel"] in ("eager", PEER) or peer is None:
                continue
            records.append(results.Record(
                lesson=LESSON, what=f"rmsnorm {r['kernel']} {r['pass']} bf16 {rows}x{hidden}",
                value=round(r["GB/s"], 1), unit="GB/s",
                ceiling=round(copy, 1), ceiling_what="device copy bandwidth, same run",
                peer=round(peer, 1), peer_what=f"{PEER} (PyTorch's fused kernel), same run"))
    print(stamped_table(table, title="RMSNorm, bf16, bytes that must move ÷ time"))
    return records


# the targets of the course (issue 32): each pass of the Triton kernels at >= 85% of copy and at
# least as fast as torch.compile's fused kernel
TARGET_OF_COPY = 0.85
# what the H100's runs found where a Triton pass missed (the files named hold them)
HOST_SIDE = ("the host, not the kernel: the same forward was timed at 1.02 and 1.00 of copy at "
             "4096 and 8192 at e5bced5 (docs/results/nvidia-h100-80gb-hbm3-rmsnorm-bench-"
             "e5bced5.log) and at 0.65 at 4096 at 506ae76, the kernel unchanged: a registered "
             "call's host time drifts between processes on one box (lesson 11's overhead table)")
HOST_BOUND = ("the host: the same backward 8 layers deep, where autograd's host time runs behind "
              "the layers queued before as in a model, moved 0.87 (4096) and 0.89 (8192) of copy "
              "at 5327248, and F.rms_norm's own backward alone 0.42 and 0.40 "
              "(docs/results/nvidia-h100-80gb-hbm3-rmsnorm-bench-5327248.log); alone, a call "
              "follows a fresh forward whose 0.1-0.2 ms of GPU work is all that hides autograd's "
              "hand-over to its device thread and the Python backward (a tiny forward + backward: "
              "274 µs of host time against F.rms_norm's 147, docs/results/nvidia-h100-80gb-hbm3-"
              "host-probe-3024be9.txt)")


def _why_missed(direction: str, hidden: int) -> str:
    return HOST_SIDE if direction == "forward" else HOST_BOUND


def recorded_verdicts(recorded) -> list[str]:
    """The targets read from a GPU's records (:func:`course_utils.claims.with_lesson`), one line
    each, with the environment that measured them: what a CPU shows of section 5 of A3."""
    found = {r.what: r for r in recorded.of(LESSON)}
    lines = [f"recorded on {recorded.environment_line(LESSON)}:"]
    for what, r in found.items():
        if not what.startswith("rmsnorm triton "):
            continue
        compiled = found.get(what.replace(" triton ", " compile "))
        direction, hidden = what.split()[2], int(what.split("x")[-1])
        why = _why_missed(direction, hidden)
        lines.append(timing.verdict(f"{what}: ≥ {TARGET_OF_COPY:.0%} of copy",
                                    f"{r.value / r.ceiling:.0%} ({r.value:,.0f} of "
                                    f"{r.ceiling:,.0f} GB/s)",
                                    r.value >= TARGET_OF_COPY * r.ceiling, why))
        if compiled:
            lines.append(timing.verdict(f"{what}: ≥ 1.0× torch.compile",
                                        f"{r.value / compiled.value:.2f}×",
                                        r.value >= compiled.value, why))
    return lines
