"""Memory around a CUDA exercise's buffers that tells where its kernel went: an input inside
NaN (:func:`poisoned`: a value read from outside it and used turns the result NaN), an output
between fences (:func:`fenced`: a store before or past it is found and named, whatever it
wrote), an output followed by a NaN guard (:func:`guarded`). On a GPU this is how a check sees
an access outside the tensors without compute-sanitizer; on the CPU runner every access is
checked as well.
"""

from __future__ import annotations

import torch

GUARD = 1024  # elements of NaN past the end of an output: a write there is a bug
POISON = float("nan")  # around an input: a read outside it whose value is used turns NaN
FENCE = -1.0e30  # around an output: no kernel of these exercises writes it (NaN may be written)


def guarded(n: int, device: str, guard: int = GUARD) -> tuple[torch.Tensor, torch.Tensor]:
    """(an output of n float32, the NaN guard right after it): the kernel may write the output
    and nothing else; any guard element no longer NaN is a write past the end."""
    buffer = torch.full((n + guard,), float("nan"), device=device)
    return buffer[:n], buffer[n:]


def poisoned(x: torch.Tensor, pad: int = GUARD, offset: int = 0) -> torch.Tensor:
    """A copy of ``x`` (contiguous, same shape) inside a buffer of NaN, ``pad + offset``
    elements before it and ``pad`` after: a kernel that reads outside ``x`` and uses the value
    gets NaN. With ``pad`` a multiple of 4 and ``offset`` 0 it keeps a fresh tensor's 16-byte
    alignment; ``offset`` 1-3 puts it 4-12 bytes off."""
    buffer = torch.full((x.numel() + 2 * pad + offset,), POISON, device=x.device, dtype=x.dtype)
    inner = buffer[pad + offset:pad + offset + x.numel()].view(x.shape)
    inner.copy_(x)
    return inner


def fenced(n: int, device: str, pad: int = GUARD, offset: int = 0):
    """(an output of n float32 filled with :data:`FENCE`, a function that says where the kernel
    wrote outside it, or None): ``pad`` fence elements on each side (``offset`` more before
    it, for a misaligned output). A write before the start is caught as well as one past the
    end, whatever value it writes (NaN included)."""
    buffer = torch.full((n + 2 * pad + offset,), FENCE, device=device)
    start = pad + offset
    out = buffer[start:start + n]

    def outside() -> str | None:
        after = torch.nonzero(buffer[start + n:] != FENCE)
        if len(after):
            return f"past the end of y (element {n + int(after[0])}, y has {n})"
        before = torch.nonzero(buffer[:start] != FENCE)
        if len(before):
            return f"before the start of y (element {int(before[-1]) - start})"
        return None

    return out, outside
