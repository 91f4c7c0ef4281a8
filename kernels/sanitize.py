"""Every registered CUDA kernel under ``compute-sanitizer``: memcheck, racecheck, initcheck and
synccheck, on the registry's own cases (the small ones).

    python -m course sanitize                    # every CUDA kernel, every tool
    python -m course sanitize --only matmul/mma  # kernels whose name contains a part given
    python -m course sanitize --tools memcheck

A kernel is CUDA code when it ``needs`` nvcc or NVRTC (a ``load_inline`` extension, an NVRTC
kernel), or when its metadata says ``meta={"sanitize": True}`` (another compiler of CUDA code);
``meta={"sanitize": False}`` leaves one out. So a new lesson's kernels join by being
registered, as they join the matrix test.

One child process per tool runs every kernel (the sanitizer's start-up, ~15 s, is paid once
per tool, and the four tools run side by side). When a tool reports errors, each kernel then
runs alone under that tool, so the summary says which kernel has them. The summary goes to
``docs/results/<device-slug>-sanitizer.txt``: per kernel and tool, ``clean``, the error count,
or why it did not run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

import kernels
from course_utils import env, requirements, sanitizer
from kernels.registry import OPS, Case, Kernel

CUDA_NEEDS = {"nvcc", "nvrtc"}
# inputs above this many elements are left out: the sanitizer replays every access, and the
# awkward cases (odd sizes, views, empty) are the small ones anyway
MAX_ELEMENTS = 1 << 17
MARK = "@@sanitize"  # the workload's status lines: "@@sanitize <kernel name> | <status>"


def is_cuda_kernel(kernel: Kernel) -> bool:
    flag = kernel.meta.get("sanitize")
    return flag if isinstance(flag, bool) else bool(CUDA_NEEDS & set(kernel.needs))


def cuda_kernels(only: list[str] | tuple[str, ...] = ()) -> list[Kernel]:
    """The registered CUDA kernels (whose name contains one of ``only``, when given)."""
    return [k for k in kernels.all_kernels() if is_cuda_kernel(k)
            and (not only or any(part in k.name for part in only))]


def small_cases(kernel: Kernel, device: str) -> list[tuple[Case, torch.dtype, tuple]]:
    """The (case, dtype, inputs) of the kernel's op whose inputs hold at most MAX_ELEMENTS
    elements each, in the op's dtypes and the kernel's own (int8 and fp8 matmuls, which the
    op's matrix-test dtypes leave out)."""
    spec = OPS[kernel.op]
    dtypes = list(dict.fromkeys([*spec.dtypes, *kernel.dtypes]))
    chosen = []
    for case in spec.cases:
        for dtype in dtypes:
            args = _operand_types(kernel, case.make(dtype, device))
            if all(a.numel() <= MAX_ELEMENTS for a in args if isinstance(a, torch.Tensor)):
                chosen.append((case, dtype, args))
    return chosen


def _operand_types(kernel: Kernel, args: tuple) -> tuple:
    """A case makes both matmul operands in one dtype; a kernel whose A and B differ (fp8 e4m3 x
    e5m2) gets each converted to its own (``meta["a"]``, ``meta["b"]``), layout kept."""
    a, b = kernel.meta.get("a"), kernel.meta.get("b")
    if not (isinstance(a, torch.dtype) and isinstance(b, torch.dtype) and a != b
            and len(args) >= 2 and all(isinstance(x, torch.Tensor) for x in args[:2])):
        return args
    return (args[0].to(a), args[1].to(b), *args[2:])


# -- the workload: runs in the sanitizer's child process -------------------------------------

class Skip(Exception):
    """Raised by a part of a workload that cannot run here; its message says why."""


def part(name: str, cases: Iterator[str], unit: str = "cases") -> int:
    """Run one part of a workload and print its status line, ``@@sanitize <name> | <status>``:
    ``ran <N> <unit>``, ``skipped: <why>`` (it raised :class:`Skip`), or ``failed on <case>:
    <error type>: <the message's first line>``. 1 if it failed, else 0: a failed part is
    reported and the workload goes on with the others.

    ``cases`` is a generator that runs the part's cases one by one and yields each one's label
    just before running it, so that a failure names its case. The GPU is waited for after each
    case: the sanitizer reports when a kernel ends, and an error a kernel causes surfaces at
    the wait, still under its own case's label."""
    ran, where, failed = 0, "making the inputs", False
    try:
        for label in cases:
            _wait()  # for the case before this one (resuming the generator ran it)
            ran, where = ran + 1, label
        _wait()
        status = f"ran {ran} {unit}"
    except Skip as why:
        status = f"skipped: {why}"
    except Exception as err:  # say which part and case, and go on with the others
        first = (str(err).strip().splitlines() or [""])[0]
        status, failed = f"failed on {where}: {type(err).__name__}: {first}", True
    print(f"{MARK} {name} | {status}", flush=True)
    return int(failed)


def _wait() -> None:
    if torch.cuda.is_initialized():  # (nothing was launched otherwise)
        torch.cuda.synchronize()


def _small_cases_run(kernel: Kernel) -> Iterator[str]:
    """The kernel on each of its op's small cases that it takes."""
    if reason := kernel.unavailable():
        raise Skip(reason)
    ran = False
    for case, dtype, args in small_cases(kernel, "cuda"):
        if kernel.supports(*args) is None:  # a case this kernel does not take: not run
            yield f"{case.label} {str(dtype).removeprefix('torch.')}"
            kernel(*args)
            ran = True
    if not ran:
        raise Skip("no case of its op fits it")


def workload(names: list[str]) -> int:
    """Run each named kernel on its op's small cases; print one status line per kernel."""
    torch.manual_seed(0)
    wanted = [k for k in cuda_kernels() if k.name in names] if names else cuda_kernels()
    return max([part(k.name, _small_cases_run(k)) for k in wanted], default=0)


def statuses(output: str) -> dict[str, str]:
    """``{kernel name: status}`` from the workload's lines in a sanitizer run's output."""
    found = {}
    for line in output.splitlines():
        if line.startswith(MARK + " ") and " | " in line:
            name, status = line[len(MARK) + 1:].split(" | ", 1)
            found[name] = status
    return found


# -- the runner: the sanitizer over the workload, one child per tool -------------------------

@dataclass
class ToolResult:
    tool: str
    command: str
    summary_line: str
    seconds: float
    verdicts: dict[str, str] = field(default_factory=dict)  # kernel name -> verdict


def _verdict(status: str, counts: tuple[int, int] | None) -> str:
    if not status.startswith("ran "):
        return status or "did not run (the workload stopped before it)"
    if counts is None:
        return "no sanitizer summary (the child crashed or timed out)"
    errors, warnings = counts
    if errors == warnings == 0:
        return "clean"
    return f"{errors} errors" + (f", {warnings} warnings" if warnings else "")


def run_tool(tool: str, names: list[str]) -> ToolResult:
    """One child under ``tool`` running every kernel; per-kernel children if it found errors."""
    start = time.perf_counter()
    done = sanitizer.run_module(tool, "kernels.sanitize", "--workload", *names)
    result = ToolResult(tool, done.command, done.summary_line, 0.0)
    status = statuses(done.output)
    if done.counts() == (0, 0):  # nothing found: every kernel that ran is clean
        result.verdicts = {n: _verdict(status.get(n, ""), (0, 0)) for n in names}
    else:  # attribute: each kernel alone, so its errors are its own
        with ThreadPoolExecutor(max_workers=8) as pool:
            alone = dict(zip(names, pool.map(
                lambda n: sanitizer.run_module(tool, "kernels.sanitize", "--workload", n),
                names), strict=True))
        result.verdicts = {n: _verdict(statuses(r.output).get(n, ""), r.counts())
                           for n, r in alone.items()}
    result.seconds = time.perf_counter() - start
    return result


def build_all(chosen: list[Kernel]) -> dict[str, str]:
    """Build every kernel here first: the children then load from the caches instead of
    compiling under the sanitizer. ``{name: why it cannot build}`` for those that cannot."""
    problems = {}
    for kernel in chosen:
        if kernel.unavailable() is None:
            try:
                kernel.load()
            except Exception as err:
                problems[kernel.name] = f"build failed: {type(err).__name__}: {err}"
    return problems


def render(results: list[ToolResult], names: list[str]) -> str:
    """The summary text: a table of kernel x tool, then each tool's command and summary."""
    tools = [r.tool for r in results]
    width = max([len(n) for n in names] + [6])
    lines = [f"# compute-sanitizer over every registered CUDA kernel, the registry's cases up "
             f"to {MAX_ELEMENTS} elements", f"# {env.environment_line()}", "",
             f"{'kernel':{width}s}  " + "  ".join(f"{t:10s}" for t in tools)]
    for name in names:
        cells = [r.verdicts.get(name, "-") for r in results]
        if all(len(c) <= 10 for c in cells):
            lines.append(f"{name:{width}s}  " + "  ".join(f"{c:10s}" for c in cells).rstrip())
        else:  # a long reason gets a line of its own
            lines.append(f"{name:{width}s}  " + "; ".join(f"{t}: {c}"
                                                          for t, c in zip(tools, cells,
                                                                          strict=True)))
    lines.append("")
    for r in results:
        lines += [f"$ {r.command} <kernels>", f"  {r.summary_line}   ({r.seconds:.0f} s)"]
    clean = sum(all(r.verdicts.get(n) == "clean" for r in results) for n in names)
    lines += ["", f"{clean} of {len(names)} kernels clean under {', '.join(tools)}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course sanitize", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=[],
                        help="kernels whose name contains one of these (default: all)")
    parser.add_argument("--tools", nargs="*", default=list(sanitizer.TOOLS),
                        choices=sanitizer.TOOLS, help="sanitizer tools (default: all four)")
    parser.add_argument("--out", default=str(env.RESULTS_DIR),
                        help="folder for <device-slug>-sanitizer.txt (default: docs/results)")
    parser.add_argument("--workload", nargs="*", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload is not None:  # the child under the sanitizer
        return workload(args.workload)
    if reasons := requirements.unmet("cuda"):
        print(f"sanitize: needs a CUDA GPU: {'; '.join(reasons)}", file=sys.stderr)
        return 2
    if sanitizer.path() is None:
        print("sanitize: compute-sanitizer not found (it ships with the CUDA toolkit: "
              "put its bin/ on PATH or set CUDA_HOME)", file=sys.stderr)
        return 2
    chosen = cuda_kernels(args.only)
    if not chosen:
        parser.error(f"only: no registered CUDA kernel matches {args.only}")
    problems = build_all(chosen)
    names = [k.name for k in chosen if k.name not in problems]
    print(f"sanitize: {len(names)} kernels under {', '.join(args.tools)}", flush=True)
    with ThreadPoolExecutor(max_workers=len(args.tools)) as pool:
        results = list(pool.map(lambda tool: run_tool(tool, names), args.tools))
    for result in results:
        result.verdicts.update(problems)
    text = render(results, [k.name for k in chosen])
    path = Path(args.out) / f"{env.device_slug()}-sanitizer.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text + f"wrote {path}")
    every = [v for r in results for v in r.verdicts.values()]
    return 0 if all(v == "clean" or v.startswith("skipped") for v in every) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
