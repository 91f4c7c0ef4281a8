"""Figures of lessons 18 and 19, drawn from the kernels' own sources and layouts.

    figures.pingpong_barriers(tiles=3)   # step 4: two consumers take turns through named barriers
    figures.dq_add_fragment()            # version 2's dQ epilogue: what each thread adds, where

The ping-pong draws the schedule of :mod:`kernels.attention.hopper.pingpong`, which reads the
barriers (ids, thread counts, wait or arrive) from the reference ``turn_wait`` and ``turn_pass``
in ``attention.cuh`` and runs them through the order in which ``attention.cu`` calls them; only
the durations are made up. The dQ
figure places every ``dq_acc`` element with the exercise's own fragment layout
(:func:`kernels.matmul.hopper.layout.accumulator_home`, the one exercise hopper_backward.dq_add's
check holds the kernel to).
Each function returns a matplotlib figure; lesson 16's figures (``kernels/matmul/hopper``) are
the pattern.
"""

from __future__ import annotations

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt

from kernels.attention.hopper import fwd
from kernels.attention.hopper.pingpong import pingpong_schedule, turn_calls
from kernels.attention.hopper.timeline import COLORS as TIMELINE_COLORS

CONSUMER_COLORS = ("#6baed6", "#74c476")  # consumer 0, consumer 1 (and their tensor-core work)
BARRIER_COLORS = ("#08519c", "#006d2c")  # arrows into consumer 0's barrier, into consumer 1's
ISSUE_COLOR, WAIT_MMA_COLOR = "#525252", "#e0e0e0"


def _box(ax, x, y, w, h, text=None, face="white", edge="black", lw=0.5, fontsize=8, **kw):
    ax.add_patch(mpatches.Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, **kw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                in_layout=False)


# -- (a) the ping-pong's named barriers ----------------------------------------------------------


def pingpong_barriers(tiles: int = 3):
    """Step 4's two consumer warpgroups over ``tiles`` key tiles: when each issues its turn's
    matmuls, which barrier it waits on (``sync b``, above or below its row) and arrives at
    (``arrive b``), and which arrival completes which wait (arrows, coloured by barrier); the
    tensor cores' row shows whose matmuls run. Barriers and their order are the kernel's
    (:mod:`~kernels.attention.hopper.pingpong`), the durations schematic."""
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
