"""A small autotuner for mma.cu: try tile configurations, keep the fastest, per GPU, variant and
problem size.

Each candidate is a different generated header, so a different NVRTC program: compiling one
takes 1-2.5 s on the H100 box (nothing after the first time: cached), which is what makes a
sweep over configurations practical here and painful with a 30-second ``load_inline`` build per
point.

Winners are kept per variant and **size bucket** (each of M, N, K rounded to a power of two, so
4000³ and 4096³ share one, 8192×1024×8192 has its own) in a :class:`~kernels.matmul.tuned.Store`,
by default ``var/mma_autotune/<device>.json``. A sweep writes only its own bucket: tuning at
4096³ never replaces the winner at 8192³. :func:`~kernels.matmul.tuned.best_config` is what
every call of the kernel asks (a dictionary lookup: the file is read once per process); it lives
in :mod:`kernels.matmul.tuned`, which the kernel imports, and is named here too. Tests and
notebooks that tune at toy sizes tune into a temporary store (``with autotune.use_store(tmp):
...``), never the user's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_utils import env, timing
from kernels.matmul import mma
from kernels.matmul.tuned import (  # noqa: F401 (autotune.best_config: where the lessons look)
    Store,
    best_config,
    bucket,
    family,
    store,
    use_store,
)

# The design space: block tile x warp tile x K slice x stages. Every point fits the H100's
# 227 KB of shared memory per block; points a smaller GPU cannot hold are filtered out.
CANDIDATES = (
    mma.Config(128, 256, 64, 64, 64, 4),
    mma.Config(128, 256, 64, 64, 64, 3),
    mma.Config(256, 128, 64, 64, 64, 4),
    mma.Config(256, 128, 64, 64, 128, 3),
    mma.Config(128, 128, 64, 64, 64, 4),
    mma.Config(128, 128, 64, 32, 64, 5),
    mma.Config(64, 128, 32, 64, 64, 4),
    # 64 x 128 warp tiles: 64 accumulator registers a thread in fp16, 128 in fp32 (which spills)
    mma.Config(128, 256, 64, 128, 64, 4),
    mma.Config(256, 128, 128, 64, 64, 4),
)


@dataclass(frozen=True)
class Trial:
    config: mma.Config
    ms: float
    rate: float  # TFLOP/s or TOP/s
    compile_s: float


def fits(config: mma.Config, v: mma.Variant) -> bool:
    """Whether the candidate can run well: its shared memory fits this GPU, and warp tiles
    larger than 64 x 64 only where the accumulators are fp16 (fp32 ones would not fit)."""
    if config.wm * config.wn > 64 * 64 and v.acc != "f16":
        return False
    if not env.HAS_CUDA:
        return True
    limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    return config.shared_bytes <= limit


def operands(v: mma.Variant, m: int, n: int, k: int):
    """Random operands in the variant's dtypes, laid out as the kernel wants them."""
    def make(rows, cols, dtype):
        if v.integer:
            low, high = (-8, 8) if v.int4 else (-128, 128)
            return torch.randint(low, high, (rows, cols), device="cuda", dtype=torch.int8)
        return (torch.randn(rows, cols, device="cuda") / k**0.25).to(dtype)
    return make(m, k, v.a), make(n, k, v.b).t()


def tune(v: str | mma.Variant, m: int = 4096, n: int = 4096, k: int = 4096,
         configs=CANDIDATES, save: bool = True, progress: bool = True,
         min_time_s: float = 0.1) -> list[Trial]:
    """Time every candidate on an m x n x k problem; store the fastest as this GPU's choice for
    that size bucket (``save=False``: only return the trials)."""
    v = mma.variant(v)
    a, b = operands(v, m, n, k)
    a, bt = mma.prepare(v, a, b)
    out = torch.empty(m, n, dtype=v.out, device="cuda")
    flop = timing.matmul_flop(m, n, k)
    trials = []
    items = [c for c in configs if fits(c, v)]
    mma.compile_many([(v, c) for c in items])  # in parallel: a sweep is mostly compiles
    for config in (timing.progress(items, f"tuning {v.name}") if progress else items):
        compiled = mma.compile_mma(v, config, verbose=False)
        t = timing.benchmark(mma.launch, v, a, bt, out, config, name=config.short(),
                             min_time_s=min_time_s)
        trials.append(Trial(config, t.median, timing.tflops(flop, t.median), compiled.seconds))
    trials.sort(key=lambda trial: trial.ms)
    if save and trials:
        store().put(v.name, (m, n, k), trials[0].config, trials[0].rate)
    return trials


