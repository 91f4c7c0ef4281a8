"""Every notebook is the syllabus's (course_utils/syllabus.py): its file name carries the
number of its place in the teaching order, its title and time plan say what the syllabus says,
its prerequisites and its "what comes next" name the lessons the syllabus names, and no lecture
grows past what a lecture holds (split it instead)."""

import json
import re
from pathlib import Path

import pytest

from course import plans
from course_utils import syllabus

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = syllabus.LESSONS
TAUGHT = [lesson for lesson in LESSONS if lesson.kind != "reference"]  # a reference is looked up
OBJECTIVES = ("After this lesson you can", "You will be able to")
MAX_WORDS = 3_500  # of markdown in a lecture notebook: about 55 minutes at the prose budget
MAX_CODE_CELLS = 45
LESSON_NUMBERS = re.compile(r"\b[Ll]essons?\s+(\d\d(?:(?:\s*(?:–|-|,|and|or)\s*)\d\d)*)")


def _markdown(lesson) -> list[str]:
    cells = json.loads((FOLDER / lesson.notebook).read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def planned_minutes(text: str) -> int:
    """Minutes in class of the time plan that starts at "Time plan" (course/plans.py reads it:
    rows marked "at home" are reading for home, not part of the lecture)."""
    plan = text[text.index("Time plan"):]
    return sum(s.minutes for s in plans.parse(plan) if not s.at_home)


def numbers_named(text: str) -> set[int]:
    """The lesson numbers "lesson 05", "lessons 07 and 08", "lessons 05–07" name."""
    found = set()
    for group in LESSON_NUMBERS.findall(text):
        if m := re.fullmatch(r"(\d\d)\s*[–-]\s*(\d\d)", group):
            found |= set(range(int(m[1]), int(m[2]) + 1))
        else:
            found |= {int(n) for n in re.findall(r"\d\d", group)}
    return found


def test_minutes_are_read_from_a_table_or_a_paragraph():
    table = "**Time plan**:\n\n| section | minutes |\n|---|---|\n| 1 · a | 10 |\n| 2 · b | 45 |\n"
    assert planned_minutes(table) == 55
    assert planned_minutes(table + "| 3 · c (at home) | 20 |\n") == 55
    assert planned_minutes("**Time plan** (≈ 20): 1 · x, 12 min · 2 · y, 8 min.\n\nlater 9 min") \
        == 20
    assert numbers_named("Lessons 05 (CUDA) and lesson 06; lessons 07–09") == {5, 6, 7, 8, 9}


def test_the_notebooks_are_the_syllabus():
    on_disk = sorted(p.name for p in FOLDER.glob("*.ipynb"))
    assert on_disk == sorted(lesson.notebook for lesson in LESSONS), (
        "notebooks/ and course_utils/syllabus.py disagree: rename the notebook (git mv) or "
        "change the syllabus")


def test_the_syllabus_is_consistent():
    slugs = [lesson.slug for lesson in LESSONS]
    assert len(set(slugs)) == len(slugs)
    for lesson in LESSONS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", lesson.slug), lesson.slug
        assert lesson.track in syllabus.TRACKS, lesson
        for before in lesson.prerequisites:
            assert syllabus.NUMBERS[before] < lesson.number, (
                f"{lesson.slug} comes before its prerequisite {before}: the order is wrong")
    core = [lesson.number for lesson in syllabus.core_path()]
    assert core == list(range(1, len(core) + 1)), "the core path comes first, in one run"


def test_former_keys_still_read():
    assert syllabus.topic_key("08.online_step") == "attention.online_step"
    assert syllabus.topic_key("05_mma_matmul") == "mma_variants"  # a record key, not a stem
    assert syllabus.lesson("12_attention_on_hopper").slug == "hopper_attention"
    assert syllabus.lesson("hopper_matmul.sizes").slug == "hopper_measured"  # its section moved
    assert syllabus.lesson("hopper_matmul").slug == "hopper_matmul"
    assert syllabus.topic_key("hopper_matmul.stages") == "hopper_measured.stages"  # it moved
    assert syllabus.topic_key("07.promote") == "hopper_measured.promote"
    # lesson 09's variants became a lesson of their own: their exercises and records followed
    assert syllabus.topic_key("attention.window_range") == "attention_variants.window_range"
    assert syllabus.lesson("attention.variants").slug == "attention_variants"
    with pytest.raises(KeyError, match="no lesson"):
        syllabus.lesson("99_nothing")


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.stem for lesson in LESSONS])
def test_the_title_is_the_syllabus_title(lesson):
    first = _markdown(lesson)[0].splitlines()[0]
    assert first.startswith(f"# {lesson.label} · "), (
        f"{lesson.notebook}: the first line should be '# {lesson.label} · {lesson.title}'")
    plain = re.sub(r"[`*]", "", first.split(" · ", 1)[1]).strip()
    assert plain == re.sub(r"[`*]", "", lesson.title), (
        f"{lesson.notebook}: title {plain!r}, the syllabus says {lesson.title!r}")


@pytest.mark.parametrize("lesson", TAUGHT, ids=[lesson.stem for lesson in TAUGHT])
def test_the_lesson_opens_with_the_syllabus_plan(lesson):
    markdown = _markdown(lesson)
    opening = "\n\n".join(markdown[:3])
    assert any(o in opening for o in OBJECTIVES), f"{lesson.notebook}: no objectives at the top"
    assert "Time plan" in opening, f"{lesson.notebook}: no time plan at the top"
    minutes = planned_minutes(opening)
    assert minutes == lesson.minutes, (
        f"{lesson.notebook}: the time plan adds up to {minutes} minutes, the syllabus says "
        f"{lesson.minutes}")
    assert 50 <= minutes <= 90, f"{lesson.notebook}: {minutes} minutes is not one session"


@pytest.mark.parametrize("lesson", TAUGHT, ids=[lesson.stem for lesson in TAUGHT])
def test_the_prerequisites_are_the_syllabus_prerequisites(lesson):
    opening = "\n\n".join(_markdown(lesson)[:3])
    if not lesson.prerequisites:
        return
    m = re.search(r"\*\*Prerequisites\W*(.*?)(?:\n\n|$)", opening, flags=re.S)
    assert m, f"{lesson.notebook}: no **Prerequisites** paragraph at the top"
    named = numbers_named(m[1])
    wanted = {syllabus.NUMBERS[p] for p in lesson.prerequisites}
    assert named == wanted, (
        f"{lesson.notebook}: the prerequisites name lessons {sorted(named)}, the syllabus "
        f"says {sorted(wanted)} ({', '.join(lesson.prerequisites)})")


@pytest.mark.parametrize("lesson", TAUGHT, ids=[lesson.stem for lesson in TAUGHT])
def test_what_comes_next_is_the_syllabus_next_lesson(lesson):
    markdown = _markdown(lesson)
    closing = [i for i, m in enumerate(markdown) if m.lstrip().startswith("## Takeaways")]
    assert closing, f"{lesson.notebook}: no '## Takeaways' section"
    # the section: its heading's cell and the markdown after it (a scoreboard cell may open it)
    section = [markdown[closing[-1]]]
    for m in markdown[closing[-1] + 1:]:
        if m.lstrip().startswith("## "):
            break
        section.append(m)
    text = "\n\n".join(section)
    at = text.lower().find("what comes next")
    assert at >= 0, f"{lesson.notebook}: the takeaways do not say what comes next"
    after = syllabus.next_lesson(lesson.slug)
    if after is None:
        return  # the end of a track: the closing may point anywhere
    first = re.search(r"\b[Ll]esson\s+(\d\d)", text[at:])
    assert first and int(first[1]) == after.number, (
        f"{lesson.notebook}: what comes next should first name lesson {after.label} "
        f"({after.title}), the next of its track")


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.stem for lesson in LESSONS])
def test_a_notebook_is_a_lecture_not_two(lesson):
    cells = json.loads((FOLDER / lesson.notebook).read_text())["cells"]
    code = sum(c["cell_type"] == "code" for c in cells)
    assert code <= MAX_CODE_CELLS, (
        f"{lesson.notebook} has {code} code cells (at most {MAX_CODE_CELLS}: split the lesson)")


# Lectures known to be over the budget, with what is to be done: each must still be over (so
# the list shrinks as they are cut or split), every other lecture must be under.
OVER_BUDGET: dict[str, str] = {}


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.stem for lesson in LESSONS])
def test_a_lecture_reads_in_a_lecture(lesson):
    words = sum(len(m.split()) for m in _markdown(lesson))
    if lesson.slug in OVER_BUDGET:
        assert words > MAX_WORDS, (f"{lesson.notebook} is within the budget now ({words} "
                                   "words): take it off OVER_BUDGET")
        return
    assert words <= MAX_WORDS, (f"{lesson.notebook}: {words} words of markdown, over "
                                f"{MAX_WORDS}: cut it or split the lesson")
