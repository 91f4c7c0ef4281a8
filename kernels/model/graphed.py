"""One whole training step captured in a CUDA graph, then replayed: no Python per kernel.

A step of the course's model launches a few hundred kernels (each layer's matmuls, norm,
attention and activation, forward and backward, then AdamW). Launched one by one from Python,
each costs the host some microseconds, and where the kernels are short the GPU waits for the
host between them: the profile's *launch gaps*. A CUDA graph records the step's kernels once,
with their arguments, and ``graph.replay()`` submits all of them with one call.

What a graph needs from the code it captures (and what the course's kernels do):

* **no host synchronisation**: no ``.item()``, no ``print(loss)``, no data-dependent Python
  branch; during capture nothing runs, so a value read back would be garbage (and reading one is
  an error). AdamW keeps its step count on the GPU (``capturable=True``) for the same reason;
* **the same addresses every replay**: inputs are copied into *static* buffers before each
  replay, and the outputs (the loss) are read from the buffer the capture wrote. Allocations
  inside the capture come from the graph's private memory pool, at the same addresses each time;
* **nothing new on the first replay**: every kernel is compiled and every per-problem plan
  (``kernels/triton_launch.py``, the registry's checks, the model's check of its kernels) made
  during the warm-up steps, which run on a side stream before capture, as PyTorch's guide asks.

Replaying does the same work on the same addresses: the weights and AdamW's state are updated
in place, so the model trains as it would eagerly (the warm-up's updates are undone after the
capture, so the first replay is the first step). A new batch shape needs a new capture.
"""

from __future__ import annotations

import torch

from kernels.model.train import Trainer

WARMUP_STEPS = 3  # before capture: compiles, plans, AdamW's state, the allocator's blocks


def graph_reason(trainer: Trainer) -> str | None:
    """Why ``trainer``'s step cannot be captured here (None: it can)."""
    if not torch.cuda.is_available():
        return "CUDA graphs need a CUDA GPU (torch.cuda.is_available() is False)"
    if trainer.device.type != "cuda":
        return f"CUDA graphs capture GPU work; the model is on {trainer.device.type}"
    if trainer.compiled:
        return ("the model is compiled: torch.compile(mode='reduce-overhead') captures its own "
                "graphs")
    if not all(g.get("capturable") for g in trainer.optimizer.param_groups):
        return "the optimizer must keep its state on the GPU: Trainer(..., capturable=True)"
    return None


class GraphedStep:
    """``step(tokens, targets)``: ``trainer``'s training step, replayed from a CUDA graph.

    Built from one example batch (its shape is the graph's: every later batch must have it).
    Returns the loss before the update as a new 0-d tensor, as :meth:`Trainer.step` does."""

    def __init__(self, trainer: Trainer, tokens: torch.Tensor, targets: torch.Tensor,
                 warmup: int = WARMUP_STEPS):
        if why := graph_reason(trainer):
            raise ValueError(f"GraphedStep: {why}")
        self.trainer = trainer
        # the static inputs: each replay reads the batch from these addresses
        self.tokens, self.targets = tokens.clone(), targets.clone()
        weights = list(trainer.model.parameters()) + (trainer.masters or [])
        before = [w.detach().clone() for w in weights]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                trainer.step(self.tokens, self.targets)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            # forward, backward, AdamW, the gradients let go: all recorded, nothing run
            self.loss = trainer.step(self.tokens, self.targets)
        # undo the warm-up's updates, in place (the graph holds these addresses): the weights
        # as they were, AdamW's moments and step count at zero as before its first step; so the
        # first replay is the model's first step, as it would be without a graph
        with torch.no_grad():
            for w, saved in zip(weights, before, strict=True):
                w.copy_(saved)
            for state in trainer.optimizer.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        value.zero_()

    def __call__(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if tokens.shape != self.tokens.shape or targets.shape != self.targets.shape:
            raise ValueError(f"GraphedStep: tokens expected the captured shape "
                             f"{tuple(self.tokens.shape)}, got {tuple(tokens.shape)} (a new "
                             "shape needs a new capture)")
        self.tokens.copy_(tokens)
        self.targets.copy_(targets)
        self.graph.replay()
        # a copy: the next replay overwrites self.loss in place
        return self.loss.clone()
