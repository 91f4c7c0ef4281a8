"""What a kernel prints with ``printf``, captured where it really goes: file descriptor 1.

A kernel's ``printf`` formats each line into a fixed-size buffer in device memory (the
context's ``CU_LIMIT_PRINTF_FIFO_SIZE``, :func:`printf_buffer_bytes`: 8 MiB in PyTorch's context
on the course's H100, where CUDA's documentation names 1 MiB; when it fills, lines are lost).
The driver copies the buffer out only at a synchronisation point: the next
``cudaDeviceSynchronize`` (``torch.cuda.synchronize()``), a blocking copy such as ``.cpu()``, the
next kernel launch on some drivers, or the end of the process. It writes it to the process's
file descriptor 1, the C library's ``stdout``, not to Python's ``sys.stdout``:

* in a terminal, the lines appear there;
* in Jupyter (ipykernel 6 and later) fd 1 is a pipe that a thread of the kernel forwards to the
  notebook, whenever it reads it: the lines can land under a later cell, and where that capture
  is off (ipykernel does not redirect under pytest, so under nbval) they go to the terminal that
  started the kernel and the notebook never shows them.

:func:`captured` makes it deterministic: fd 1 points at a temporary file while the code runs,
the device is synchronised (the buffer is flushed into the file), the C library's buffers are
flushed, fd 1 is put back, and the text comes back as a string to print.

    text = device_stdout.captured(lambda: kernel(x, n, grid=2, block=4))
    print(text)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable, Iterator

PRINTF_FIFO_SIZE = 0x01  # CUlimit: CU_LIMIT_PRINTF_FIFO_SIZE (cuda.h)


class Output:
    """The text written to the file descriptor while :func:`fd_output` held it."""

    text: str = ""


def _flush_c_stdio() -> None:
    """fflush(NULL): the C library's buffered streams (its stdout among them) to their fds."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def fd_output(fd: int = 1) -> Iterator[Output]:
    """Everything written to file descriptor ``fd`` inside the block, by Python, C code or the
    CUDA driver, goes to a temporary file; after the block ``.text`` holds it and ``fd`` is
    what it was before."""
    sys.stdout.flush()
    sys.stderr.flush()
    _flush_c_stdio()  # what was written before the block stays out of it
    saved = os.dup(fd)
    out = Output()
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            yield out
        finally:
            sys.stdout.flush()
            _flush_c_stdio()
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            out.text = tmp.read().decode(errors="replace")


def captured(fn: Callable[[], object], synchronize: bool = True) -> str:
    """What ``fn()`` made the GPU print: fd 1 captured around the call and, with ``synchronize``
    (the default), a ``torch.cuda.synchronize()`` that flushes the device's printf buffer
    before fd 1 is put back. Without it, the lines stay in the buffer and come out at the next
    synchronisation, wherever fd 1 points then."""
    with fd_output(1) as out:
        fn()
        if synchronize:
            import torch

            torch.cuda.synchronize()
    return out.text


def printf_buffer_bytes() -> int:
    """The size of the current CUDA context's printf buffer (needs a GPU and a context: call it
    after a first CUDA operation)."""
    from course_utils import cuda_libs

    size = ctypes.c_size_t()
    status = cuda_libs.driver_library().cuCtxGetLimit(ctypes.byref(size), PRINTF_FIFO_SIZE)
    if status != 0:
        raise RuntimeError(f"cuCtxGetLimit(CU_LIMIT_PRINTF_FIFO_SIZE) failed with status {status}")
    return size.value
