"""The operators of the mutation harness (:mod:`exercises.mutants`): each turns one line of a
reference solution into the lines one student mistake makes of it (a bound moved by one, a mask
or a barrier dropped, axes swapped, an accumulator narrowed, a term dropped, ...). They work on
text, so the same operators mutate Triton (Python) and CUDA (in the answer's strings); operands
are found by balanced brackets, which is all the solutions' one-line expressions need.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

# --------------------------------------------------------------------------------------------
# Finding operands: the expression on each side of an operator, by balanced brackets
# --------------------------------------------------------------------------------------------

_OPEN, _CLOSE = "([{", ")]}"
# where an operand ends at depth 0 (an assignment, a separator, a ternary, a statement's end)
_STOPS = (",", ";", "?", ":", "=")


def _operand_end(text: str, start: int) -> int:
    """Index just past the operand that starts at ``start`` (to the right)."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0 and i > start and (ch == " " or any(text.startswith(s, i)
                                                             for s in _STOPS)):
            return i  # a space at this depth: the next operator or keyword
        i += 1
    return i


def _operand_start(text: str, end: int) -> int:
    """Index of the first character of the operand that ends just before ``end`` (leftwards)."""
    depth, i = 0, end - 1
    while i >= 0:
        ch = text[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            if depth == 0:
                return i + 1
            depth -= 1
        elif depth == 0 and ch in ",;?:= ":
            return i + 1  # a separator, or a space: the operator or keyword before it
        i -= 1
    return 0


def code_part(line: str, cuda: bool) -> str:
    """The line without its trailing comment (``//`` in CUDA, ``#`` in Python)."""
    marker = "//" if cuda else "#"
    at = line.find(marker)
    return line if at < 0 else line[:at]


# --------------------------------------------------------------------------------------------
# The operators: each yields (what changed, the new line) for one line of the solution
# --------------------------------------------------------------------------------------------


def _each(pattern: str, line: str, replace: Callable[[re.Match], str | None]) -> Iterator[str]:
    """Every line with one match of ``pattern`` replaced (``replace`` may decline with None)."""
    for m in re.finditer(pattern, line):
        new = replace(m)
        if new is not None:
            yield line[:m.start()] + new + line[m.end():]


def op_bound(code: str) -> Iterator[str]:
    """A comparison moved by one: < and <=, > and >= exchanged (a loop bound, a mask, a guard)."""
    swap = {" < ": " <= ", " <= ": " < ", " > ": " >= ", " >= ": " > "}
    yield from _each(r" (<=|>=|<|>) ", code, lambda m: swap[m.group(0)])


def _argument_end(text: str, start: int) -> int:
    """Index of the comma or closing bracket that ends the call argument starting at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPEN:
            depth += 1
        elif text[i] in _CLOSE:
            if depth == 0:
                return i
            depth -= 1
        elif text[i] == "," and depth == 0:
            return i
    return len(text)


def op_mask_dropped(code: str) -> Iterator[str]:
    """A Triton load or store without its ``mask=`` (or its ``other=``)."""
    for name in ("mask", "other"):
        for m in re.finditer(rf"(,\s*)?\b{name}=", code):
            end = _argument_end(code, m.end())
            if m.group(1) is None:  # the argument opens a continuation line: take its comma
                end += code[end:end + 1] == ","
            yield code[:m.start()] + code[end:]


def op_guard_dropped(code: str) -> Iterator[str]:
    """A CUDA guard dropped: ``if (cond) statement;`` runs always."""
    for m in re.finditer(r"\bif \(", code):
        end = _argument_end(code, m.end())
        if end < len(code) and code[end] == ")" and code[end + 1:].strip():
            yield code[:m.start()] + code[end + 1:].lstrip()


def _logical_operand(text: str, at: int, step: int) -> int:
    """The end (``step`` 1) or start (``step`` -1) of the condition beside the ``&&`` or ``&``
    at ``at``: it runs to the enclosing bracket, a separator or the next logical operator."""
    depth, i = 0, at
    while 0 <= i < len(text):
        ch = text[i]
        if ch in (_OPEN if step < 0 else _CLOSE):
            if depth == 0:
                return i + (1 if step < 0 else 0)
            depth -= 1
        elif ch in (_CLOSE if step < 0 else _OPEN):
            depth += 1
        elif depth == 0 and (ch in ",;?=" or text[i:i + 2] in ("&&", "||")
                             or text[i - 1:i + 2] in (" & ", " | ")):
            return i + (1 if step < 0 else 0)
        i += step
    return 0 if step < 0 else len(text)


def op_operand_dropped(code: str) -> Iterator[str]:
    """One side of ``&&`` or ``&`` dropped (half of a bounds test or of a 2-D mask)."""
    for m in re.finditer(r" (&&|&) ", code):
        left = _logical_operand(code, m.start() - 1, -1)
        right = _logical_operand(code, m.end(), 1)
        yield code[:left] + code[m.end():]  # the left condition dropped
        yield code[:m.start()] + code[right:]  # the right one dropped


def op_barrier(code: str) -> Iterator[str]:
    """A barrier dropped, or narrowed to the warp."""
    for m in re.finditer(r"__syncthreads\(\);", code):
        yield code[:m.start()] + code[m.end():]
        yield code[:m.start()] + "__syncwarp();" + code[m.end():]


def op_axes_swapped(code: str) -> Iterator[str]:
    """Thread axes or subscripts swapped: threadIdx.x for .y, tx for ty, ``[i][j]`` for
    ``[j][i]``, Triton's ``[:, None]`` for ``[None, :]`` (the uncoalesced or transposed access)."""
    pairs = {"threadIdx.x": "threadIdx.y", "threadIdx.y": "threadIdx.x",
             "[:, None]": "[None, :]", "[None, :]": "[:, None]"}
    yield from _each(r"threadIdx\.[xy]|\[:, None\]|\[None, :\]", code,
                     lambda m: pairs[m.group(0)])
    yield from _each(r"\btx\b|\bty\b", code, lambda m: "ty" if m.group(0) == "tx" else "tx")
    yield from _each(r"\[([^\[\]]+)\]\[([^\[\]]+)\]", code,
                     lambda m: f"[{m.group(2)}][{m.group(1)}]")


def op_narrowed(code: str) -> Iterator[str]:
    """An accumulator or a computation in 16 bits instead of 32: ``tl.float32`` -> float16,
    an upcast ``.to(tl.float32)`` dropped, ``float acc`` -> ``__half acc``."""
    yield from _each(r"tl\.float32", code, lambda m: "tl.float16")
    yield from _each(r"\.to\(tl\.float32\)", code, lambda m: "")
    yield from _each(r"\bfloat (acc|sum)\b", code, lambda m: f"__half {m.group(1)}")


def op_term_dropped(code: str) -> Iterator[str]:
    """One side of a + - * dropped (a rescale, a scale, an offset term forgotten)."""
    for m in re.finditer(r" ([+\-*]) ", code):
        left = _operand_start(code, m.start())
        if left == m.start() or not code[left:m.start()].strip():
            continue  # a unary sign
        right = _operand_end(code, m.end())
        yield code[:m.start()] + code[right:]  # keep the left side
        if m.group(1) != "-":
            yield code[:left] + code[m.end():]  # keep the right side


def op_operator_swapped(code: str) -> Iterator[str]:
    """An arithmetic operator confused: / and %, ^ and |, += and = (an overwrite)."""
    swap = {" / ": " % ", " % ": " / ", " ^ ": " | ", " += ": " = "}
    yield from _each(r" (/|%|\^|\+=) ", code, lambda m: swap[m.group(0)])


def op_constant(code: str) -> Iterator[str]:
    """An integer constant one larger (a block size, a shift, an offset, a lane)."""
    yield from _each(r"(?<![\w.%])\d+(?![\w.])", code, lambda m: str(int(m.group(0)) + 1))


def op_state_space(code: str) -> Iterator[str]:
    """An inline-PTX operand in the wrong state space: a shared-memory instruction given a
    generic address, or the instruction's ``.shared::cta`` qualifier dropped."""
    yield from _each(r'"r"\(smem_addr\(([^()]+)\)\)', code, lambda m: f'"l"({m.group(1)})')
    yield from _each(r"\.shared::cta", code, lambda m: "")


OPERATORS: dict[str, Callable[[str], Iterator[str]]] = {
    "bound": op_bound, "mask dropped": op_mask_dropped, "guard dropped": op_guard_dropped,
    "operand dropped": op_operand_dropped,
    "barrier": op_barrier, "axes swapped": op_axes_swapped, "narrowed": op_narrowed,
    "term dropped": op_term_dropped, "operator swapped": op_operator_swapped,
    "constant": op_constant, "state space": op_state_space}
