"""A small autotuner for mma.cu: try tile configurations, keep the fastest, per GPU, variant and
problem size.

Each candidate is a different generated header, so a different NVRTC program: compiling one
takes 1-2.5 s on the H100 box (nothing after the first time: cached), which is what makes a
sweep over configurations practical here and painful with a 30-second ``load_inline`` build per
point.

Winners are kept per variant and **size bucket** (each of M, N, K rounded to a power of two, so
4000³ and 4096³ share one, 8192×1024×8192 has its own) in a :class:`Store`, by default
``var/mma_autotune/<device>.json``. A sweep writes only its own bucket: tuning at 4096³ never
replaces the winner at 8192³. :func:`best_config` is what every call of the kernel asks, so it
is a dictionary lookup: the file is read once per process. Tests and notebooks that tune at toy
sizes tune into a temporary store (``with autotune.use_store(tmp): ...``), never the user's.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

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


def bucket(m: int, n: int, k: int) -> str:
    """The size bucket of an m x n x k problem: each size rounded to the nearest power of two
    (in log scale), e.g. ``"4096x4096x4096"`` for 4000³."""
    for name, size in (("m", m), ("n", n), ("k", k)):
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"bucket: {name} expected a size >= 0, got {size!r}")
    return "x".join(str(2 ** round(math.log2(max(size, 1)))) for size in (m, n, k))


def _distance(a: str, b: str) -> float:
    """How far apart two buckets are: the sum of |log2| ratios of their sizes."""
    return sum(abs(math.log2(int(x) / int(y))) for x, y in zip(a.split("x"), b.split("x"),
                                                                strict=True))


class Store:
    """The tuner's winners for one GPU, ``{variant: {bucket: {"config", "rate", "problem"}}}``
    in a JSON file, read once and held in memory; :meth:`put` writes through."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._data: dict | None = None
        self._chosen: dict[tuple[str, tuple[int, int, int] | None], mma.Config] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<autotune.Store {self.path}>"

    def winners(self, variant: str) -> dict[str, dict]:
        """``{bucket: {"config": ..., "rate": ..., "problem": [m, n, k]}}`` of one variant."""
        if self._data is None:
            self._data = self._read()
        return self._data.get(variant, {})

    def _read(self) -> dict:
        data = json.loads(self.path.read_text()) if self.path.exists() else {}
        # files written before size buckets were keyed "MxNxK" by the exact problem: re-key
        return {variant: {bucket(*entry["problem"]): entry for entry in entries.values()}
                for variant, entries in data.items()}

    def put(self, variant: str, problem: tuple[int, int, int], config: mma.Config,
            rate: float) -> None:
        """Record ``config`` as the winner for ``variant`` in ``problem``'s bucket only."""
        with self._lock:
            self._data = self._read()  # another process may have tuned another bucket
            self._data.setdefault(variant, {})[bucket(*problem)] = {
                "config": asdict(config), "rate": rate, "problem": list(problem)}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(self._data, indent=1, sort_keys=True))
            tmp.replace(self.path)  # atomic: a reader never sees half a file
            self._chosen.clear()

    def best(self, variant: str, shape: tuple[int, int, int] | None) -> mma.Config:
        """The winner of ``shape``'s bucket, else of the nearest tuned bucket, else the default;
        remembered per shape, so a repeated call is one dictionary lookup."""
        key = (variant, shape)
        if (found := self._chosen.get(key)) is not None:
            return found
        entries = self.winners(variant)
        if not entries:
            chosen = mma.DEFAULT_CONFIG
        elif shape is None:  # no size given: the largest problem tuned
            chosen = mma.Config(**max(entries.values(),
                                      key=lambda e: math.prod(e["problem"]))["config"])
        else:
            wanted = bucket(*shape)
            nearest = min(entries, key=lambda b: _distance(b, wanted))
            chosen = mma.Config(**entries[nearest]["config"])
        self._chosen[key] = chosen
        return chosen


_default: Store | None = None
_override: Store | None = None


def store() -> Store:
    """The store in use: this GPU's file under ``var/mma_autotune/``, or the one given to
    :func:`use_store`. Every call of the kernel asks, so the answer is kept: building the path
    again (``pathlib`` and a regex) would cost more than the rest of the lookup."""
    global _default
    if _override is not None:
        return _override
    if _default is None:
        _default = Store(env.VAR / "mma_autotune" / f"{env.device_slug()}.json")
    return _default


@contextlib.contextmanager
def use_store(path: str | os.PathLike):
    """Tune into, and choose from, the store at ``path`` inside the ``with`` block: for tests
    and notebooks that tune at toy sizes (a toy winner must never reach the user's store)."""
    global _override
    if os.path.isdir(path):
        path = Path(path) / f"{env.device_slug()}.json"
    previous, _override = _override, Store(path)
    try:
        yield _override
    finally:
        _override = previous


def family(v: str | mma.Variant) -> str:
    """The variant tuned for ``v``: the fp8 pairings share code and differ only in the
    instruction's types, so all of them use the e4m3 x e4m3 winners (of their accumulator)."""
    v = mma.variant(v)
    if v.name.startswith("fp8"):
        return "fp8_e4m3_e4m3_f16acc" if v.acc == "f16" else "fp8_e4m3_e4m3"
    return v.name


def best_config(v: str | mma.Variant, shape: tuple[int, int, int] | None = None) -> mma.Config:
    """The stored winner for this GPU and variant (its :func:`family`) in ``shape``'s size
    bucket, else the nearest tuned bucket, else the default. A dictionary lookup once warm."""
    if not env.HAS_CUDA:
        return mma.DEFAULT_CONFIG
    return store().best(_families.get(v) or family(v), shape)


_families: dict[str, str] = {}  # filled below, when the variants are known


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


_families.update({name: family(name) for name in mma.VARIANTS})
