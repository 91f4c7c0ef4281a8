"""GeLU written with PyTorch operations: by hand (one kernel per operation) and torch.compile'd.

The hand-written version is the formula as you would type it: every ``*``, ``+`` and ``tanh``
is its own kernel, reading its inputs from and writing its result to DRAM. ``torch.compile``
traces the same function and fuses it into one generated kernel (Triton on a GPU, C++ on a CPU).
"""

import functools

import torch

from kernels.gelu import FLOAT_DTYPES
from kernels.registry import register

SQRT_2_OVER_PI = 0.7978845608028654
CUBIC = 0.044715


def set_recompile_limit(limit: int) -> None:
    """Raise torch.compile's per-function recompile limit to ``limit`` (never lower it)."""
    import torch._dynamo

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), limit))


def compile_on_first_call(fn):
    """``torch.compile(fn)``, made when it is first called.

    Shapes are left to torch.compile's default: specialise on the first shape, recompile with a
    dynamic length when a second one comes. (dynamic=True up front picks the generated kernel's
    launch configuration from the first, small, size hint: 20x slower at 2^28 on an H200.) The
    matrix test compiles ~7 graphs per dtype; past the recompile limit (default 8 per function)
    torch.compile silently runs the function eagerly, so it is raised to 32.

    Made lazily because ``torch.compile`` imports dynamo and inductor, seconds of every
    ``import kernels`` (every notebook's first cell) that a notebook which never calls the
    compiled provider should not pay."""

    @functools.cache
    def compiled():
        set_recompile_limit(32)
        return torch.compile(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return compiled()(*args, **kwargs)

    return call


def _gelu_float32(x: torch.Tensor) -> torch.Tensor:
    # tanh saturates at +-1, and x*x*x overflowing to +-inf only drives it there: no NaN.
    inner = SQRT_2_OVER_PI * (x + CUBIC * (x * x * x))
    return 0.5 * x * (1.0 + torch.tanh(inner))


@register("gelu", "manual", dtypes=FLOAT_DTYPES)
def gelu_manual(x: torch.Tensor) -> torch.Tensor:
    """PyTorch ops by hand: one kernel per multiply, add and tanh."""
    if x.dtype == torch.float32:
        return _gelu_float32(x)
    # float16/bfloat16 in float32 (two more kernels), as the fused kernels do in registers
    return _gelu_float32(x.float()).to(x.dtype)


_compiled = compile_on_first_call(gelu_manual)


@register("gelu", "compile", dtypes=FLOAT_DTYPES, needs=("compile",))
def gelu_compiled(x: torch.Tensor) -> torch.Tensor:
    """torch.compile of the hand-written version: one fused kernel."""
    return _compiled(x)
