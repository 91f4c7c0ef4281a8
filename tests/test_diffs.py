"""course_utils.diffs: what changed between two kernels, as text and as HTML."""

import pytest

from course_utils import diffs
from kernels.matmul import steps
from kernels.matmul.hopper import wgmma

BEFORE = "int a = 1;\nint b = 2;\nint c = 3;\nreturn a + b + c;\n"
AFTER = ("int a = 1;\n// new in step2: b doubled\nint b = 4;\nint c = 3;\n"
         "return a + b + c;\n")


def test_a_diff_counts_and_shows_every_change():
    d = diffs.diff(BEFORE, AFTER, names=("step1", "step2"))
    assert (d.added, d.removed, len(d.hunks)) == (2, 1, 1)
    assert d.summary() == "step1 -> step2: +2 -1 lines in 1 hunk"
    text = str(d)
    assert "--- step1\n+++ step2\n" in text and "-int b = 2;\n+// new in step2" in text
    assert " int a = 1;" in text  # context kept around the change


def test_the_note_comes_from_an_added_new_in_comment_only():
    d = diffs.diff(BEFORE, AFTER)
    assert d.hunks[0].note == "b doubled"
    assert "@@ -1,4 +1,5 @@  # b doubled" in str(d)
    # the same comment as unchanged context (a later step keeps the line) is not a note
    later = diffs.diff(AFTER, AFTER.replace("int c = 3;", "int c = 5;"))
    assert later.hunks[0].note is None


def test_html_colours_lines_and_escapes_code():
    d = diffs.diff("x < y\n", "x <= y\n")
    page = d._repr_html_()
    assert "x &lt;= y" in page and "x <= y" not in page
    assert "#e6ffec" in page and "#ffebe9" in page  # + green, - red


def test_no_change_and_context():
    assert str(diffs.diff(BEFORE, BEFORE)).startswith("before -> after: no change")
    wide = diffs.diff("\n".join(map(str, range(20))), "\n".join(map(str, range(19))) + "\nx",
                      context=0)
    assert list(wide.hunks[0].lines) == [("-", "19"), ("+", "x")]


def test_excerpt_and_region(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("head\n// region: loop\nfor (;;) {}\n// endregion\n// Step 2: more\ntail\n")
    assert diffs.region(src, "loop") == "for (;;) {}\n"
    assert diffs.excerpt(src, "// Step 2:") == "// Step 2: more\ntail\n"
    assert diffs.excerpt(src, "head", "// Step 2").startswith("head\n// region: loop")
    with pytest.raises(ValueError, match=r"name expected a region of k.cu \(loop\), got 'x'"):
        diffs.region(src, "x")
    with pytest.raises(ValueError, match="start expected a text found in k.cu"):
        diffs.excerpt(src, "nowhere")
    with pytest.raises(ValueError, match="end expected a text found after"):
        diffs.excerpt(src, "head", "nowhere")
    with pytest.raises(ValueError, match="path expected a readable file"):
        diffs.region(tmp_path / "missing.cu", "loop")


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="after expected the text of a source, got int"):
        diffs.diff("a", 3)
    with pytest.raises(ValueError, match="context expected an int >= 0"):
        diffs.diff("a", "b", context=-1)


def test_every_lesson_05_step_shows_what_it_changed():
    names = list(steps.STEPS)
    for before, after in zip(names, names[1:], strict=False):
        d = steps.what_changed(after)
        assert d.hunks, f"{after} changes nothing from {before}"
        if steps.STEPS[before].file == steps.STEPS[after].file:  # a new configuration
            assert d.removed == d.added <= 4, f"{after}: header diff {d.summary()}"
    # each new mma.sync file says what it brings, hunk by hunk
    for variant in ("10_mma_cp_async", "11_mma_swizzle", "12_mma_warp_tile"):
        assert any(h.note for h in steps.what_changed(variant).hunks), variant
    with pytest.raises(ValueError, match="variant expected a step after the first"):
        steps.what_changed("1_naive")


def test_lesson_07_steps_are_excerpts_of_wgmma_cu():
    step1 = diffs.excerpt(wgmma.SOURCE, "// Step 1: TMA + wgmma", "// Step 2:")
    step2 = diffs.excerpt(wgmma.SOURCE, "// Step 2:", "// Steps 3 and 4")
    d = diffs.diff(step1, step2, names=("step 1", "step 2"))
    assert d.added > 0 and d.removed > 0
    # the ring's "empty" barriers are what step 2 adds
    assert any("empty[" in text for h in d.hunks for tag, text in h.lines if tag == "+")


def test_show_displays_an_excerpt_without_the_next_functions_decorator(tmp_path, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    path = tmp_path / "k.py"
    path.write_text("import triton\n\n@triton.jit\ndef a():\n    pass\n\n\n@triton.jit\ndef b():\n"
                    "    pass\n")
    diffs.show(path, "def a", "def b")
    assert shown[-1].data == "def a():\n    pass"
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    diffs.show(cu)
    assert shown[-1].data == "__global__ void k() {}" and shown[-1].language == "cuda"
    with pytest.raises(ValueError, match="start expected a text found in k.cu"):
        diffs.show(cu, "no such marker")
