"""Step 4's ping-pong as a protocol: the named barriers of its two consumers, and the schedule
they make, played out.

:func:`turn_calls` reads the reference ``turn_wait`` and ``turn_pass`` (which barrier, how many
threads, bar.sync or bar.arrive) from the lines between ``attention.cuh``'s turns markers;
:func:`consumer_calls` is the order in which ``attention.cu``'s consumers call them;
:func:`pingpong_schedule` runs both consumers through the barriers' counts, with made-up
durations, and says when each waits and which arrival releases it, or raises :class:`Hang`
when a protocol leaves one waiting forever.

Separate from :mod:`kernels.attention.hopper.figures`, which draws this schedule
(``figures.pingpong_barriers``): the protocol needs no matplotlib, and it is what the tests and
the exercise's wrong answers are checked against.
"""

from __future__ import annotations

import dataclasses
import re

from kernels.attention.hopper import fwd

WARPGROUP = fwd.WARPGROUP  # 128 threads: what one warpgroup adds to a barrier's count
BEGIN, END = "// ==== turns: begin", "// ==== turns: end"  # attention.cuh's exercise markers
# made-up durations (units of one QKᵀ on the tensor cores): the order is the kernel's, the
# lengths only make the overlap visible (lesson 18's recorded timeline has the real ones)
ISSUE, MATMUL, SOFTMAX = 0.5, 1.0, 1.5


@dataclasses.dataclass(frozen=True)
class Call:
    """One barrier instruction: mode "SYNC" (bar.sync: counts and waits) or "ARV" (bar.arrive:
    counts and goes on), the barrier id, the thread count. (The exercise's terms, so that
    :func:`exercises.hopper_attention.protocol_error` can read them.)"""

    mode: str
    id: int
    count: int


def _constant(source: str, name: str) -> int:
    m = re.search(rf"constexpr\s+int\s+{name}\s*=\s*(\d+)\s*;", source)
    if not m:
        raise ValueError(f"{fwd.PRIMITIVES.name} expected 'constexpr int {name} = <n>;'")
    return int(m[1])


def _evaluate(expression: str, names: dict[str, int]) -> int:
    """A sum of names and integers (``PINGPONG_FIRST_ID + 1 - consumer``): all the turns use."""
    terms = re.findall(r"([+-]?)\s*(\w+)", expression)
    if re.sub(r"[\s+\-\w]", "", expression) or not terms:
        raise ValueError(f"a barrier id expected a sum of names and integers, got {expression!r}")
    return sum((-1 if sign == "-" else 1) * (int(term) if term.isdigit() else names[term])
               for sign, term in terms)


def turn_calls(source: str | None = None) -> dict[tuple[str, int], Call]:
    """``{("turn_wait" | "turn_pass", consumer): Call}`` of the reference turns, read from the
    lines between attention.cuh's turns markers (``source``: that file's text, by default the
    course's): which barrier each call names, with which count, waiting or not."""
    text = fwd.PRIMITIVES.read_text() if source is None else source
    first_id = _constant(text, "PINGPONG_FIRST_ID")
    turns = text[text.index(BEGIN):text.index(END)]
    found = {}
    for name in ("turn_wait", "turn_pass"):
        body = re.search(rf"void\s+{name}\s*\(int consumer\)\s*\{{(.*?)\n\}}", turns, re.S)
        asm = body and re.search(r'bar\.(sync|arrive)\s+%0,\s*(\d+);"\s*::\s*"r"\((.*?)\)\s*:',
                                 body[1])
        if not asm:
            raise ValueError(f"{fwd.PRIMITIVES.name}: {name} expected one bar.sync or bar.arrive "
                             "with the id in a register and a thread count")
        for consumer in (0, 1):
            bar = _evaluate(asm[3], {"PINGPONG_FIRST_ID": first_id, "consumer": consumer})
            found[name, consumer] = Call("SYNC" if asm[1] == "sync" else "ARV", bar, int(asm[2]))
    return found


def consumer_calls(consumer: int, tiles: int) -> list[tuple[str, int]]:
    """What consumer ``consumer`` does over ``tiles`` key tiles, in attention.cu's order
    (steps 3-4's loop): ``("pass", turn)``, ``("wait", turn)``, ``("issue", turn)``,
    ``("softmax", tile)``. Turn 0 issues QKᵀ of tile 0, turn n QKᵀ of tile n and PV of tile
    n - 1, the last turn PV of the last tile: tiles + 1 turns. Consumer 1 passes once before its
    first turn (so consumer 0 goes first) and skips its pass after its last (nobody waits for
    it): each barrier gets as many arrivals as waits."""
    if consumer not in (0, 1) or tiles < 1:
        raise ValueError(f"consumer expected 0 or 1 and tiles >= 1, got {consumer}, {tiles}")
    calls = [("pass", -1)] if consumer == 1 else []
    for turn in range(tiles + 1):
        calls += [("wait", turn), ("issue", turn)]
        if not (turn == tiles and consumer == 1):
            calls.append(("pass", turn))
        if turn < tiles:  # after the last turn only PV is left to wait for
            calls.append(("softmax", turn))
    return calls


def turn_matmuls(turn: int, tiles: int) -> list[str]:
    """The matmuls one turn issues (tile n's QKᵀ = "S n", tile n - 1's PV = "PV n-1")."""
    return ([f"S{turn}"] if turn < tiles else []) + ([f"PV{turn - 1}"] if turn else [])


@dataclasses.dataclass
class Schedule:
    """What :func:`pingpong_schedule` works out. ``spans``: ``(lane, kind, start, end, label)``,
    lane 0 or 1 (a consumer) or "tc" (the tensor cores: kind "matmul of consumer c");
    ``calls``: ``(consumer, Call, start, end)`` per barrier instruction (end > start: a bar.sync
    that waited); ``releases``: ``(barrier, from consumer, arrive time, to consumer, release
    time)``, each pass that completed the other's wait."""

    spans: list = dataclasses.field(default_factory=list)
    calls: list = dataclasses.field(default_factory=list)
    releases: list = dataclasses.field(default_factory=list)

    def issue_order(self) -> list[tuple[int, int]]:
        """``(consumer, turn)`` in the order the turns were issued."""
        issues = [(start, lane, label) for lane, kind, start, _, label in self.spans
                  if kind == "issue"]
        return [(lane, int(label.split()[1])) for _, lane, label in sorted(issues)]


class Hang(RuntimeError):
    """The protocol leaves a consumer waiting on a barrier that nobody completes."""


def pingpong_schedule(tiles: int = 3, calls: dict | None = None) -> Schedule:
    """Step 4's two consumers over ``tiles`` key tiles, with the barrier protocol ``calls``
    (:func:`turn_calls`' form; by default the course's): each barrier counts ``WARPGROUP``
    threads per instruction and completes at its count, releasing the warpgroup that waits on
    it; the tensor cores run the issued matmuls one after another. Raises :class:`Hang` when a
    consumer would wait forever."""
    calls = turn_calls() if calls is None else calls
    programs = [consumer_calls(c, tiles) for c in (0, 1)]
    done = {}  # matmul label, consumer -> when the tensor cores finish it
    out = Schedule()
    clock, pc, waiting = [0.0, 0.0], [0, 0], [None, None]  # waiting: (Call, since)
    counted: dict[int, list[tuple[int, float]]] = {}  # barrier -> (consumer, time) this phase
    tc_free = 0.0

    def arrive(c: int, call: Call) -> None:
        phase = counted.setdefault(call.id, [])
        phase.append((c, clock[c]))
        if len(phase) * WARPGROUP < call.count:
            return
        counted[call.id] = []  # complete: release whoever waits on it, start a new phase
        for other in (0, 1):
            if waiting[other] and waiting[other][0].id == call.id:
                out.calls.append((other, waiting[other][0], waiting[other][1], clock[c]))
                out.releases += [(call.id, who, when, other, clock[c]) for who, when in phase
                                 if who != other]
                clock[other], waiting[other] = clock[c], None
                pc[other] += 1

    while any(pc[c] < len(programs[c]) for c in (0, 1)):
        ready = [c for c in (0, 1) if pc[c] < len(programs[c]) and waiting[c] is None]
        if not ready:
            stuck = [f"consumer {c} on barrier {waiting[c][0].id}" for c in (0, 1) if waiting[c]]
            raise Hang(f"{' and '.join(stuck)} wait forever: no arrival completes them")
        c = min(ready, key=lambda r: clock[r])  # the earlier one acts first
        what, n = programs[c][pc[c]]
        if what in ("wait", "pass"):
            call = calls["turn_wait" if what == "wait" else "turn_pass", c]
            if call.mode == "SYNC":  # (a pass that waits is a wrong protocol the check names)
                waiting[c] = (call, clock[c])
                arrive(c, call)  # completes at once if the other has already arrived
                continue
            if what == "wait":
                raise ValueError(f"turn_wait({c}) expected a bar.sync, got {call}")
            out.calls.append((c, call, clock[c], clock[c]))
            arrive(c, call)
        elif what == "issue":
            start = clock[c]
            for name in turn_matmuls(n, tiles):
                begin = max(start, tc_free)
                tc_free = begin + MATMUL
                done[name, c] = tc_free
                out.spans.append(("tc", f"matmul of consumer {c}", begin, tc_free, name))
            clock[c] += ISSUE
            out.spans.append((c, "issue", start, clock[c], f"turn {n}"))
        elif what == "softmax":
            # wgmma_wait: the tile's S is done; then the softmax; then PV of the tile before
            # (the next turn's A operand registers are free only after it)
            ready_at = max(clock[c], done[f"S{n}", c])
            out.spans.append((c, "waits for S", clock[c], ready_at, None))
            clock[c] = ready_at + SOFTMAX
            out.spans.append((c, "softmax", ready_at, clock[c], f"softmax {n}"))
            if n:
                clock[c] = max(clock[c], done[f"PV{n - 1}", c])
        pc[c] += 1
    return out
