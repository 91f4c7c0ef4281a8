"""Lessons 18 and 19's figures (kernels/attention/hopper/figures.py): they draw without
overlapping labels, the ping-pong's barriers (kernels/attention/hopper/pingpong.py) are the
kernel's (read from attention.cuh, called in attention.cu's order) and behave as the exercise's
check says each protocol does, and the dQ figure places what the exercise's fragment layout
says."""

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from test_matmul_figures import _overlapping_labels  # noqa: E402

from exercises.hopper_attention import protocol_error  # noqa: E402
from exercises.hopper_backward_dq_add_probe import home  # noqa: E402
from exercises.solutions.hopper_attention import SOLUTIONS, WRONG  # noqa: E402
from kernels.attention.hopper import figures, fwd, pingpong  # noqa: E402

CUH = fwd.PRIMITIVES.read_text()


def _spliced(answer: str) -> str:
    """attention.cuh with an answer's TURNS between the turns markers (as the check splices)."""
    code = re.search(r'TURNS = r"""(.*?)"""', answer, re.S)[1]
    begin, end = CUH.index(pingpong.BEGIN), CUH.index(pingpong.END)
    return CUH[:CUH.index("\n", begin) + 1] + code + CUH[end:]


def _ops(calls):
    return {key: [(c.mode, c.id, c.count)] for key, c in calls.items()}


def _turns_exclusive(schedule) -> bool:
    """Each turn is issued after the one before it, the other consumer's, has been issued:
    consumer 0's turn k, then consumer 1's turn k, then consumer 0's turn k + 1."""
    issues = {(lane, int(label.split()[1])): (start, end)
              for lane, kind, start, end, label in schedule.spans if kind == "issue"}
    order = sorted(issues, key=lambda k: (k[1], k[0]))
    return all(issues[a][1] <= issues[b][0] for a, b in zip(order, order[1:], strict=False))


# -- the ping-pong ---------------------------------------------------------------------------------


def test_the_barriers_are_read_from_the_kernel_and_pass_the_exercise_check():
    calls = pingpong.turn_calls()
    first = int(re.search(r"PINGPONG_FIRST_ID = (\d+);", CUH)[1])
    for c in (0, 1):
        assert calls["turn_wait", c] == pingpong.Call("SYNC", first + c, 2 * fwd.WARPGROUP)
        assert calls["turn_pass", c] == pingpong.Call("ARV", first + 1 - c, 2 * fwd.WARPGROUP)
    assert protocol_error(_ops(calls)) is None
    # the shipped answer of the exercise is the same protocol
    assert pingpong.turn_calls(_spliced(SOLUTIONS["hopper_attention.pingpong"])) == calls


def test_the_call_order_is_attention_cu_s():
    source = fwd.SOURCE.read_text()
    # the two lines consumer_calls models: consumer 1's first pass, and its skipped last one
    assert "if (consumer == 1) turn_pass(consumer);  // consumer 0 takes the first turn" in source
    assert "if (!(last && consumer == 1)) turn_pass(consumer);" in source
    # three turn sites: the first tile's S, the loop's S and PV, the last PV (end_turn(true))
    assert source.count("take_turn();") == 3
    assert source.count("end_turn(false);") == 2 and source.count("end_turn(true);") == 1
    for tiles in (1, 2, 5):
        waits = {c: sum(w == "wait" for w, _ in pingpong.consumer_calls(c, tiles)) for c in (0, 1)}
        passes = {c: sum(w == "pass" for w, _ in pingpong.consumer_calls(c, tiles)) for c in (0, 1)}
        assert waits == {0: tiles + 1, 1: tiles + 1}  # a turn per tile, and one for the last PV
        assert passes[0] == waits[1] and passes[1] == waits[0]  # every wait gets one arrival


@pytest.mark.parametrize("tiles", [1, 2, 3, 6])
def test_the_turns_alternate_and_the_tensor_cores_run_one_matmul_at_a_time(tiles):
    schedule = pingpong.pingpong_schedule(tiles)
    assert schedule.issue_order() == [(c, k) for k in range(tiles + 1) for c in (0, 1)]
    assert _turns_exclusive(schedule)
    matmuls = sorted((s, e) for lane, _, s, e, _ in schedule.spans if lane == "tc")
    assert len(matmuls) == 2 * 2 * tiles  # S and PV of every tile, for both consumers
    assert all(a[1] <= b[0] for a, b in zip(matmuls, matmuls[1:], strict=False))
    ends = {(kind[-1], label): e for lane, kind, _, e, label in schedule.spans if lane == "tc"}
    for lane, kind, start, _, label in schedule.spans:
        if kind == "softmax":  # after its tile's S, never before
            assert start >= ends[str(lane), f"S{label.split()[1]}"]
    # every pass is a bar.arrive that goes on at once; 2 (tiles + 1) of them in all
    passes = [c for c in schedule.calls if c[1].mode == "ARV"]
    assert len(passes) == 2 * (tiles + 1) and all(end == start for _, _, start, end in passes)


@pytest.mark.parametrize(("wrong", "expected"), [
    ("waits on the other's barrier", "hang"), ("turn_pass on its own barrier", "hang"),
    ("bar.sync in turn_pass", "the passer waits"), ("128 threads", "turns overlap")])
def test_a_wrong_protocol_fails_in_the_model_as_the_check_says(wrong, expected):
    calls = pingpong.turn_calls(_spliced(WRONG["hopper_attention.pingpong"][wrong]))
    message, _ = protocol_error(_ops(calls))
    if expected == "hang":
        assert "hang" in message
        with pytest.raises(pingpong.Hang, match="wait forever"):
            pingpong.pingpong_schedule(3, calls)
        return
    schedule = pingpong.pingpong_schedule(3, calls)
    if expected == "the passer waits":
        assert "bar.sync" in message
        passes = [c for c in schedule.calls if c[1] == calls["turn_pass", c[0]]]
        assert any(end > start for _, _, start, end in passes)
    else:
        assert "one warpgroup" in message
        assert not _turns_exclusive(schedule)


def test_a_source_the_reader_cannot_read_is_named():
    broken = CUH.replace('"bar.sync %0, 256;"', '"bar.sync 1, 256;"')
    with pytest.raises(ValueError, match="turn_wait expected one bar.sync"):
        pingpong.turn_calls(broken)
    with pytest.raises(ValueError, match="PINGPONG_FIRST_ID"):
        pingpong.turn_calls(CUH.replace("constexpr int PINGPONG_FIRST_ID", "int FIRST"))
    with pytest.raises(ValueError, match="tiles >= 1"):
        pingpong.consumer_calls(0, 0)


@pytest.mark.parametrize("tiles", [1, 3, 6])
def test_pingpong_figure_draws_without_overlapping_labels(tiles):
    fig = figures.pingpong_barriers(tiles)
    try:
        labels = [t.get_text() for t in fig.findobj(Text)]
        assert sum(t.startswith("sync") for t in labels) == 2 * (tiles + 1)
        assert sum(t.startswith("arrive") for t in labels) == 2 * (tiles + 1)
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


# -- the dQ epilogue ------------------------------------------------------------------------------


@pytest.mark.parametrize(("d", "consumer"), [(128, 0), (128, 1), (64, 1)])
def test_the_fragment_covers_the_warpgroup_s_tile_once_in_pairs(d, consumer):
    dq_col0 = consumer * 64 if d == 128 else 0
    held = [(r, c) for t in range(128) for r, c, _ in figures.fragment(d, 64, dq_col0, t)]
    assert sorted(held) == [(64 + r, dq_col0 + c) for r in range(64) for c in range(64)]
    for t in (0, 37, 127):
        mine = figures.fragment(d, 64, dq_col0, t)
        assert [(r, c) for r, c, _ in mine] == [home(d, 64, dq_col0, t, i) for i in range(32)]
        for (r0, c0, _), (r1, c1, _) in zip(mine[::2], mine[1::2], strict=True):
            assert r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0, "one red_add2: an aligned pair"
    with pytest.raises(ValueError, match="thread expected"):
        figures.fragment(128, 0, 0, 128)


@pytest.mark.parametrize("args", [{}, {"consumer": 1, "thread": 127}, {"d": 64, "thread": 0},
                                  {"sq": 64, "m0": 0, "sk": 128},
                                  {"sq": 300, "m0": 256, "sk": 1000}])
def test_dq_figure_draws_without_overlapping_labels(args):
    from course_utils import plots

    plots.apply_style()  # as in the notebook (bold titles are wider)
    fig = figures.dq_add_fragment(**args)
    try:
        assert len(fig.findobj(Text)) > 256  # a lane number in every cell of the zoom
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_dq_figure_rejects_what_the_kernel_does_not_run():
    with pytest.raises(ValueError, match="d expected"):
        figures.dq_add_fragment(d=96)
    with pytest.raises(ValueError, match="m0 expected"):
        figures.dq_add_fragment(m0=32)
