"""Reading a student's kernel in SASS, on any machine with a disassembler: what the census must
hold, no local memory, and the barriers around shared memory.

* :class:`Need`: an opcode the statement asks for (``SHFL`` for warp shuffles, ``STS``/``LDS``
  for a shared-memory tile, ``LDG`` for reading the input at all), with the words to say when it
  is missing; :func:`expect_opcodes` checks a census against a tuple of them;
* :func:`expect_no_spills`: no stack frame and no local-memory traffic;
* :func:`shared_memory_races`: a block barrier (``BAR.SYNC``, ``__syncthreads``) between the
  stores into shared memory and the loads from it, and inside a loop between this iteration's
  loads and the next iteration's stores. It reads the SASS in program order and the loops from
  its backward branches: a static check that catches the classic missing ``__syncthreads`` on a
  CPU, before compute-sanitizer's racecheck can run on a GPU.

:mod:`exercises.kernel_checks` composes these with compiling, the GPU child and the sanitizer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from exercises import CannotCheck, expect


@dataclass(frozen=True)
class Need:
    """What the SASS must hold: one of ``opcodes`` at least, else ``message`` and ``hint``."""

    opcodes: tuple[str, ...]
    message: str
    hint: str


def sass_report(compiled):
    """The SASS census of a compiled CUBIN; CannotCheck where nothing can disassemble."""
    from course_utils import sass

    if reason := sass.unavailable_reason():
        raise CannotCheck(f"it compiles; reading its SASS needs a disassembler: {reason}")
    return sass.report(compiled)


def expect_opcodes(report, wanted) -> str:
    """Mismatch at the first :class:`Need` of ``wanted`` the census lacks; else what it holds
    of them, in words ("4 STS, 8 LDS")."""
    for need in wanted:
        expect(report.count(*need.opcodes) > 0, need.message, need.hint)
    shown = sorted({op for need in wanted for op in need.opcodes if report.census[op]})
    return ", ".join(f"{report.census[op]} {op}" for op in shown)


def expect_no_spills(report, label: str) -> None:
    res = report.resources
    spilled = res.spill_store_bytes + res.spill_load_bytes
    expect(res.stack_bytes == 0 and spilled == 0,
           f"{label}: {res.registers} registers a thread and a {res.stack_bytes}-byte stack "
           f"frame, {spilled} bytes of local-memory traffic (LDL/STL): the kernel spills or "
           "keeps an array in local memory", "index per-thread arrays with constants (unrolled "
           "loops) so they stay in registers")


_LINE = re.compile(r"/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?(?P<op>[A-Z][A-Z0-9_]*)"
                   r"(?P<mods>[.\w]*)(?P<rest>[^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):", re.M)
SHARED_STORES = ("STS", "LDGSTS", "STSM")  # LDGSTS: cp.async writes shared memory
SHARED_LOADS = ("LDS", "LDSM")


def _events(sass: str) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """(address, "S" store / "L" load / "B" barrier) in program order, and the loops as
    (first address, address of the branch back)."""
    labels: dict[str, int] = {}
    pending: list[str] = []
    events, branches = [], []
    for line in sass.splitlines():
        if label := _LABEL.match(line):
            pending.append(label.group(1))
            continue
        m = _LINE.search(line)
        if not m:
            continue
        addr, op, mods = int(m.group("addr"), 16), m.group("op"), m.group("mods")
        for name in pending:
            labels[name] = addr
        pending = []
        if op in SHARED_STORES:
            events.append((addr, "S"))
        elif op in SHARED_LOADS:
            events.append((addr, "L"))
        elif op == "BAR" and ".SYNC" in mods:
            events.append((addr, "B"))
        elif op == "BRA":
            target = re.search(r"\(?(\.L_x_\d+)\)?|0x([0-9a-f]+)", m.group("rest"))
            if target:
                branches.append((addr, target.group(1) or int(target.group(2), 16)))
    loops = [(labels.get(t, t) if isinstance(t, str) else t, addr) for addr, t in branches]
    return events, [(start, end) for start, end in loops if isinstance(start, int)
                    and start <= end]


def _unbarriered(sequence: list[str]) -> str | None:
    """"SL" when a load follows a store with no barrier between, "LS" the other way round."""
    stored = loaded = False
    for kind in sequence:
        if kind == "B":
            stored = loaded = False
        elif kind == "L":
            if stored:
                return "SL"
            loaded = True
        else:
            if loaded:
                return "LS"
            stored = True
    return None


def shared_memory_races(sass: str) -> str | None:
    """What is wrong with the barriers around shared memory in ``sass`` (None: nothing seen).

    Between the stores of a tile and the loads of it there must be a block barrier (BAR.SYNC,
    ``__syncthreads``); inside a loop, also between this iteration's loads and the next
    iteration's stores (reading the loop body twice in a row finds those)."""
    events, loops = _events(sass)
    if _unbarriered([kind for _, kind in events]) == "SL":
        return ("a load from shared memory (LDS/LDSM) follows the stores into it (STS) with no "
                "barrier (BAR.SYNC) between: a thread may read an element another thread has "
                "not stored yet")
    for start, end in loops:
        body = [kind for addr, kind in events if start <= addr <= end]
        if _unbarriered(body + body) == "LS":
            return ("inside the loop, the next iteration's stores into shared memory (STS) "
                    "follow this iteration's loads (LDS) with no barrier (BAR.SYNC) between: a "
                    "fast thread overwrites the tile while slower ones still read it")
    return None
