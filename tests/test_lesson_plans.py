"""Every lesson is lecture-ready: it opens with what the student can do after it, what it
assumes and a time plan of 50-75 minutes, and closes with takeaways and what comes next; no
notebook grows past 45 code cells (a lecture's worth: split it instead)."""

import json
import re
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("[0-9][0-9]_*.ipynb"))  # the lessons (not the appendices, A1_...)
EVERY = sorted(FOLDER.glob("*.ipynb"))  # lessons and appendices: none may grow past a lecture
OBJECTIVES = ("After this lesson you can", "You will be able to")


def _markdown(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def planned_minutes(text: str) -> int:
    """Minutes in class of the time plan that starts at "Time plan": the last column of its
    table rows (rows marked "at home" are reading for home, not part of the lecture), or every
    "N min" of its paragraph."""
    plan = text[text.index("Time plan"):]
    rows = re.findall(r"^\|([^\n]*)\|\s*(\d+)\s*\|\s*$", plan, flags=re.M)
    if rows:
        return sum(int(m) for label, m in rows if not re.search(r"\bat home\b", label, re.I))
    paragraph = plan.split("\n\n", 1)[0]
    return sum(int(n) for n in re.findall(r"(\d+) min\b", paragraph))


def test_minutes_are_read_from_a_table_or_a_paragraph():
    table = "**Time plan**:\n\n| section | minutes |\n|---|---|\n| 1 · a | 10 |\n| 2 · b | 45 |\n"
    assert planned_minutes(table) == 55
    assert planned_minutes(table + "| 3 · c (at home) | 20 |\n") == 55
    assert planned_minutes("**Time plan** (≈ 20): 1 · x, 12 min · 2 · y, 8 min.\n\nlater 9 min") \
        == 20


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_lesson_opens_with_its_plan_and_closes_with_what_comes_next(path):
    markdown = _markdown(path)
    opening = "\n\n".join(markdown[:3])
    assert any(o in opening for o in OBJECTIVES), f"{path.name}: no objectives at the top"
    assert "Prerequisites" in opening, f"{path.name}: no prerequisites at the top"
    assert "Time plan" in opening, f"{path.name}: no time plan at the top"
    minutes = planned_minutes(opening)
    assert 50 <= minutes <= 75, f"{path.name}: the time plan adds up to {minutes} minutes"
    closing = [m for m in markdown if m.lstrip().startswith("## Takeaways")]
    assert closing, f"{path.name}: no '## Takeaways' section"
    assert "What comes next" in closing[-1] or "what comes next" in closing[-1].lower(), \
        f"{path.name}: the takeaways do not say what comes next"


@pytest.mark.parametrize("path", EVERY, ids=[p.stem for p in EVERY])
def test_a_notebook_is_a_lecture_not_two(path):
    cells = json.loads(path.read_text())["cells"]
    code = sum(c["cell_type"] == "code" for c in cells)
    assert code <= 45, f"{path.name} has {code} code cells (at most 45: split the lesson)"


def test_an_appendix_says_what_it_is_for_and_a_lesson_points_to_it():
    lessons = "\n".join("\n".join(_markdown(p)) for p in NOTEBOOKS)
    for path in sorted(FOLDER.glob("A[0-9]_*.ipynb")):
        opening = _markdown(path)[0]
        assert opening.startswith(f"# {path.stem[:2]} ·") and "appendix" in opening.lower(), \
            f"{path.name}: the first cell should say it is an appendix and what it is for"
        assert path.name in lessons, f"no lesson points to {path.name}"
