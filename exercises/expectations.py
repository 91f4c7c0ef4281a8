"""What a check is made of: the verdicts it raises (:class:`Mismatch`, "not yet";
:class:`CannotCheck`, "cannot check here"), the :class:`Report` it writes lines to, and the
helpers every check uses to compare, to require a Triton launch, to draw awkward inputs and to
time against the copy ceiling. :mod:`exercises` registers and runs the checks; the names here
are re-exported there (``from exercises import expect, compare``).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Sequence
from unittest import mock

import torch

from course_utils import env, requirements


class Mismatch(Exception):
    """The answer is wrong: ``message`` says what, ``hint`` how to look for the cause."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


class CannotCheck(Exception):
    """This machine cannot run the check (no GPU, no NVRTC, ...): the reason in plain words."""


class Report:
    """Lines a check adds for the student (what it tried, what it measured)."""

    def __init__(self):
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


# --------------------------------------------------------------------------------------------
# Helpers for writing checks
# --------------------------------------------------------------------------------------------


def expect(condition: bool, message: str, hint: str = "") -> None:
    """Raise :class:`Mismatch` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise Mismatch(message, hint)


def compare(got, expected: torch.Tensor, *, what: str, atol: float | torch.Tensor = 1e-5,
            rtol: float = 1e-5, hint: str = "") -> None:
    """Mismatch unless ``got`` matches ``expected``: first its type, shape and dtype (all that
    is wrong among them, named), then its values; the message then names the first
    mismatching index with both values and how many elements differ. ``atol`` may be a tensor
    of ``expected``'s shape: a bound per element."""
    expect(isinstance(got, torch.Tensor),
           f"{what}: expected a tensor, got {type(got).__name__}", hint)
    wrong = []  # right values in the wrong dtype are still wrong: say so before any value
    if tuple(got.shape) != tuple(expected.shape):
        wrong.append(f"shape {tuple(expected.shape)}, got {tuple(got.shape)}")
    if got.dtype != expected.dtype:
        wrong.append(f"dtype {expected.dtype}, got {got.dtype}")
    # (the caller's hint is about values: a wrong shape or dtype gets its own)
    expect(not wrong, f"{what}: expected " + "; and ".join(wrong),
           "allocate the output with the shape and dtype the task asks for (like the input: "
           "torch.empty_like(x)), and return it without converting")
    g, e = got.detach().float().cpu(), expected.detach().float().cpu()
    if isinstance(atol, torch.Tensor):  # a bound per element (an error that varies with it)
        close = ((g - e).abs() <= atol.float().cpu() + rtol * e.abs()) | (g == e)
        bad = ~(close | (g.isnan() & e.isnan()))
    else:
        bad = ~torch.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
    if bad.any():
        first = tuple(int(i) for i in torch.nonzero(bad)[0])
        index = first if len(first) != 1 else first[0]
        raise Mismatch(f"{what}: {int(bad.sum())} of {bad.numel()} elements differ; first at "
                       f"index {index}: got {g[first].item():.6g}, expected "
                       f"{e[first].item():.6g}", hint)


def triton_launchers() -> list[type]:
    """The classes whose ``run`` launches a ``@triton.jit`` kernel: compiled (JITFunction) and
    interpreted (TRITON_INTERPRET=1). ``kernel[grid](...)`` and autotuners end in one of them."""
    found = []
    try:
        from triton.runtime.jit import JITFunction

        found.append(JITFunction)
        from triton.runtime.interpreter import InterpretedFunction

        found.append(InterpretedFunction)
    except ImportError:  # no Triton (or an older one without the interpreter class)
        pass
    return found


@contextlib.contextmanager
def triton_launches():
    """Count the Triton kernels launched inside the block: ``{kernel name: launches}``.

    It wraps the launchers' ``run`` for the duration (warm-up compiles are not launches), so
    it sees a launch on a GPU and under the interpreter on a CPU alike."""
    launched: collections.Counter[str] = collections.Counter()

    def counting(original):
        def run(self, *args, **kwargs):
            if not kwargs.get("warmup"):
                fn = getattr(self, "fn", self)
                launched[getattr(fn, "__name__", type(self).__name__)] += 1
            return original(self, *args, **kwargs)

        return run

    with contextlib.ExitStack() as stack:
        for cls in triton_launchers():
            stack.enter_context(mock.patch.object(cls, "run", counting(cls.__dict__["run"])))
        yield launched


def expect_triton_kernel(fn: Callable, args: Sequence, *, what: str) -> dict[str, int]:
    """Mismatch unless ``fn(*args)`` launches a Triton kernel: an exercise "in Triton" is not
    passed by plain PyTorch that computes the same values. On a GPU the profile must also
    show a CUDA kernel of that name (the launch really reached the device).
    Returns ``{kernel name: launches}``."""
    with triton_launches() as launched:
        fn(*args)
    expect(bool(launched), f"{what}: the values are right, but no Triton kernel was launched "
           "(the answer computes them with PyTorch operations)",
           "the exercise asks for a @triton.jit kernel: launch it with kernel[grid](...)")
    if env.HAS_CUDA and not env.TRITON_INTERPRET:
        from course_utils.profiling import count_kernels

        on_device = count_kernels(fn, *args, device="cuda")
        expect(any(name in kernel for name in launched for kernel in on_device),
               f"{what}: Triton launched {sorted(launched)}, but the GPU profile shows only "
               f"{sorted(on_device)}", "launch your kernel on the CUDA tensors it is given")
    return dict(launched)


def awkward_1d(device: str, dtype: torch.dtype = torch.float32,
               sizes: Sequence[int] = (1, 7, 1000, 4099)) -> list[tuple[str, torch.Tensor]]:
    """Fresh random 1-D inputs: odd lengths, empty, a view 4 bytes off alignment, a strided one."""
    cases = [(f"n={n}", torch.randn(n, device=device).to(dtype)) for n in sizes]
    cases.append(("empty", torch.empty(0, device=device, dtype=dtype)))
    cases.append(("misaligned view x[1:]", torch.randn(1026, device=device).to(dtype)[1:]))
    cases.append(("strided view x[::2]", torch.randn(2 * 513, device=device).to(dtype)[::2]))
    return cases


def bandwidth_verdict(report: Report, fn: Callable, args: Sequence, nbytes: int,
                      target: float = 0.8) -> float | None:
    """On a GPU: time ``fn(*args)``, compare its bytes/s with the copy bandwidth measured now on
    the same bytes, and add a printed verdict against ``target``. Returns the fraction of copy."""
    if not env.HAS_CUDA:
        report.line("speed: measured only on a GPU (the ceiling is the copy bandwidth)")
        return None
    from course_utils import timing

    copy = timing.copy_bandwidth(max(nbytes // 2, 1 << 20))
    gbs = timing.gbps(nbytes, timing.benchmark(fn, *args, name="your kernel").median)
    verdict = "meets" if gbs >= target * copy else "misses"
    report.line(f"speed: {gbs:,.0f} GB/s = {gbs / copy:.0%} of copy bandwidth ({copy:,.0f} "
                f"GB/s, same run): {verdict} the target (>= {target:.0%})")
    return gbs / copy


def needs(*names: str) -> None:
    """:class:`CannotCheck` with the reason unless this machine meets the requirements named."""
    if reasons := requirements.unmet(*names):
        raise CannotCheck(f"this check needs {' '.join(names)}: {'; '.join(reasons)}")
