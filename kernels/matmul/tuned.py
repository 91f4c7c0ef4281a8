"""The tuner's winners, as every call of ``mma.cu`` asks for them: per GPU, variant and size
bucket, kept in a :class:`Store` (``var/mma_autotune/<device>.json``) and looked up by
:func:`best_config` (a dictionary lookup once warm). The sweep that fills it is
:func:`kernels.matmul.autotune.tune`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from dataclasses import asdict
from pathlib import Path

from course_utils import env
from kernels.matmul.mma_types import DEFAULT_CONFIG, VARIANTS, Config, Variant, variant


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
        self._chosen: dict[tuple[str, tuple[int, int, int] | None], Config] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<tuned.Store {self.path}>"

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

    def put(self, variant: str, problem: tuple[int, int, int], config: Config,
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

    def best(self, variant: str, shape: tuple[int, int, int] | None) -> Config:
        """The winner of ``shape``'s bucket, else of the nearest tuned bucket, else the default;
        remembered per shape, so a repeated call is one dictionary lookup."""
        key = (variant, shape)
        if (found := self._chosen.get(key)) is not None:
            return found
        entries = self.winners(variant)
        if not entries:
            chosen = DEFAULT_CONFIG
        elif shape is None:  # no size given: the largest problem tuned
            chosen = Config(**max(entries.values(),
                                      key=lambda e: math.prod(e["problem"]))["config"])
        else:
            wanted = bucket(*shape)
            nearest = min(entries, key=lambda b: _distance(b, wanted))
            chosen = Config(**entries[nearest]["config"])
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


def family(v: str | Variant) -> str:
    """The variant tuned for ``v``: the fp8 pairings share code and differ only in the
    instruction's types, so all of them use the e4m3 x e4m3 winners (of their accumulator)."""
    v = variant(v)
    if v.name.startswith("fp8"):
        return "fp8_e4m3_e4m3_f16acc" if v.acc == "f16" else "fp8_e4m3_e4m3"
    return v.name


def best_config(v: str | Variant, shape: tuple[int, int, int] | None = None) -> Config:
    """The stored winner for this GPU and variant (its :func:`family`) in ``shape``'s size
    bucket, else the nearest tuned bucket, else the default. A dictionary lookup once warm."""
    if not env.HAS_CUDA:
        return DEFAULT_CONFIG
    return store().best(_families.get(v) or family(v), shape)


_families: dict[str, str] = {}  # filled below, when the variants are known


_families.update({name: family(name) for name in VARIANTS})
