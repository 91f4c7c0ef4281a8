"""A small autotuner for mma.cu: try tile configurations, keep the fastest, per GPU and variant.

Each candidate is a different generated header, so a different NVRTC program: compiling one
takes 1-2.5 s on the H100 box (nothing after the first time: cached), which is what makes a
sweep over configurations practical here and painful with a 30-second ``load_inline`` build per
point.
Winners are stored per problem size in ``var/mma_autotune/<device>.json`` and read by
:func:`best_config`, which picks the one tuned at the nearest size.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import torch

from course_utils import env, timing
from kernels.matmul import mma

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


def _store() -> dict:
    path = env.var_dir("mma_autotune") / f"{env.device_slug()}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(data: dict) -> None:
    path = env.var_dir("mma_autotune") / f"{env.device_slug()}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def best_config(v: str | mma.Variant, shape: tuple[int, int, int] | None = None) -> mma.Config:
    """The stored winner for this GPU and variant (tuned at the problem size nearest to
    ``shape``, by volume), else the default configuration."""
    import math

    found = _store().get(mma.variant(v).name, {}) if env.HAS_CUDA else {}
    if not found:
        return mma.DEFAULT_CONFIG
    volume = math.prod(shape) if shape else None
    best = min(found.values(), key=lambda entry: 0 if volume is None else
               abs(math.log(math.prod(entry["problem"]) / max(volume, 1))))
    return mma.Config(**best["config"])


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
         configs=CANDIDATES, save: bool = True, progress: bool = True) -> list[Trial]:
    """Time every candidate on an m x n x k problem; store the fastest as this GPU's choice."""
    v = mma.variant(v)
    a, b = operands(v, m, n, k)
    a, bt = mma.prepare(v, a, b)
    out = torch.empty(m, n, dtype=v.out, device="cuda")
    flop = timing.matmul_flop(m, n, k)
    trials = []
    items = [c for c in configs if fits(c, v)]
    for config in (timing.progress(items, f"tuning {v.name}") if progress else items):
        compiled = mma.compile_mma(v, config, verbose=False)
        t = timing.benchmark(mma.launch, v, a, bt, out, config, name=config.short(),
                             min_time_s=0.1)
        trials.append(Trial(config, t.median, timing.tflops(flop, t.median), compiled.seconds))
    trials.sort(key=lambda trial: trial.ms)
    if save and trials:
        data = _store()
        data.setdefault(v.name, {})[f"{m}x{n}x{k}"] = {
            "config": asdict(trials[0].config), "rate": trials[0].rate, "problem": [m, n, k]}
        _save(data)
    return trials
