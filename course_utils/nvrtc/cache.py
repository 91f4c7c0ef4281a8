"""The NVRTC caches: compiled kernels held in memory, and on disk under ``var/nvrtc_cache/``.

An entry's key covers everything that changes the binary (the source, the generated header,
options, architecture, output kind, NVRTC version); :mod:`course_utils.nvrtc.compiler` computes
it. A second, cheaper key (the file's path, mtime and size instead of its contents) lets a repeated
call skip reading and hashing the source. Disk entries are written atomically (temporary file,
then rename), so processes that share the cache never read half an entry, and each carries the
SHA-256 of its binary, so a damaged entry is rebuilt instead of loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from course_utils import env

if TYPE_CHECKING:
    from course_utils.nvrtc.compiled import Compiled
    from course_utils.nvrtc.source import Source

_memory: dict[str, Compiled] = {}
_fast: dict[tuple, Compiled] = {}
_lock = threading.Lock()
_cache_override: Path | None = None


def cache_dir() -> Path:
    """The on-disk cache: ``var/nvrtc_cache/`` unless :func:`use_cache_dir` says otherwise."""
    return _cache_override or env.var_dir("nvrtc_cache")


@contextlib.contextmanager
def use_cache_dir(path: str | os.PathLike):
    """Cache in ``path`` inside the ``with`` block (memory cache cleared on entry and exit):
    for demos and tests that must start from an empty cache every time they run."""
    global _cache_override
    previous, _cache_override = _cache_override, Path(path)
    clear_memory_cache()
    try:
        yield Path(path)
    finally:
        _cache_override = previous
        clear_memory_cache()


def clear_memory_cache() -> None:
    """Forget compiled kernels held in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()
        _fast.clear()


def digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


# -- in memory -------------------------------------------------------------------------------


def fast_key(source, name, defines, arch, output, options, default_options, auto_includes,
             nvrtc_version: str) -> tuple | None:
    """A cheap key for "the same call as before": the file's path, mtime and size instead of
    its contents. None when there is no cheap key (the full key then decides)."""
    try:
        if isinstance(source, str) and "\n" in source:
            src_id = ("text", source)
        else:
            path = Path(source)
            if not path.is_absolute() and not path.exists():
                path = env.ROOT / path
            stat = path.stat()
            # headers beside the file may be included from it (source.local_includes)
            headers = tuple((h.name, h.stat().st_mtime_ns, h.stat().st_size)
                            for h in sorted(path.parent.glob("*.cuh")))
            src_id = (str(path), stat.st_mtime_ns, stat.st_size, headers)
        return (src_id, name, tuple((defines or {}).items()), str(arch), output, tuple(options),
                default_options, auto_includes, nvrtc_version, str(_cache_override))
    except (OSError, TypeError):
        return None


def fast_get(fast: tuple | None) -> Compiled | None:
    if fast is None:
        return None
    with _lock:
        return _fast.get(fast)


def memory_get(key: str) -> Compiled | None:
    with _lock:
        return _memory.get(key)


def remember(key: str, fast: tuple | None, compiled: Compiled) -> None:
    """Hold ``compiled`` in memory under its full key and (when there is one) its cheap key."""
    with _lock:
        _memory[key] = compiled
        if fast is not None:
            _fast[fast] = compiled


# -- on disk ---------------------------------------------------------------------------------


def _entry(key: str) -> tuple[Path, Path]:
    folder = cache_dir() / key[:2]
    return folder / f"{key}.bin", folder / f"{key}.json"


def _atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def disk_write(key: str, compiled: Compiled, parts: dict) -> None:
    binary_path, meta_path = _entry(key)
    meta = {"name": compiled.name, "lowered_name": compiled.lowered_name, "log": compiled.log,
            "arch": compiled.arch, "output": compiled.output, "parts": parts,
            "sha256": hashlib.sha256(compiled.binary).hexdigest(),
            "source_file": compiled.source.display_name,
            "built": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        _atomic_write(binary_path, compiled.binary)
        _atomic_write(meta_path, json.dumps(meta, indent=1).encode())  # last: marks it valid
        _atomic_write(_last_build_path(compiled.source, compiled.name),
                      json.dumps(parts).encode())
    except OSError as err:  # a read-only checkout still compiles, it just does not cache
        print(f"nvrtc: could not write the disk cache ({err}); continuing without it")


def disk_read(key: str) -> tuple[bytes, str, str] | None:
    """(binary, lowered name, log) of a valid entry; None when missing or damaged."""
    binary_path, meta_path = _entry(key)
    try:
        meta = json.loads(meta_path.read_text())
        binary = binary_path.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(binary).hexdigest() != meta.get("sha256"):
        return None  # damaged entry: rebuild (and overwrite it)
    return binary, meta["lowered_name"], meta.get("log", "")


def _last_build_path(src: Source, name: str) -> Path:
    return cache_dir() / "last_build" / f"{digest(src.display_name, name)}.json"


def why_rebuilt(src: Source, name: str, parts: dict) -> str:
    """Compare with the last build of the same kernel from the same file: what changed."""
    try:
        last = json.loads(_last_build_path(src, name).read_text())
    except (OSError, ValueError):
        return "not in the cache"
    labels = {"source": "source changed", "header": "generated header (defines) changed",
              "options": "options changed", "arch": "architecture/output changed",
              "nvrtc": "NVRTC version changed", "format": "cache format changed"}
    changed = [f"{labels[k]}"
               + (f": {last.get(k)} -> {parts[k]}" if k in ("arch", "nvrtc") else "")
               for k in labels if last.get(k) != parts[k]]
    return "; ".join(changed) or "not in the cache"
