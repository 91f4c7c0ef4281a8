"""Figures of lessons 18 and 19, drawn from the kernels' own sources and layouts.

    figures.pingpong_barriers(tiles=3)   # step 4: two consumers take turns through named barriers
    figures.dq_add_fragment()            # version 2's dQ epilogue: what each thread adds, where

The ping-pong reads its barriers (ids, thread counts, wait or arrive) from the reference
``turn_wait`` and ``turn_pass`` in ``attention.cuh``, and runs them through the order in which
``attention.cu`` calls them (:func:`consumer_calls`); only the durations are made up. The dQ
figure places every ``dq_acc`` element with the exercise's own fragment layout
(:func:`kernels.matmul.hopper.layout.accumulator_home`, the one exercise hopper_backward.dq_add's
check holds the kernel to).
Each function returns a matplotlib figure; lesson 16's figures (``kernels/matmul/hopper``) are
the pattern.
"""

from __future__ import annotations

import dataclasses
import re

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt

from kernels.attention.hopper import fwd
from kernels.attention.hopper.timeline import COLORS as TIMELINE_COLORS

WARPGROUP = fwd.WARPGROUP  # 128 threads: what one warpgroup adds to a barrier's count
BEGIN, END = "// ==== turns: begin", "// ==== turns: end"  # attention.cuh's exercise markers
# made-up durations (units of one QKᵀ on the tensor cores): the order is the kernel's, the
# lengths only make the overlap visible (lesson 18's recorded timeline has the real ones)
ISSUE, MATMUL, SOFTMAX = 0.5, 1.0, 1.5
CONSUMER_COLORS = ("#6baed6", "#74c476")  # consumer 0, consumer 1 (and their tensor-core work)
BARRIER_COLORS = ("#08519c", "#006d2c")  # arrows into consumer 0's barrier, into consumer 1's
ISSUE_COLOR, WAIT_MMA_COLOR = "#525252", "#e0e0e0"


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=0.5, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                in_layout=False)


# -- (a) the ping-pong's named barriers ----------------------------------------------------------


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


def pingpong_barriers(tiles: int = 3):
    """Step 4's two consumer warpgroups over ``tiles`` key tiles: when each issues its turn's
    matmuls, which barrier it waits on (``sync b``, above or below its row) and arrives at
    (``arrive b``), and which arrival completes which wait (arrows, coloured by barrier); the
    tensor cores' row shows whose matmuls run. Barriers and their order are the kernel's
    (:func:`turn_calls`, :func:`consumer_calls`), the durations schematic."""
    calls = turn_calls()
    schedule = pingpong_schedule(tiles, calls)
    end = max(s[3] for s in schedule.spans)
    lane_y = {0: 0.0, 1: 2.2, "tc": 4.0}  # rows, top to bottom; arrows cross the gap 0-1
    height = 0.8
    fig, ax = plt.subplots(figsize=(max(11.0, 2.0 + 0.62 * end), 4.6), layout="constrained")
    wait = calls["turn_wait", 0]
    fig.suptitle(f"step 4's ping-pong over {tiles} key tiles: two consumer warpgroups take turns "
                 f"at the tensor cores\nconsumer c waits on barrier {wait.id} + c (bar.sync), "
                 f"passes the turn to the other's (bar.arrive); {wait.count} threads complete one",
                 fontweight="bold", fontsize=10)
    for lane, kind, start, stop, label in schedule.spans:
        y = lane_y[lane]
        if lane == "tc":
            _box(ax, start, y, stop - start, height, label, fontsize=7,
                 face=CONSUMER_COLORS[int(kind[-1])])
        elif kind == "issue":
            _box(ax, start, y, stop - start, height, face=ISSUE_COLOR)
        elif kind == "softmax":
            _box(ax, start, y, stop - start, height, label, face=TIMELINE_COLORS["softmax"],
                 fontsize=7)
        elif stop > start:  # waiting for its S on the tensor cores
            _box(ax, start, y + 0.3, stop - start, 0.2, face=WAIT_MMA_COLOR, lw=0)
    for consumer, call, start, stop in schedule.calls:
        y = lane_y[consumer]
        above = consumer == 0  # consumer 0's labels above its row, consumer 1's below
        if call.mode == "SYNC" and stop > start:  # a wait that did wait
            _box(ax, start, y + 0.25, stop - start, 0.3, face=TIMELINE_COLORS["wait turn"], lw=0)
        word = "sync" if call.mode == "SYNC" else "arrive"
        row = (0 if call.mode == "SYNC" else 1) * 0.32  # syncs nearer the row than arrives
        ty = y - 0.12 - row if above else y + height + 0.12 + row
        ax.text(stop if call.mode == "SYNC" else start, ty, f"{word} {call.id}",
                ha="right" if call.mode == "SYNC" else "left",
                va="bottom" if above else "top", fontsize=7, color=BARRIER_COLORS[call.id -
                                                                                 wait.id])
    for bar, source, at, target, released in schedule.releases:
        y0 = lane_y[source] + (height if source == 0 else 0)
        y1 = lane_y[target] + (height if target == 0 else 0)
        ax.annotate("", xy=(released, y1), xytext=(at, y0),
                    arrowprops=dict(arrowstyle="->", color=BARRIER_COLORS[bar - wait.id],
                                    lw=1.0, shrinkA=0, shrinkB=0))
    for lane, name in ((0, "consumer 0\n(threads 0-127)"), (1, "consumer 1\n(threads 128-255)"),
                       ("tc", "tensor cores")):
        ax.text(-0.3, lane_y[lane] + height / 2, name, ha="right", va="center", fontsize=8)
    ax.text(0, lane_y["tc"] + height + 0.15, f"consumer 1 passes once before its first turn "
            f"(arrive {calls['turn_pass', 1].id} at time 0), so consumer 0 goes first, and "
            "skips its pass after its last turn: every wait gets one arrival", ha="left",
            va="top", fontsize=7, color="#555555")
    handles = [mpatches.Patch(color=ISSUE_COLOR, label="issues its turn's wgmma"),
               mpatches.Patch(color=WAIT_MMA_COLOR, label="waits for its S"),
               mpatches.Patch(color=TIMELINE_COLORS["softmax"], label="softmax"),
               mpatches.Patch(color=TIMELINE_COLORS["wait turn"], label="bar.sync waiting"),
               *(mpatches.Patch(color=BARRIER_COLORS[i], label=f"barrier {wait.id + i}: "
                                f"consumer {i}'s turn") for i in (0, 1))]
    fig.legend(handles=handles, loc="outside lower center", ncol=6, fontsize=7)
    ax.set_xlim(-0.1, end + 0.1)
    ax.set_ylim(lane_y["tc"] + height + 0.7, -0.9)
    ax.set_xlabel("time (schematic: units of one QKᵀ; the order is attention.cu's)", fontsize=8)
    ax.set_yticks([])
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.grid(False)
    return fig


# -- (b) version 2's dQ epilogue: the accumulator's fragment, added by atomics --------------------

ACC = 32  # dq_acc[32]: a thread's part of a warpgroup's 64 x 64 fp32 accumulator
WARP_COLORS = ("#deebf7", "#fee6ce", "#e5f5e0", "#efedf5")  # the warpgroup's 4 warps
INDEX_COLORS = plt.get_cmap("Set2").colors[:4]  # 2h + e: the row half and the pair's column
THREAD_COLOR, GUARD_COLOR = "#cb181d", "#bdbdbd"


def fragment(d: int, m0: int, dq_col0: int, thread: int) -> list[tuple[int, int, int]]:
    """``(query row, column of D, i)`` of thread ``thread``'s ``dq_acc[i]``, from the layout
    exercise hopper_backward.dq_add's check holds the kernel to (``d`` chose ``dq_col0``)."""
    from kernels.matmul.hopper.layout import WARPGROUP_THREADS, accumulator_home

    if not 0 <= thread < WARPGROUP_THREADS:
        raise ValueError(f"thread expected 0..{WARPGROUP_THREADS - 1} (one warpgroup), got "
                         f"{thread}")
    return [(*accumulator_home(thread, i, m0, dq_col0), i) for i in range(ACC)]


def _dq_head(ax, d: int, sq: int, sk: int, m0: int, consumer: int) -> None:
    """The head's dQ rows in query tiles, the next head's rows below, and the key blocks that
    all add into the tile at ``m0`` (arrows)."""
    from kernels.attention.hopper import bwd

    tiles = -(-sq // bwd.QUERY_TILE)
    blocks = -(-sk // bwd.KEYS_PER_BLOCK)
    top, row_h, width = 0.0, 1.0, 3.0  # one query tile a unit high; D across 3 units
    x0 = 4.2
    for q in range(tiles + 1):  # one tile more: the next head's first rows
        y = top + q * row_h
        next_head = q == tiles
        label = ("head bh + 1's first rows" if next_head else
                 f"queries {q * bwd.QUERY_TILE}-{(q + 1) * bwd.QUERY_TILE - 1}")
        target = q * bwd.QUERY_TILE == m0
        _box(ax, x0, y, width, row_h, None, face="#f7f7f7" if next_head else
             ("#fcbba1" if target else "white"), lw=1.2 if target else 0.5)
        ax.text(x0 + width + 0.1, y + row_h / 2, label, ha="left", va="center", fontsize=7)
    past = (sq - m0) / bwd.QUERY_TILE  # the target tile's rows past Sq, as a fraction
    if 0 < past < 1:
        y = top + (m0 // bwd.QUERY_TILE + past) * row_h
        _box(ax, x0, y, width, (1 - past) * row_h, None, face=GUARD_COLOR, hatch="//", lw=0)
        ax.text(x0 + width / 2, y + (1 - past) * row_h / 2, f"rows ≥ Sq = {sq}", ha="center",
                va="center", fontsize=7, bbox=dict(facecolor="white", edgecolor="none", pad=1))
    if d == 128:  # each warpgroup adds its half of D
        ax.plot([x0 + width / 2] * 2, [top, top + tiles * row_h], color="black", lw=0.6, ls=":")
        for c in (0, 1):
            ax.text(x0 + width * (0.25 + 0.5 * c), top - 0.1, f"D {64 * c}-{64 * c + 63}",
                    ha="center", va="bottom", fontsize=7,
                    fontweight="bold" if c == consumer else "normal")
    else:
        ax.text(x0 + width / 2, top - 0.1, "D 0-63", ha="center", va="bottom", fontsize=7)
    target_y = top + (m0 // bwd.QUERY_TILE + 0.5) * row_h
    span = max(tiles + 1, blocks) * row_h
    for b in range(blocks):
        y = top + (b + 0.5) * span / blocks - 0.35
        _box(ax, 0, y, 2.6, 0.7, f"key block {b}: keys {b * bwd.KEYS_PER_BLOCK}-"
             f"{(b + 1) * bwd.KEYS_PER_BLOCK - 1}", face="#f0f0f0", fontsize=7)
        ax.annotate("", xy=(x0, target_y), xytext=(2.6, y + 0.35),
                    arrowprops=dict(arrowstyle="->", color=THREAD_COLOR, lw=0.9))
    ax.text(1.3, top + span + 0.2, f"{blocks} blocks (other SMs, any order) add into the same "
            f"rows:\nred.global.add, in L2; a store would lose the others' sums", ha="left",
            va="top", fontsize=7)
    ax.set_title(f"one head's dQ (fp32 dq_sum), Sq = {sq}, Sk = {sk}", fontsize=9)
    ax.set_xlim(-0.1, x0 + width + 2.6)
    ax.set_ylim(top + span + 1.2, top - 0.6)
    ax.axis("off")


def _dq_tile(ax, d: int, sq: int, m0: int, dq_col0: int, thread: int) -> None:
    """A warpgroup's 64 x 64 part of the tile: its 4 warps' rows, the rows past Sq, and the 16
    pairs ``thread`` adds (outlined)."""
    n = 64
    for w in range(4):
        _box(ax, 0, 16 * w, n, 16, None, face=WARP_COLORS[w], lw=0.4)
        ax.text(-0.8, 16 * w + 8, f"warp {w}\nt {32 * w}-{32 * w + 31}", ha="right",
                va="center", fontsize=7)
    for k in range(8, n, 8):  # the 8-column groups j
        ax.plot([k, k], [0, n], color="#969696", lw=0.3)
    if sq - m0 < n:
        cut = max(sq - m0, 0)
        _box(ax, 0, cut, n, n - cut, None, face=GUARD_COLOR, hatch="//", lw=0, alpha=0.8)
        ax.text(n / 2, (cut + n) / 2, f"rows ≥ Sq = {sq}: left out\n(TMA's zero fill; "
                "they are the next head's)", ha="center", va="center", fontsize=7,
                bbox=dict(facecolor="white", edgecolor="none", pad=1))
    for row, col, i in fragment(d, m0, dq_col0, thread):
        if i % 2 == 0:  # one pair, one red_add2
            _box(ax, col - dq_col0, row - m0, 2, 1, None, face=THREAD_COLOR, lw=0.4)
    for j in range(8):
        ax.text(8 * j + 4, -0.6, f"j={j}", ha="center", va="bottom", fontsize=7)
    # (three lines, not two: in the course's bold title style two lines ran into the next panel)
    ax.set_title(f"a warpgroup's 64 x 64 dq_acc: rows m0 + 0..63 (m0 = {m0}),\ncolumns "
                 f"dq_col0 + 0..63 (dq_col0 = {dq_col0})\nred: thread {thread}'s 16 pairs, one "
                 "red_add2 each", fontsize=9)
    ax.set_xlim(-9, n + 0.5)
    ax.set_ylim(n + 0.5, -3.5)
    ax.set_aspect("equal")
    ax.axis("off")


def _dq_zoom(ax, d: int, m0: int, dq_col0: int, thread: int) -> None:
    """Warp ``thread // 32``'s 16 rows, columns j = 0 and 1: each element's lane (number) and
    its ``2h + e`` (colour); each outlined pair is one red_add2 of one lane."""
    from kernels.matmul.hopper.layout import accumulator_home

    warp = thread // 32
    for t in range(32 * warp, 32 * warp + 32):
        for i in range(8):  # j = 0 and 1
            row, col = accumulator_home(t, i, m0, dq_col0)
            r, c = row - m0 - 16 * warp, col - dq_col0
            _box(ax, c, r, 1, 1, str(t % 32), face=INDEX_COLORS[i % 4], lw=0.2, fontsize=7)
            if i % 2 == 0:  # the pair one red_add2 adds; the chosen thread's on top
                mine = t == thread
                ax.add_patch(mpatches.Rectangle((c, r), 2, 1, fill=False, lw=2.2 if mine else 0.9,
                                                edgecolor=THREAD_COLOR if mine else "black",
                                                zorder=3 if mine else 2))
    ax.plot([8, 8], [0, 16], color="black", lw=1.5)
    for j in (0, 1):
        ax.text(8 * j + 4, -0.3, f"j = {j}: columns dq_col0 + {8 * j}..{8 * j + 7}",
                ha="center", va="bottom", fontsize=7)
    ax.set_title(f"warp {warp} (threads {32 * warp}-{32 * warp + 31}): number = lane\n"
                 "row 16 (t / 32) + lane / 4 + 8h,\ncolumn 8j + 2 (lane % 4) + e", fontsize=9)
    ax.set_xlim(-0.2, 16.2)
    ax.set_ylim(16.2, -1.6)
    ax.set_aspect("equal")
    ax.axis("off")


def dq_add_fragment(d: int = 128, sq: int = 100, sk: int = 384, m0: int = 64, consumer: int = 0,
                    thread: int = 37):
    """Version 2's dQ epilogue (exercise hopper_backward.dq_add): left, every key block of one
    head adding into the same query tile of the fp32 ``dq_sum``; middle, warpgroup
    ``consumer``'s 64 x 64 ``dq_acc`` in that tile, the rows past ``sq`` left out and thread
    ``thread``'s 16 pairs outlined; right, which lane holds which element of its warp's rows
    (``dq_acc[4j + 2h + e]``), each pair of neighbouring columns one ``red_add2``."""
    from kernels.attention.hopper import bwd

    if d not in fwd.HEAD_DIMS:
        raise ValueError(f"d expected one of {fwd.HEAD_DIMS}, got {d}")
    if consumer not in (0, 1):
        raise ValueError(f"consumer expected 0 or 1, got {consumer}")
    if sq < 1 or sk < 1 or m0 % bwd.QUERY_TILE or not 0 <= m0 < sq:
        raise ValueError(f"m0 expected a multiple of {bwd.QUERY_TILE} below sq, and sq, sk >= 1, "
                         f"got m0={m0}, sq={sq}, sk={sk}")
    dq_col0 = consumer * 64 if d == 128 else 0  # attention_bwd_fused.cu's dq_col0
    fig, axes = plt.subplots(1, 3, figsize=(17, 6.4), layout="constrained",
                             gridspec_kw={"width_ratios": [1.1, 1.25, 1.0]})
    fig.suptitle(f"dQ through atomics, D = {d}: thread t's dq_acc[4j + 2h + e] (j = 0..7, h, e = "
                 f"0, 1) is added, times scale, at row m0 + 16 (t / 32) + lane / 4 + 8h, column "
                 f"dq_col0 + 8j + 2 (lane % 4) + e", fontweight="bold", fontsize=10)
    _dq_head(axes[0], d, sq, sk, m0, consumer)
    _dq_tile(axes[1], d, sq, m0, dq_col0, thread)
    _dq_zoom(axes[2], d, m0, dq_col0, thread)
    handles = [mpatches.Patch(facecolor=INDEX_COLORS[k], edgecolor="black",
                              label=f"h = {k // 2}, e = {k % 2}") for k in range(4)]
    fig.legend(handles=handles, loc="outside lower right", ncol=4, fontsize=8,
               title="colour of an element: 2h + e of dq_acc[4j + 2h + e]", title_fontsize=8)
    return fig
