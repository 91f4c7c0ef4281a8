"""A puzzle's "not yet" draws the student's kernel above the reference's footprint
(exercises.footprints, exercises.puzzles.draw): a wrong kernel gets the two rows with its wrong
cells marked, a right one no picture, and a kernel the interpreter cannot run its text verdict
with one line saying why there is no picture."""

import dataclasses
import sys
import types

import matplotlib.pyplot as plt
import numpy as np
import pytest

import exercises
from exercises import catalogue, footprints, puzzles
from exercises.puzzle_checks import footprint
from exercises.solutions.puzzles import SOLUTIONS, WRONG

_HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
# the off-by-one the other way: offsets <= N0, so the last program stores one past the end
ONE_PAST = SOLUTIONS["puzzles.add_blocks"].replace("offsets < N0", "offsets <= N0")
# runs nowhere: tl.foo does not exist (the check and the picture both fail on it)
BROKEN = _HEAD + '''def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    offsets = tl.arange(0, B0)
    tl.store(z_ptr + offsets, tl.foo(tl.load(x_ptr + offsets)))
'''


def _kernel(id: str, source: str):
    return exercises.load_cell(source, f"picture_{id}")[puzzles.PUZZLES[id].kernel]


def _panels(fig) -> dict[tuple[str, str], np.ndarray]:
    """``{(row label, panel title): the panel's image}`` of a two-row picture."""
    axes = np.array(fig.axes).reshape(2, -1)
    rows = [axes[r][0].get_ylabel() for r in range(2)]
    titles = [ax.get_title() for ax in axes[0]]
    return {(rows[r], titles[c]): np.asarray(axes[r][c].images[0].get_array())
            for r in range(2) for c in range(axes.shape[1])}


def _stored(image: np.ndarray) -> np.ndarray:
    """The cells of a panel drawn in a program's colour (not white, not the missing grey)."""
    flat = image.reshape(-1, 3)
    coloured = ~(np.all(flat == 1.0, axis=1) | np.all(flat == footprints.MISSING, axis=1))
    return coloured.reshape(image.shape[:2])


@pytest.fixture(autouse=True)
def _no_figures_left_open():
    """The tests count pyplot's open figures: start from none (another test file in this worker
    may have left some)."""
    plt.close("all")
    yield


@pytest.mark.parametrize(("id", "source", "missing"), [
    ("puzzles.add", WRONG["puzzles.add"]["half the lanes"], list(range(16, 32))),
    ("puzzles.add_blocks", WRONG["puzzles.add_blocks"]["mask one short"], [99]),
])
def test_a_wrong_kernel_gets_not_yet_and_its_stores_drawn_above_the_expected(id, source,
                                                                             missing):
    result = exercises.run_check(id, _kernel(id, source))
    assert result.status == "not yet", result
    assert "never written" in str(result)
    (fig,) = result.figures
    panels = _panels(fig)
    yours, expected = panels["yours", "output: stored"], panels["expected", "output: stored"]
    assert (_stored(yours) != _stored(expected)).any()
    assert list(np.nonzero(_stored(expected)[0] & ~_stored(yours)[0])[0]) == missing
    assert np.all(yours[0, missing] == footprints.MISSING)  # drawn grey: never stored
    assert f"{len(missing)} never touched" in fig.axes[1].get_xlabel()
    assert "outlined" in fig._suptitle.get_text()
    assert not plt.get_fignums()  # no pyplot figure: nothing for a backend to pop up


def test_a_store_one_past_the_end_is_counted_under_the_output():
    result = exercises.run_check("puzzles.add_blocks", _kernel("puzzles.add_blocks", ONE_PAST))
    assert result.status == "not yet" and "outside the tensor" in str(result), result
    (fig,) = result.figures
    assert "1 store lane outside it" in fig.axes[1].get_xlabel()
    panels = _panels(fig)
    # inside the tensor it stored what the reference stores: the lane past the end is the bug
    assert (_stored(panels["yours", "output: stored"])
            == _stored(panels["expected", "output: stored"])).all()


@pytest.mark.parametrize("id", ["puzzles.add", "puzzles.outer_blocks", "puzzles.softmax"])
def test_a_right_kernel_passes_with_no_picture(id):
    result = exercises.run_check(id, _kernel(id, SOLUTIONS[id]))
    assert result.passed, result
    assert result.figures == []


def test_the_same_footprint_as_the_reference_says_the_values_are_wrong():
    result = exercises.run_check("puzzles.add", _kernel("puzzles.add",
                                                        WRONG["puzzles.add"]["times ten"]))
    assert result.status == "not yet" and "elements differ" in str(result)
    (fig,) = result.figures
    assert "same elements as the reference" in fig._suptitle.get_text()


@pytest.mark.parametrize(("source", "said"), [
    (BROKEN, "your code raised"),  # a @triton.jit kernel the interpreter cannot run
    (WRONG["puzzles.add"]["plain PyTorch"], "not a @triton.jit kernel"),
])
def test_a_kernel_the_interpreter_cannot_run_keeps_its_verdict_and_says_why_no_picture(source,
                                                                                       said):
    result = exercises.run_check("puzzles.add", _kernel("puzzles.add", source))
    assert result.status == "not yet"
    assert said in str(result)
    assert result.figures == []
    why = [ln for ln in result.lines if ln.startswith("(no picture of what your code did")]
    assert len(why) == 1 and len(why[0]) < 300, result.lines


def test_a_picture_that_fails_is_one_line_and_the_verdict_stands(monkeypatch):
    ex = exercises.get("puzzles.add")

    def broken(kernel):
        raise RuntimeError("boom\nand a long log after it")

    monkeypatch.setitem(catalogue._REGISTRY, ex.id, dataclasses.replace(ex, picture=broken))
    result = exercises.run_check(ex.id, _kernel(ex.id, WRONG["puzzles.add"]["a copy"]))
    assert result.status == "not yet" and "elements differ" in str(result)
    assert result.lines[-1] == "(no picture of what your code did: RuntimeError: boom)"


def test_check_prints_the_verdict_then_displays_the_picture_in_a_notebook(monkeypatch, capsys):
    shown = []
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: object()  # "in a notebook"
    display = types.ModuleType("IPython.display")
    display.Image = lambda data: ("png", data)
    display.display = lambda item: shown.append((capsys.readouterr().out, item))
    monkeypatch.setitem(sys.modules, "IPython", fake)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    exercises.check("puzzles.add", _kernel("puzzles.add", WRONG["puzzles.add"]["half the lanes"]))
    ((printed, (kind, png)),) = shown
    assert "not yet" in printed  # the verdict first, the picture under it
    assert kind == "png" and png.startswith(b"\x89PNG")
    fake.get_ipython = lambda: None  # a plain script: nothing displayed, no window
    exercises.check("puzzles.add", _kernel("puzzles.add", WRONG["puzzles.add"]["half the lanes"]))
    assert len(shown) == 1 and not plt.get_fignums()


def test_a_wild_store_is_switched_off_and_counted_not_performed():
    far = _kernel("puzzles.add", SOLUTIONS["puzzles.add"].replace(
        "tl.store(z_ptr + offsets", "tl.store(z_ptr + offsets + 1000000"))
    p = puzzles.PUZZLES["puzzles.add"]
    touched = footprint(p, far, p.cases[0])
    assert touched["output"]["stores"] == {} and touched["output"]["outside"]["stores"] == 32
    assert touched["x"]["outside"] == {"loads": 0, "stores": 0}


def test_the_lesson_s_reference_picture_is_still_one_row_in_pyplot():
    fig = puzzles.draw("puzzles.outer")
    try:
        assert len(fig.axes) == 3 and not any(ax.get_ylabel() for ax in fig.axes)
        assert fig.number in plt.get_fignums()  # the notebook cell shows it
    finally:
        plt.close(fig)
