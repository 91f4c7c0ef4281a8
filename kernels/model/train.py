"""One training step (forward, backward, AdamW), the data it reads, and the precisions it runs in.

**Data.** No downloads: :func:`batch` draws token sequences from a fixed random Markov chain
(each token has a few likely successors), generated from a seed. A model learns it quickly (the
loss falls from ln(vocab) towards the chain's entropy), and the same seed gives the same tokens
on every machine, so two runs differ only by their kernels.

**Precisions** (:data:`PRECISIONS`), the ways a step can use bf16:

* ``fp32``: everything in fp32 (what the tests compare the kernels in);
* ``bf16-autocast``: fp32 weights, ``torch.autocast`` runs the matmuls (and what they feed:
  attention, the activation) in bf16; the residual stream and the norms stay fp32;
* ``bf16-master``: the weights themselves in bf16 (half the memory, every kernel in bf16) and an
  fp32 *master* copy that AdamW updates: each step copies the gradients to fp32, steps, and
  rounds the result back into the bf16 weights. Stepping bf16 weights directly would lose every
  update smaller than their last bit (8 bits of mantissa: a weight of 1 ignores updates below
  about 0.004).

The course's kernels accumulate in fp32 whatever their inputs (RMSNorm's sum of squares, the
attention's scores, softmax and ``PV``, GeLU's arithmetic): bf16 is a storage format for them.
"""

from __future__ import annotations

import contextlib

import torch

from kernels.model.transformer import Transformer

PRECISIONS = ("fp32", "bf16-autocast", "bf16-master")
COMPILE_MODES = ("default", "reduce-overhead")  # torch.compile's modes a Trainer takes
LR = 3e-3  # the tiny model's; GPT-2 small trains at 6e-4 (kernels/model/bench.py)
BRANCHING = 4  # likely successors of each token


def chain(vocab: int, seed: int) -> torch.Tensor:
    """The Markov chain of ``seed``: ``(vocab, BRANCHING)`` successors of each token."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(vocab, (vocab, BRANCHING), generator=g)


def batch(vocab: int, batch_size: int, seq: int, step: int, seed: int = 0,
          device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, targets)`` of step ``step``, each ``(batch_size, seq)``: sequences of the
    chain of ``seed``, the targets shifted by one. The same arguments give the same tokens."""
    for name, value in (("vocab", vocab), ("batch_size", batch_size), ("seq", seq)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"batch: {name} expected a positive int, got {value!r}")
    successors = chain(vocab, seed)
    g = torch.Generator().manual_seed(seed * 1_000_003 + step + 1)
    choices = torch.randint(BRANCHING, (batch_size, seq + 1), generator=g)
    rows = torch.empty(batch_size, seq + 1, dtype=torch.long)
    rows[:, 0] = torch.randint(vocab, (batch_size,), generator=g)
    for i in range(1, seq + 1):  # sequential along a row, all rows at once
        rows[:, i] = successors[rows[:, i - 1], choices[:, i]]
    rows = rows.to(device)
    return rows[:, :-1], rows[:, 1:]


class Trainer:
    """The model, its optimizer and its precision: :meth:`step` is one training step.

    ``compiled=True`` runs ``torch.compile`` of the model (its forward and, through AOT
    autograd, its backward; the optimizer stays as it is); ``compile_mode`` is its ``mode``
    ("reduce-overhead" replays the compiled forward and backward from CUDA graphs).
    ``capturable=True`` keeps AdamW's step count on the GPU, so that a CUDA graph can capture
    the whole step (:mod:`kernels.model.graphed`)."""

    def __init__(self, model: Transformer, precision: str = "fp32", lr: float = LR,
                 compiled: bool = False, compile_mode: str = "default",
                 capturable: bool = False):
        if precision not in PRECISIONS:
            raise ValueError(f"precision expected one of {', '.join(PRECISIONS)}, "
                             f"got {precision!r}")
        if compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode expected one of {', '.join(COMPILE_MODES)}, "
                             f"got {compile_mode!r}")
        self.model, self.precision = model, precision
        weights = torch.bfloat16 if precision == "bf16-master" else torch.float32
        model.to(weights)
        params = list(model.parameters())
        # the fp32 copy AdamW updates (bf16-master); otherwise it steps the weights themselves
        self.masters = ([p.detach().float().clone().requires_grad_() for p in params]
                        if precision == "bf16-master" else None)
        cuda = params[0].is_cuda
        # fused AdamW on a GPU: one kernel for all parameters (the same for every configuration)
        self.optimizer = torch.optim.AdamW(self.masters or params, lr=lr, betas=(0.9, 0.95),
                                           weight_decay=0.1, fused=cuda or None,
                                           capturable=capturable)
        self.compiled = compiled
        self.forward = torch.compile(model, mode=compile_mode) if compiled else model

    @property
    def device(self) -> torch.device:
        return self.model.tok.weight.device

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the matmuls, attention and activation see."""
        return torch.float32 if self.precision == "fp32" else torch.bfloat16

    def autocast(self):
        if self.precision != "bf16-autocast":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            logits = self.forward(tokens)
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    def step(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Forward, backward, AdamW: the loss before the update (a 0-d tensor, not synced)."""
        loss = self.loss(tokens, targets)
        loss.backward()
        if self.masters is not None:
            params = list(self.model.parameters())
            for p, master in zip(params, self.masters, strict=True):
                master.grad = p.grad.float()  # the gradient, widened for the fp32 update
                p.grad = None
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.masters is not None:
            with torch.no_grad():
                for p, master in zip(params, self.masters, strict=True):
                    p.copy_(master)  # rounded once, to the bf16 weight
        return loss.detach()


def losses(model: Transformer, steps: int, batch_size: int, seq: int, *, precision: str = "fp32",
           seed: int = 0, lr: float = LR, compiled: bool = False) -> list[float]:
    """The loss of every step of ``steps`` training steps on the chain of ``seed``."""
    trainer = Trainer(model, precision, lr=lr, compiled=compiled)
    found = []
    for i in range(steps):
        tokens, targets = batch(model.config.vocab, batch_size, seq, i, seed, trainer.device)
        found.append(trainer.step(tokens, targets))
    return [float(x) for x in found]  # one sync, at the end
