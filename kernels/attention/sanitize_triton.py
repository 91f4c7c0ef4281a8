"""Lesson 09's Triton attention kernels under ``compute-sanitizer``: memcheck, racecheck and
synccheck over every kernel the variants run, forward and backward.

    python -m kernels.attention.sanitize_triton                 # the three tools, a summary
    compute-sanitizer --tool memcheck python -m kernels.attention.sanitize_triton --workload

``kernels/sanitize.py`` checks the course's CUDA kernels; Triton's are masked loads and stores
that the compiler writes, and a mask that lets one row too many through is exactly the bug a
tile on a ragged edge has. So the workload runs each kernel where its masks matter:

* the dense forward and backward (``("attention", "triton")``, autograd) on the registry's
  small cases: ragged lengths (77, 130 keys), cross and causal shapes, strided views,
  grouped-query heads and sliding windows;
* decoding (Sq = 1): the packed kernel that splits the keys and the merge of the splits
  (``triton_decode``), with grouped heads and a ragged cache length;
* packed sequences (``varlen_attention``), forward and backward, lengths 1, 63, 64, 65 and 130
  side by side, grouped heads, causal and not;
* the fp8 forward (``scaled_attention``, sm_89 and later) on its own op's cases.

Each part prints one status line (``kernels.sanitize.part``: the problems it ran, or the one it
failed on); the workload exits non-zero when one failed. Under the sanitizer every access is
checked, so the shapes stay small (a minute per tool on an H100).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import torch

import kernels
from course_utils import sanitizer
from kernels import sanitize
from kernels.registry import OPS

TOOLS = ("memcheck", "racecheck", "synccheck")
MODULE = "kernels.attention.sanitize_triton"  # (run as a script, __name__ is "__main__")
VARLEN_LENGTHS = (1, 63, 64, 65, 130)  # a single row, both sides of a 64-row tile, two tiles
DECODE_KEYS = (100, 3000)  # one split, and enough keys to be split across programs


def dense() -> Iterator[str]:
    """The registry's small cases through the Triton provider, forward then backward."""
    kernel = kernels.get_kernel("attention", "triton")
    for case, dtype, args in sanitize.small_cases(kernel, "cuda"):
        if kernel.supports(*args) is not None:
            continue
        yield f"{case.label} {str(dtype).removeprefix('torch.')}"
        q, k, v = (t.detach().clone().requires_grad_() for t in args[:3])
        kernel(q, k, v, *args[3:]).backward(torch.randn_like(q))


def decode() -> Iterator[str]:
    """One query per head over a KV cache: grouped heads (4 per K/V head) and not."""
    kernel = kernels.get_kernel("attention", "triton")
    for sk in DECODE_KEYS:
        for h, h_kv in ((8, 2), (4, 4)):
            yield f"Sk={sk} H={h} H_kv={h_kv}"
            q = torch.randn(2, h, 1, 64, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(2, h_kv, sk, 64, device="cuda", dtype=torch.bfloat16)
                    for _ in range(2))
            kernel(q, k, v)


def varlen() -> Iterator[str]:
    """Sequences of VARLEN_LENGTHS packed end to end, forward and backward."""
    from kernels.attention import varlen_attention
    from kernels.attention.varlen import cumulative

    cu = cumulative(VARLEN_LENGTHS, "cuda")
    total, longest = int(cu[-1]), max(VARLEN_LENGTHS)
    for causal in (False, True):
        yield f"causal={causal}"
        q = torch.randn(total, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(total, 2, 64, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True) for _ in range(2))
        out = varlen_attention(q, k, v, cu, cu, longest, longest, causal)
        out.backward(torch.randn_like(out))


def fp8() -> Iterator[str]:
    """The fp8 forward on its op's cases (skipped before sm_89: e4m3 needs it)."""
    kernel = kernels.get_kernel("scaled_attention", "triton")
    if why := kernel.unavailable():
        raise sanitize.Skip(why)
    for case in OPS["scaled_attention"].cases:
        args = case.make(torch.bfloat16, "cuda")
        if kernel.supports(*args) is None:
            yield case.label
            kernel(*args)


# each part runs its cases, yielding each one's label first (kernels.sanitize.part)
PARTS = {"dense forward + backward": dense, "decoding": decode, "varlen forward + backward": varlen,
         "fp8 forward": fp8}


def workload() -> int:
    torch.manual_seed(0)
    return max(sanitize.part(name, cases(), "problems") for name, cases in PARTS.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", action="store_true",
                        help="run the kernels (what the sanitizer wraps)")
    args = parser.parse_args(argv)
    if args.workload:
        return workload()

    def one(tool: str):
        return tool, sanitizer.run_module(tool, MODULE, "--workload", timeout=900)

    clean = True
    with ThreadPoolExecutor(len(TOOLS)) as pool:
        for tool, run in pool.map(one, TOOLS):
            lines = [ln for ln in run.output.splitlines() if ln.startswith(sanitize.MARK)]
            print(f"{tool}: {'clean' if run.clean else 'NOT clean'} (exit {run.returncode}, "
                  f"{run.summary_line})", *lines, sep="\n  ", flush=True)
            if not run.clean:
                print(run.output[-4000:], flush=True)
            clean &= run.clean
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
