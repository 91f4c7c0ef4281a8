"""Lesson 12: a small decoder-only Transformer built from the course's kernels.

* :mod:`~kernels.model.config`: the sizes (``TINY`` for a CPU, ``GPT2_SMALL`` for a GPU) and
  the providers of each op, by registry name (``EAGER``, ``COURSE``, the waterfall's ``STEPS``);
* :mod:`~kernels.model.layers`: RMSNorm, causal attention and the MLP, each calling the kernel
  the registry names, and :func:`refusals`, which asks the kernels before a step runs;
* :mod:`~kernels.model.transformer`: the model;
* :mod:`~kernels.model.train`: the data (a seeded Markov chain), one training step
  (:class:`Trainer`) and the precisions (fp32, bf16 autocast, bf16 weights with fp32 masters);
* :mod:`~kernels.model.breakdown`: where a step's time and memory go, read from a profile;
* :mod:`~kernels.model.bench`: ``python -m course bench model``, the step timed end to end.
* :mod:`~kernels.model.records`: the benchmark's records read back, and the targets judged.

The model is not an op of the registry: it is a user of it.
"""

from kernels.model.config import (
    COURSE,
    EAGER,
    GPT2_SMALL,
    STEPS,
    TINY,
    ModelConfig,
    Providers,
)
from kernels.model.layers import refusals
from kernels.model.train import PRECISIONS, Trainer, batch, losses
from kernels.model.transformer import Transformer

__all__ = ["COURSE", "EAGER", "GPT2_SMALL", "PRECISIONS", "STEPS", "TINY", "ModelConfig",
           "Providers", "Trainer", "Transformer", "batch", "losses", "refusals"]
