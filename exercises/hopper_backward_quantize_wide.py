"""Exercise hopper_backward.quantize's check of the offsets past 2^31 elements
(:mod:`exercises.hopper_backward`): a tensor that large cannot be allocated on a laptop, and
none is needed, because the kernel runs in the interpreter with the strides of one and every
load and store switched off (:func:`addresses_only` records each lane's address and touches no
memory); the addresses are compared with those of a 64-bit computation."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from exercises import Mismatch

# Offsets past 2^31 elements. A tensor that large (8 GiB in float32) cannot be allocated here,
# and none is needed: the check launches the kernel in the interpreter with strides as a large
# tensor has them (2^30 elements between batches, or between heads, so that batch or head 2
# starts at element 2^31), with every load and store switched off (each lane's address
# recorded, no memory touched: loads give 0), and compares the addresses with those of a
# 64-bit computation. An int32 product b · sxb wraps around to -2^31 there, in the interpreter
# as compiled (NumPy's int32 arithmetic wraps as the GPU's does). Three batches or heads because
# a stride of 2^31 or more is an int64 argument already, which would hide an int32 index.
WIDE_STRIDE = 1 << 30
WIDE_SEQ, WIDE_DIM = 130, 16  # two blocks, the second ragged; small: only addresses are made


def wide_problems():
    """(label, (B, H), x strides, x8 strides): B = 3 with 2^30 elements between batches, then
    H = 3 with 2^30 between heads (x8's the same, keys-contiguous for the heads)."""
    s, d = WIDE_SEQ, WIDE_DIM
    return [(f"B = 3 with 2^30 elements between batches (batch 2 starts at element 2^31), "
             f"S = {s}, D = {d}", (3, 1), (WIDE_STRIDE, s * d, d, 1), (WIDE_STRIDE, s * d, d, 1)),
            (f"H = 3 with 2^30 elements between heads (head 2 starts at element 2^31), "
             f"S = {s}, D = {d}, x8 keys-contiguous", (1, 3), (3 * s * d, WIDE_STRIDE, d, 1),
             (3 * s * d, WIDE_STRIDE, 1, s))]


@contextlib.contextmanager
def addresses_only():
    """Every interpreted load and store inside the block records its active lanes' addresses
    (with the program and the element size) and touches no memory; loads give ``other`` (0)."""
    from unittest import mock

    from triton.runtime import interpreter

    from exercises.triton_checks import as_array

    load = interpreter.InterpreterBuilder.create_masked_load
    store = interpreter.InterpreterBuilder.create_masked_store
    seen: list[tuple[str, tuple[int, ...], int, np.ndarray]] = []

    def off(kind, ptrs, mask):
        size = max(ptrs.get_element_ty().primitive_bitwidth // 8, 1)
        addresses = as_array(ptrs).astype(np.uint64)
        active = np.broadcast_to(as_array(mask).astype(bool), addresses.shape)
        program = tuple(int(i) for i in interpreter.interpreter_builder.grid_idx)
        seen.append((kind, program, size, addresses[active]))
        none = np.zeros(addresses.shape, dtype=bool)
        if isinstance(mask, np.ndarray):  # (a tensor descriptor's mask is a plain array)
            return none
        return type(mask)(none, mask.dtype.scalar if hasattr(mask.dtype, "scalar")
                          else mask.dtype)

    def loading(self, ptrs, mask, other, *rest, **options):
        return load(self, ptrs, off("load", ptrs, mask), other, *rest, **options)

    def storing(self, ptrs, value, mask, *rest, **options):
        return store(self, ptrs, value, off("store", ptrs, mask), *rest, **options)

    with mock.patch.object(interpreter.InterpreterBuilder, "create_masked_load", loading), \
            mock.patch.object(interpreter.InterpreterBuilder, "create_masked_store", storing), \
            np.errstate(all="ignore"):
        yield seen


def expected_addresses(base: int, size: int, b: int, h: int, strides, seq: int,
                        dim: int) -> set[int]:
    sb, sh, ss, sd = strides
    return {base + size * (b * sb + h * sh + r * ss + c * sd) for r in range(seq)
            for c in range(dim)}


def expect_wide_offsets(kernel, int64_hint: str, strides_hint: str) -> str:
    """Mismatch unless the kernel's addresses are right where batch or head offsets pass 2^31
    elements (see WIDE_STRIDE), with ``int64_hint`` where an offset that large went wrong and
    ``strides_hint`` elsewhere; the report line."""
    from kernels.scaled_attention import quantize as q
    from kernels.scaled_matmul import E4M3

    s, d = WIDE_SEQ, WIDE_DIM
    n = q.scale_blocks(s)
    for label, (b, h), sx, s8 in wide_problems():
        x = torch.zeros(b * h * s * d)  # (real, small: nothing is read or written)
        x8 = torch.zeros(b * h * s * d, dtype=E4M3)
        scale = torch.zeros(b * h * n)
        with addresses_only() as seen:
            kernel[(n, b * h)](x, x8, scale, s, d, h, n, *sx, *s8, SCALE_FLOOR=q.SCALE_FLOOR,
                               E4M3_MAX=q.E4M3_MAX, SCALE_BLOCK=q.SCALE_BLOCK, BLOCK_D=d,
                               INTERPRETED=True)
        for bh in range(b * h):
            bi, hi = divmod(bh, h)
            for what, kind, base, size, strides in (
                    ("loaded from x", "load", x.data_ptr(), 4, sx),
                    ("stored to x8", "store", x8.data_ptr(), 1, s8)):
                want = expected_addresses(base, size, bi, hi, strides, s, d)
                got = set()
                for k, program, width, addresses in seen:
                    if k == kind and width == size and program[1] == bh:
                        got.update(int(a) for a in addresses)
                if got == want:
                    continue
                stray = sorted(got - want)
                where = (f"element {(stray[0] - base) // size - (1 << 64) // size:,} of its "
                         f"memory" if stray and stray[0] - base >= 1 << 63 else
                         f"element {(stray[0] - base) // size:,} of its memory" if stray else
                         "nothing there")
                first = bi * strides[0] + hi * strides[1]
                raise Mismatch(f"{label}: the programs of batch {bi}, head {hi} (its rows start "
                               f"at element {first:,}) {what} {where} "
                               f"({len(want - got):,} of its {len(want):,} elements missed)",
                               int64_hint if first >= 1 << 31 else strides_hint)
    return ("addresses right where a batch or head starts past 2^31 elements (strides of a "
            "large tensor, no memory touched)")
