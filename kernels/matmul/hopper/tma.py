"""TMA descriptors: how a Hopper kernel learns where a matrix is and what box of it to copy.

A TMA copy (``cp.async.bulk.tensor``) is one instruction from one thread that moves a whole box
of a 2-D tensor from global into shared memory, laid out (and swizzled) the way ``wgmma`` reads
it. The tensor's shape, strides and box are not instruction operands: they live in a 128-byte
``CUtensorMap`` that the *host* encodes with the driver's ``cuTensorMapEncodeTiled`` and passes
to the kernel by value (``const __grid_constant__ CUtensorMap`` in ``wgmma.cu``).

The course's kernels treat every operand as bytes: a K-major ``[rows, K]`` matrix is a
``[rows, K * itemsize]`` tensor of ``uint8``, and a box is 128 bytes of K by ``box_rows`` rows,
the width of the 128-byte swizzle. One encoding then serves bf16, fp16 and fp8 alike.

The driver checks the descriptor when it is encoded, not when it is used: the global address
must be 16-byte aligned, every stride a multiple of 16 bytes, the box at most 256 rows. This
module checks them first and names the operand, so the driver's "invalid value" never reaches a
student.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from course_utils import cuda_libs

BOX_BYTES = 128  # bytes of K per box: the 128-byte swizzle's width
MAX_BOX_ROWS = 256  # the TMA unit's limit per box dimension

# CUtensorMap* enums (cuda.h)
DATA_TYPE_UINT8 = 0
INTERLEAVE_NONE = 0
SWIZZLE_128B = 3
L2_PROMOTION_256B = 3  # fetch whole 256-byte lines into L2: the next box's rows are there
OOB_FILL_ZEROS = 0  # boxes that stick out of the tensor read zeros: no edge case in the kernel


class CUtensorMap(ctypes.Structure):
    """The driver's opaque descriptor: 128 bytes, 64-byte aligned, passed to kernels by value."""

    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


@functools.cache
def _encode_tiled():
    lib = cuda_libs.driver_library()
    fn = lib.cuTensorMapEncodeTiled
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.POINTER(CUtensorMap), ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                   u64p, u64p, u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                   ctypes.c_int]
    return fn


def check_operand(name: str, t: torch.Tensor) -> str | None:
    """Why ``t`` cannot be a TMA operand as the kernels read it (None: it can). ``t`` is the
    K-major ``[rows, K]`` view (A itself, or B.t())."""
    if t.dim() != 2:
        return f"{name} must be 2-D, got {t.dim()}-D"
    rows, k = t.shape
    if k > 1 and t.stride(1) != 1:
        return f"{name} must be K-major (K contiguous); got strides {t.stride()}"
    row_bytes = t.stride(0) * t.element_size() if rows > 1 else k * t.element_size()
    if row_bytes % 16:
        return (f"TMA needs 16-byte aligned rows: {name}'s rows are {row_bytes} bytes apart "
                f"(K = {k} of {t.element_size()}-byte elements; pad K to a multiple of "
                f"{16 // t.element_size()})")
    if t.data_ptr() % 16:
        return (f"TMA needs a 16-byte aligned start address; {name} starts "
                f"{t.data_ptr() % 16} bytes past one")
    if rows >= 2**31 or row_bytes >= 2**32:
        return f"{name} is too large for one descriptor ({rows} rows of {row_bytes} bytes)"
    return None


_encoded: dict[tuple, CUtensorMap] = {}
CACHE_ENTRIES = 64


def encode(t: torch.Tensor, box_rows: int, name: str = "operand") -> CUtensorMap:
    """The descriptor of a K-major ``[rows, K]`` CUDA tensor, boxes of 128 bytes x ``box_rows``,
    128-byte swizzled, zeros outside. Raises ValueError naming ``name`` for a tensor TMA cannot
    describe, RuntimeError when there is no CUDA driver."""
    # A descriptor holds only the address, shape, strides and box (not the data), so the same
    # values give the same descriptor: remember them, and a call in a loop skips the checks and
    # the driver (a key that was encoded once passed the checks then)
    key = (t.data_ptr(), t.shape, t.stride(), t.element_size(), box_rows,
           t.device) if isinstance(t, torch.Tensor) else None
    if (found := _encoded.get(key)) is not None:
        return found
    if not isinstance(t, torch.Tensor) or not t.is_cuda:
        raise ValueError(f"{name} expected a CUDA tensor, got "
                         f"{t.device if isinstance(t, torch.Tensor) else type(t).__name__}")
    if reason := check_operand(name, t):
        raise ValueError(reason)
    if not 1 <= box_rows <= MAX_BOX_ROWS:
        raise ValueError(f"box_rows expected 1..{MAX_BOX_ROWS}, got {box_rows}")
    rows, k = t.shape
    row_bytes = t.stride(0) * t.element_size() if rows > 1 else k * t.element_size()
    if len(_encoded) >= CACHE_ENTRIES:
        _encoded.clear()
    dims = (ctypes.c_uint64 * 2)(k * t.element_size(), rows)  # innermost first: bytes of K, rows
    strides = (ctypes.c_uint64 * 1)(row_bytes)  # bytes from one row to the next
    box = (ctypes.c_uint32 * 2)(BOX_BYTES, box_rows)
    element_strides = (ctypes.c_uint32 * 2)(1, 1)
    # the driver wants the descriptor 64-byte aligned; ctypes aligns structures to 8 only, so
    # encode into an aligned spot of a larger buffer and copy the 128 bytes out
    buffer = ctypes.create_string_buffer(ctypes.sizeof(CUtensorMap) + 64)
    spot = CUtensorMap.from_address(ctypes.addressof(buffer) + (-ctypes.addressof(buffer)) % 64)
    result = _encode_tiled()(ctypes.byref(spot), DATA_TYPE_UINT8, 2, ctypes.c_void_p(t.data_ptr()),
                             dims, strides, box, element_strides, INTERLEAVE_NONE, SWIZZLE_128B,
                             L2_PROMOTION_256B, OOB_FILL_ZEROS)
    cuda_libs.check_driver(result, f"encoding the TMA descriptor of {name} "
                                   f"({rows} x {k}, box {box_rows} rows)")
    _encoded[key] = CUtensorMap.from_buffer_copy(spot)
    return _encoded[key]
