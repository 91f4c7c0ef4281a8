"""The course's Triton softmax kernel under ``@triton.autotune`` (lesson 13, section 1).

The registered kernel (:mod:`kernels.softmax.triton_softmax`) picks its launch by a rule,
``num_warps_for(BLOCK)``. Here the *same* ``softmax_kernel`` is wrapped by Triton's autotuner,
which picks ``num_warps`` by timing every candidate on the first call for each new value of its
``key`` (the row length, ``n_cols``; Triton adds the dtypes of the tensor arguments), caches the
winner in memory and reuses it for every later call with that key. Nothing about the kernel
changes: only who chooses the launch.

:func:`make` builds a fresh autotuner each time (an empty cache), so a notebook can show the
first call's cost again; :func:`softmax` launches it as the registered provider launches its
kernel.
"""

from __future__ import annotations

import numpy as np
import torch
import triton

from course_utils import env, timing
from kernels.softmax.triton_softmax import softmax_kernel

# the candidates: the launch parameter that matters for a row-per-program kernel
WARPS = (1, 2, 4, 8, 16, 32)
CONFIGS = [triton.Config({}, num_warps=w) for w in WARPS]
# a thread holding more floats than this spills registers to (slow) local memory
MAX_PER_THREAD = 64


def prune(configs, named_args, **kwargs):
    """``early_config_prune``: drop candidates that cannot be good before timing any of them:
    more threads than the row has elements (idle lanes), or so few that each thread holds more
    than :data:`MAX_PER_THREAD` floats (spills). Never returns an empty list."""
    block = kwargs["BLOCK"]
    kept = [c for c in configs
            if c.num_warps * 32 <= max(block, 32) and block // (c.num_warps * 32) <= MAX_PER_THREAD]
    return kept or [max(configs, key=lambda c: c.num_warps)]


def cpu_do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8)):
    """The autotuner's timer on a machine without a GPU: Triton's own (``do_bench``) needs a
    GPU driver, so under the interpreter each candidate is timed by the course's
    :func:`course_utils.timing.benchmark` (a few calls: interpreted kernels are slow), returned
    as the quantiles the autotuner asks for, in milliseconds."""
    t = timing.benchmark(kernel_call, warmup=1, reps=3, device="cpu", name="candidate")
    return [float(np.quantile(t.times_ms, q)) for q in quantiles]


def make(configs=CONFIGS, key=("n_cols",), pruned: bool = True):
    """A new autotuner around ``softmax_kernel`` (an empty cache): ``configs`` tried for each
    new ``key``, pruned by :func:`prune` first when ``pruned``. On a GPU it times with Triton's
    ``do_bench``; under the interpreter with :func:`cpu_do_bench`."""
    return triton.autotune(configs=list(configs), key=list(key),
                           prune_configs_by={"early_config_prune": prune} if pruned else None,
                           do_bench=cpu_do_bench if env.TRITON_INTERPRET else None,
                           )(softmax_kernel)


def softmax(x: torch.Tensor, tuner) -> torch.Tensor:
    """Row softmax of ``x`` (2-D) by ``tuner`` (from :func:`make`): the registered provider's
    launch, with ``num_warps`` left to the autotuner."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"x expected a 2-D tensor, got {getattr(x, 'shape', type(x).__name__)}")
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    if rows and cols:
        tuner[(rows,)](x, y, cols, x.stride(0), x.stride(1), y.stride(0),
                       BLOCK=triton.next_power_of_2(cols))
    return y
