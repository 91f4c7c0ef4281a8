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


def events(sass: str, kinds: dict[str, str]) -> tuple[list[tuple[int, str]],
                                                    list[tuple[int, int]]]:
    """(address, kind) of the instructions of ``sass`` whose opcode ``kinds`` names
    (``{"STS": "S", "LDS": "L", ...}``; a block barrier, BAR.SYNC, is always "B"), in program
    order, and the loops as (first address, address of the branch back)."""
    labels: dict[str, int] = {}
    pending: list[str] = []
    found, branches = [], []
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
        if op in kinds:
            found.append((addr, kinds[op]))
        elif op == "BAR" and ".SYNC" in mods:
            found.append((addr, "B"))
        elif op == "BRA":
            target = re.search(r"\(?(\.L_x_\d+)\)?|0x([0-9a-f]+)", m.group("rest"))
            if target:
                branches.append((addr, target.group(1) or int(target.group(2), 16)))
    loops = [(labels.get(t, t) if isinstance(t, str) else t, addr) for addr, t in branches]
    return found, [(start, end) for start, end in loops if isinstance(start, int)
                   and start <= end]


def _events(sass: str) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """(address, "S" store / "L" load / "B" barrier) of shared memory in program order, and the
    loops (:func:`events`)."""
    return events(sass, {**dict.fromkeys(SHARED_STORES, "S"), **dict.fromkeys(SHARED_LOADS, "L")})


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


# --------------------------------------------------------------------------------------------
# Inline PTX: the state space of each address (a generic address given to a .shared instruction)
# --------------------------------------------------------------------------------------------

_PTX_INSTRUCTION = re.compile(r"^\s*(?:@!?%?\w+\s+)?(?P<op>[a-z][\w.:]*)\s+(?P<args>[^;]*);")
_PTX_SPACES = (".shared", ".global", ".local", ".param", ".const")
# instructions that take an address: with no state space qualifier they take a generic one
_PTX_MEMORY = ("ld.", "st.", "atom.", "red.", "mbarrier.", "cp.", "ldmatrix.", "stmatrix.",
               "prefetch.", "multimem.")


@dataclass(frozen=True)
class PtxAddress:
    """The address operand of one memory instruction of the PTX, as far as it can be traced
    back: ``space`` "shared" (a .shared window address: a shared symbol or cvta.to.shared),
    "generic" (cvta.shared / cvta.global / a kernel parameter: a generic address) or None
    (unknown), ``symbol`` and byte ``offset`` where known."""

    line: str  # the instruction, as written in the PTX
    op: str  # its opcode with qualifiers
    wants: str  # "shared" (a .shared / .shared::cta / .shared::cluster instruction) or "generic"
    space: str | None
    symbol: str | None
    offset: int | None
    inline: bool  # inside an inline-asm block (the student's asm)


def _ptx_operands(args: str) -> list[str]:
    return [a.strip() for a in re.split(r",(?![^\[{]*[\]}])", args) if a.strip()]


def ptx_addresses(ptx: str, function: str | None = None) -> list[PtxAddress]:
    """Every address operand of a shared, or generic, memory instruction in ``ptx`` (only in
    ``.entry``/``.func`` ``function`` when given), traced back through mov, add, cvt and cvta
    to where it came from (a symbol and its state space, or a kernel parameter)."""
    if function is not None:
        start = re.search(rf"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?{re.escape(function)}\b", ptx)
        if start is None:
            raise ValueError(f"{function} is not in the PTX")
        ptx = ptx[start.start():]
        ptx = ptx[:ptx.find("\n}\n") + 3] if "\n}\n" in ptx else ptx
    spaces = {m.group(2): m.group(1)[1:] for m in
              re.finditer(r"^\s*(?:\.extern\s+|\.visible\s+|\.weak\s+)*(\.shared|\.global|"
                          r"\.const|\.local)\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)", ptx, re.M)}
    values: dict[str, tuple[str | None, str | None, int | None]] = {}
    found, inline = [], False

    def value(operand: str) -> tuple[str | None, str | None, int | None]:
        operand = operand.strip()
        if operand in values:
            return values[operand]
        if operand in spaces:  # a symbol's address in its own state space
            return ("shared" if spaces[operand] == "shared" else "generic"
                    if spaces[operand] == "global" else None, operand, 0)
        return None, None, None

    for line in ptx.splitlines():
        if "begin inline asm" in line:
            inline = True
        elif "end inline asm" in line:
            inline = False
        m = _PTX_INSTRUCTION.match(line)
        if not m:
            continue
        op, args = m.group("op"), _ptx_operands(m.group("args"))
        if op.startswith(_PTX_MEMORY) and (address := re.search(
                r"\[\s*(%?[\w$]+)\s*(?:\+\s*(-?\d+))?\s*\]", m.group("args"))):
            space_of_op = next((s for s in _PTX_SPACES if s in op), None)
            if space_of_op in (None, ".shared"):
                space, symbol, offset = value(address.group(1))
                if offset is not None and address.group(2):
                    offset += int(address.group(2))
                found.append(PtxAddress(line.strip(), op, "shared" if space_of_op else
                                        "generic", space, symbol, offset, inline))
        if not args or not args[0].startswith("%"):
            continue
        dest, sources = args[0], args[1:]
        if op.startswith("mov.") and len(sources) == 1:
            values[dest] = value(sources[0])
        elif op.startswith("cvta.to.shared"):
            _, symbol, offset = value(sources[0])
            values[dest] = ("shared", symbol, offset)
        elif op.startswith("cvta."):  # .shared / .global / .local -> generic
            _, symbol, offset = value(sources[0])
            values[dest] = ("generic", symbol, offset)
        elif op.startswith("cvt.") and len(sources) == 1:
            values[dest] = value(sources[0])
        elif op.startswith("ld.param") and re.search(r"\.[us]64|\.b64", op):
            values[dest] = ("generic", None, None)  # a pointer argument: a generic address
        elif op.startswith(("add.", "sub.")) and len(sources) == 2:
            (space, symbol, offset), other = value(sources[0]), sources[1]
            if re.fullmatch(r"-?\d+", other) and offset is not None:
                values[dest] = (space, symbol, offset + int(other) * (1 if op[0] == "a" else -1))
            else:
                second = value(other)
                values[dest] = (space or second[0], symbol or second[1], None)
        else:
            values[dest] = (None, None, None)
    return found


def state_space_errors(ptx: str, function: str | None = None, inline_only: bool = True
                       ) -> list[str]:
    """What is wrong with the state spaces of the addresses the PTX's memory instructions take
    (the inline asm's only, by default): a generic address given to a ``.shared`` /
    ``.shared::cta`` / ``.shared::cluster`` instruction (undefined behaviour that may happen to
    work), or a shared-window address given to an instruction with no state space (which reads
    it as a generic address). Empty: nothing wrong seen."""
    errors = []
    for a in ptx_addresses(ptx, function):
        if inline_only and not a.inline:
            continue
        if a.wants == "shared" and a.space == "generic":
            errors.append(f"`{a.line}` is a shared-memory instruction ({a.op}) given a generic "
                          "address (what a C++ pointer such as &bar holds: cvta.shared of it, "
                          "or a pointer argument), not an address in the .shared state space")
        elif a.wants == "generic" and a.space == "shared":
            errors.append(f"`{a.line}` has no state space (a generic instruction) but is given "
                          "an address in the .shared state space (from __cvta_generic_to_shared"
                          "): it reads that number as a generic address")
    return errors
