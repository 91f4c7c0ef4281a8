"""The model: a small decoder-only Transformer whose layers run the kernels the registry names.

    model = Transformer(TINY, seed=0)                 # eager everywhere
    model.use(COURSE)                                 # the course's Triton kernels, same weights
    logits = model(tokens)                            # (B, S, vocab)
    loss = model.loss(tokens, targets)

:meth:`Transformer.use` checks the chosen kernels first (:func:`kernels.model.layers.refusals`)
and refuses a combination that cannot run here with the registry's reasons, before anything
runs; the weights stay as they were, so the same model can be run with each combination.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kernels.model.config import EAGER, ModelConfig, Providers
from kernels.model.layers import Block, RMSNorm, refusals, resolve
from kernels.registry import KernelNotSupported


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig, providers: Providers = EAGER, seed: int = 0):
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config expected a ModelConfig (TINY, GPT2_SMALL, ...), "
                             f"got {type(config).__name__}")
        super().__init__()
        self.config = config
        self.tok = nn.Embedding(config.vocab, config.d_model)
        self.pos = nn.Embedding(config.max_seq, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.eps)
        self._init(seed)
        self.providers: Providers | None = None
        self._checked: set[tuple] = set()  # problems the chosen kernels have accepted
        self.use(providers, check=False)  # (checked on the first forward: the device is known)

    def _init(self, seed: int) -> None:
        """GPT-2's initialisation, from ``seed``: N(0, 0.02) everywhere, the projections that
        end a residual branch scaled by 1/√(2·layers) so the stream's variance stays put."""
        g = torch.Generator().manual_seed(seed)
        out_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm1.weight") or name.endswith("norm2.weight") \
                        or name == "norm.weight":
                    continue  # RMSNorm weights start at one
                std = out_std if name.endswith(("proj.weight", "out.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)

    def norms(self) -> list[RMSNorm]:
        return [n for b in self.blocks for n in b.roles()["norm"]] + [self.norm]

    def use(self, providers: Providers, *, check: bool = True, batch: int = 1, seq: int = 1,
            dtype: torch.dtype | None = None, norm_dtype: torch.dtype | None = None) -> None:
        """Run each op with the kernel ``providers`` names. ``check`` first asks the kernels
        about a (batch, seq) step in ``dtype`` on the model's device (its parameters' dtype
        unless given) and raises KernelNotSupported with every reason if one refuses."""
        if not isinstance(providers, Providers):
            raise ValueError(f"providers expected a Providers, got {type(providers).__name__}")
        chosen = {role: resolve(op, name) for role, op, name in providers.items()}
        if check:
            self.check(providers, batch, seq, dtype, norm_dtype)
        for block in self.blocks:
            for role, layers in block.roles().items():
                for layer in layers:
                    layer.fn = chosen[role].load()
        self.norm.fn = chosen["norm"].load()
        self.providers, self._checked = providers, set()

    def check(self, providers: Providers, batch: int, seq: int, dtype: torch.dtype | None = None,
              norm_dtype: torch.dtype | None = None, training: bool | None = None) -> None:
        """KernelNotSupported naming every op whose kernel cannot run this step here
        (``training``: gradients wanted; by default when the parameters require them)."""
        weight = self.tok.weight
        training = weight.requires_grad if training is None else training
        if found := refusals(providers, self.config, batch, seq, dtype or weight.dtype,
                             weight.device, training=training, norm_dtype=norm_dtype):
            raise KernelNotSupported("; ".join(found.values()))

    def _check_once(self, tokens: torch.Tensor) -> None:
        """The kernels asked once per (shape, dtype, device) of a step, as the registry does
        per call: a new problem is checked before anything launches."""
        weight = self.tok.weight
        autocast = torch.is_autocast_enabled(weight.device.type)
        dtype = torch.get_autocast_dtype(weight.device.type) if autocast else weight.dtype
        training = torch.is_grad_enabled() and weight.requires_grad
        key = (tuple(tokens.shape), dtype, weight.dtype, weight.device, training)
        if key not in self._checked:
            self.check(self.providers, *tokens.shape, dtype, norm_dtype=weight.dtype,
                       training=training)
            self._checked.add(key)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, S, vocab)`` for ``tokens`` ``(B, S)`` of int64."""
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
            raise ValueError(f"tokens expected a (batch, seq) tensor of token ids, got "
                             f"{getattr(tokens, 'shape', type(tokens).__name__)}")
        if not torch.compiler.is_compiling():  # (compiled: call model.check first)
            self._check_once(tokens)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        # the head is the token embedding, transposed (tied weights, as GPT-2)
        return F.linear(self.norm(x), self.tok.weight)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the next token, in fp32 whatever the logits' dtype."""
        logits = self(tokens)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
