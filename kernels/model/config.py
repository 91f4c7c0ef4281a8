"""What a model of lesson 12 is: its sizes (:class:`ModelConfig`) and which kernel runs each op
(:class:`Providers`).

Two sizes: :data:`TINY` trains in seconds on a CPU (the Triton kernels in their interpreter),
:data:`GPT2_SMALL` is GPT-2 small's shape (12 layers of 768 features, 12 heads of 64) for a GPU.
Providers are registry names (``kernels.get_kernel(op, provider)``): ``"eager"`` for PyTorch's
operations, ``"triton"`` for the course's kernels, any other registered provider of the op
(``"name[variant]"`` picks a variant).
"""

from __future__ import annotations

from dataclasses import dataclass

# the role of each op in a block -> the registry's op
OPS = {"norm": "rmsnorm", "attention": "attention", "activation": "gelu"}


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ModelConfig: {name} expected a positive int, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """A pre-norm decoder-only Transformer: token and position embeddings, ``n_layers`` blocks
    of (RMSNorm, causal attention, residual; RMSNorm, MLP with GeLU, residual), a final RMSNorm
    and a language-model head tied to the token embedding. No biases."""

    vocab: int
    d_model: int
    n_heads: int
    n_layers: int
    max_seq: int
    d_ff: int = 0  # 0: 4 · d_model, GPT-2's
    eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("vocab", "d_model", "n_heads", "n_layers", "max_seq"):
            _positive(name, getattr(self, name))
        if self.d_ff == 0:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        _positive("d_ff", self.d_ff)
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig: d_model expected a multiple of n_heads "
                             f"({self.n_heads}), got {self.d_model}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def parameters(self) -> int:
        """Parameters (the head shares the token embedding's)."""
        d = self.d_model
        block = 4 * d * d + 2 * d * self.d_ff + 2 * d  # qkv + proj, fc + out, two norms
        return (self.vocab + self.max_seq) * d + self.n_layers * block + d


# a CPU trains it in seconds, the Triton kernels in the interpreter: head dim 16 (the smallest
# the course's attention takes), two layers
TINY = ModelConfig(vocab=16, d_model=32, n_heads=2, n_layers=2, max_seq=64)
# GPT-2 small (124M parameters); the vocabulary padded from 50257 to a multiple of 64, as
# nanoGPT does, so the head's matmul tiles evenly
GPT2_SMALL = ModelConfig(vocab=50304, d_model=768, n_heads=12, n_layers=12, max_seq=4096)


@dataclass(frozen=True)
class Providers:
    """The registry provider of each op of a block, by name."""

    norm: str = "eager"
    attention: str = "eager"
    activation: str = "eager"

    def __post_init__(self) -> None:
        for role in OPS:
            name = getattr(self, role)
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"Providers: {role} expected a provider name such as 'eager' "
                                 f"or 'triton', got {name!r}")

    def items(self) -> list[tuple[str, str, str]]:
        """``(role, op, provider name)`` for norm, attention, activation."""
        return [(role, op, getattr(self, role)) for role, op in OPS.items()]

    @property
    def label(self) -> str:
        names = {getattr(self, role) for role in OPS}
        if len(names) == 1:
            return names.pop()
        return ", ".join(f"{role} {getattr(self, role)}" for role in OPS)


EAGER = Providers()
COURSE = Providers(norm="triton", attention="triton", activation="triton")
# the waterfall: the course's kernels swapped in one at a time, each step keeping the last
STEPS = {
    "eager": EAGER,
    "+ attention": Providers(attention="triton"),
    "+ norm": Providers(norm="triton", attention="triton"),
    "+ activation (all course kernels)": COURSE,
}
