"""The model's layers, each calling the kernel the registry names for its op.

A layer does not import a kernel: it is given the :class:`~kernels.registry.Kernel` that
:func:`resolve` found by name (``kernels.get_kernel("attention", "triton")``), so one model runs
all-eager, or with the course's kernels swapped in one op at a time (:meth:`Transformer.use`).
The matmuls are ``nn.Linear`` (cuBLAS on a GPU).

Before a model runs, :func:`refusals` asks each chosen kernel whether it can run the problems
the model will give it, with the shapes, strides, dtypes and device of a real step:
``kernel.supports(...)`` (no GPU, a head dim the kernel does not take, ...) and, because a
training step needs gradients, whether it has a backward. A refusal is the registry's reason in
words; nothing is launched that would fail. Once checked, a layer calls the kernel's built
function directly (``kernel.load()``): the registry's per-call checks cost host time on every
call (lesson 11 measures them), and their answer cannot change while the shapes stay the same.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from kernels.model.config import ModelConfig, Providers
from kernels.registry import OPS, Kernel, KernelNotSupported, get_kernel

_NAME = re.compile(r"^(?P<provider>[^\[\]]+)(?:\[(?P<variant>[^\[\]]+)\])?$")


def resolve(op: str, name: str) -> Kernel:
    """The registered kernel ``name`` of ``op`` ("triton", or "cuda[vectorized]" for a
    variant); ValueError listing the op's kernels for a name that is not registered."""
    m = _NAME.match(name.strip()) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"{op} provider expected a name like 'triton' or 'cuda[vectorized]', "
                         f"got {name!r}")
    try:
        return get_kernel(op, m["provider"], m["variant"])
    except KeyError as err:
        raise ValueError(f"{op} provider {name!r}: {err.args[0]}") from None


def problems(config: ModelConfig, batch: int, seq: int, dtype: torch.dtype,
             device: str | torch.device, norm_dtype: torch.dtype | None = None) -> dict[str, tuple]:
    """The arguments each op gets in a step, as the layers below make them (same shapes,
    strides, dtypes and device; the values are not read): ``{role: args}``. ``norm_dtype``: the
    residual stream's dtype where it differs (fp32 under bf16 autocast)."""
    d, h = config.d_model, config.n_heads
    qkv = torch.empty(batch, seq, 3, h, config.head_dim, dtype=dtype, device=device)
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, S, D) views of (B, S, H, D)
    norm_dtype = norm_dtype or dtype
    return {"norm": (torch.empty(batch * seq, d, dtype=norm_dtype, device=device),
                     torch.empty(d, dtype=norm_dtype, device=device), config.eps),
            "attention": (q, k, v, True),
            "activation": (torch.empty(batch * seq, config.d_ff, dtype=dtype, device=device),)}


def _tiny(args: tuple) -> tuple:
    """A few rows of the same problem, requiring gradients: what the backward probe runs."""
    def cut(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.dim() == 4:  # (B, H, S, D): one head, four queries, the same strides' pattern
            t = torch.randn(1, 4, 1, t.shape[-1], dtype=t.dtype, device=t.device).transpose(1, 2)
        else:  # two rows of a 2-D input; a 1-D weight as it is
            shape = (2, t.shape[-1]) if t.dim() == 2 else tuple(t.shape)
            t = torch.randn(shape, dtype=t.dtype, device=t.device)
        return t.requires_grad_()
    return tuple(cut(a) for a in args)


def backward_reason(kernel: Kernel, args: tuple) -> str | None:
    """Why ``kernel`` cannot serve a training step on ``args`` (a gradient does not reach one of
    its inputs), or None. A kernel that names its backward in ``meta["backward"]`` is taken at
    its word; any other runs once on a few rows, and the gradient of its output must reach every
    tensor input (naive attention's Triton softmax has no backward: its output still has a
    ``grad_fn``, from the last matmul, but no gradient reaches q or k)."""
    if kernel.meta.get("backward"):
        return None
    tiny = _tiny(args)
    inputs = [t for t in tiny if isinstance(t, torch.Tensor)]
    try:
        with torch.enable_grad():
            out = kernel(*tiny)
            grads = (torch.autograd.grad(out.sum(), inputs, allow_unused=True)
                     if isinstance(out, torch.Tensor) and out.grad_fn is not None
                     else [None] * len(inputs))
    except KernelNotSupported as err:
        return str(err)
    names = OPS[kernel.op].arg_names  # tensors first in every op: x, weight; q, k, v; x
    missing = [name for name, t, g in zip(names, tiny, grads, strict=False)
               if isinstance(t, torch.Tensor) and g is None]
    if missing:
        return (f"no gradient reaches {', '.join(missing)} (it registers no backward), and a "
                "training step needs one")
    return None


def refusals(providers: Providers, config: ModelConfig, batch: int, seq: int,
             dtype: torch.dtype, device: str | torch.device, *, training: bool = True,
             norm_dtype: torch.dtype | None = None) -> dict[str, str]:
    """``{role: reason}`` for every op whose chosen kernel cannot run this model's step here
    (empty: all can). Unknown provider names raise ValueError (a typo, not a capability)."""
    if not 1 <= seq <= config.max_seq:
        raise ValueError(f"seq expected 1 to {config.max_seq} (the config's max_seq), got {seq}")
    found = {}
    args = problems(config, batch, seq, dtype, device, norm_dtype)
    for role, op, name in providers.items():
        kernel = resolve(op, name)
        reason = kernel.supports(*args[role])
        if reason is None and training:
            reason = backward_reason(kernel, args[role])
        if reason:
            found[role] = f"{op}/{name}: {reason}"
    return found


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps
        self.fn = None  # set by Transformer.use: the kernel's built function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the op takes a 2-D x and a weight of x's dtype (under autocast both stay fp32)
        y = self.fn(x.reshape(-1, x.shape[-1]), self.weight.to(x.dtype), self.eps)
        return y.view(x.shape)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = config.n_heads, config.head_dim
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.fn = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim)
        # (B, H, S, D) views of the projection's (B, S, H, D) layout: no copy, the kernels
        # read strides
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        out = self.fn(q, k, v, True)
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.out = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.fn = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.fn(self.fc(x)))


class Block(nn.Module):
    """Pre-norm: ``x + attention(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm1, self.attn = RMSNorm(config.d_model, config.eps), Attention(config)
        self.norm2, self.mlp = RMSNorm(config.d_model, config.eps), MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def roles(self) -> dict[str, list[nn.Module]]:
        """The layers each role's kernel runs in."""
        return {"norm": [self.norm1, self.norm2], "attention": [self.attn],
                "activation": [self.mlp]}

