"""``torch.compile`` for the ops' PyTorch providers (GeLU and softmax written by hand, fused by
the compiler), set up the way the course needs it: made on first call, recompile limit raised."""

import functools

import torch


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
