"""Sharing one GPU between many processes: ``make test-gpu`` runs a pytest worker per core, and
each notebook under test in a kernel of its own, all on one GPU.

PyTorch's caching allocator keeps every block a process has freed, for the process to reuse:
after a GPT-2 step at S = 4096 a notebook's kernel holds tens of GiB it no longer needs, and
the other fifteen processes run out of memory beside it. With ``COURSE_SHARED_GPU=1`` (set by
``make test-gpu``) each notebook kernel gives its cached blocks back after every cell, and each
pytest worker after every test. A student's own session keeps the cache (it is faster).
"""

from __future__ import annotations

import gc
import os
import sys

SHARED: bool = os.environ.get("COURSE_SHARED_GPU", "") not in ("", "0")


def give_back_cached_memory(*_ignored) -> None:
    """Return the allocator's free blocks to the GPU, if this process has used CUDA (a process
    that never touched the GPU is left alone: initialising CUDA here would cost a context)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    gc.collect()  # tensors kept alive only by reference cycles are freed first
    torch.cuda.empty_cache()
