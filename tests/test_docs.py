"""The documentation's generated parts match the syllabus and the records, the paths by length
fit their sessions, and no student-facing text carries the course's development history."""

import json
import re
from pathlib import Path

import pytest

from course import docs, plans
from course_utils import syllabus

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(r"\b[Ii]ssue \d+\b|\b[Ii]ssues \d+ (?:and|or) \d+")
HASH = re.compile(r"(?<![0-9A-Za-z_./#-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def student_texts() -> list[tuple[str, str]]:
    """(where, text) of every text a student or an instructor reads as the course."""
    found = [("README.md", (ROOT / "README.md").read_text()),
             ("docs/teaching.md", (ROOT / "docs/teaching.md").read_text())]
    for lesson in syllabus.LESSONS:
        cells = json.loads((ROOT / "notebooks" / lesson.notebook).read_text())["cells"]
        found += [(f"{lesson.notebook} cell {i}", "".join(c["source"]))
                  for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    return found


def test_the_generated_docs_are_up_to_date():
    stale = [str(path.relative_to(ROOT)) for path, text in docs.wanted().items()
             if not path.exists() or path.read_text() != text]
    assert not stale, f"{stale}: out of date with the syllabus or the records; run " \
                      "python -m course docs"


def test_the_readme_is_a_readme():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 180, f"README.md has {lines} lines: what is not for a new user goes to docs/"


@pytest.mark.parametrize(("where", "text"), student_texts(), ids=lambda x: x[:60])
def test_no_development_history_in_what_students_read(where, text):
    assert not HISTORY.search(text), f"{where}: {HISTORY.search(text)[0]!r} (say the fact)"
    found = [h for h in HASH.findall(text) if not re.fullmatch(r"[a-f]+|\d+", h)]
    assert not found, f"{where}: commit hashes {found} (say the fact, not the revision)"


def test_the_history_check_catches_history():
    assert HISTORY.search("before issue 24 split that lesson")
    assert HASH.search("measured at 25f6337") and not HASH.search("0x1f2e3d4c, sm_90a, 1e-3")


@pytest.mark.parametrize("name", plans.PATHS)
def test_each_path_fits_its_sessions(name):
    path = plans.PATHS[name]
    for i, session in enumerate(path.sessions, start=1):
        minutes = plans.session_minutes(session)
        assert minutes <= path.session_minutes, f"{name} session {i}: {minutes} min"
    total = sum(plans.session_minutes(s) for s in path.sessions)
    assert total <= path.total_minutes, f"{name}: {total} min, at most {path.total_minutes}"


def test_a_path_takes_its_lessons_after_their_prerequisites():
    for name, path in plans.PATHS.items():
        seen: set[str] = set()
        for session in path.sessions:
            for slug, _ in session:
                lesson = syllabus.BY_SLUG[slug]
                missing = [p for p in lesson.prerequisites if p not in seen and
                           any(p == s for sess in path.sessions for s, _ in sess)]
                assert not missing, f"{name}: {slug} before {missing}"
                seen.add(slug)


def test_the_term_teaches_every_lesson():
    taught = {slug for session in plans.PATHS["term"].sessions for slug, _ in session}
    assert taught == set(syllabus.BY_SLUG)


def test_a_missing_section_is_named():
    with pytest.raises(ValueError, match="has no section starting with 'nope'"):
        plans.part_sections(("fusion", ("nope",)))


def test_the_guide_counts_the_lessons_the_syllabus_has():
    # the guide's opening counts the lessons, the core path, the tracks and the labs in words
    # and numbers: a lesson added or moved in the syllabus must not leave it counting the old
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
             "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
             "seventeen", "eighteen", "nineteen", "twenty", "twenty-one", "twenty-two"]
    opening = (ROOT / "docs/teaching.md").read_text().split("\n\n")[1]
    core = [le for le in syllabus.LESSONS if le.track == "core"]
    labs = ", ".join(f"{le.number:02d}" for le in syllabus.LESSONS if le.kind == "lab")
    assert f"The course is {words[len(syllabus.LESSONS)]} lessons" in opening
    assert f"The first {words[len(core)]} are the **core path**" in opening
    assert f"the last {words[len(syllabus.LESSONS) - len(core)]} are **optional" in opening
    assert f"Labs ({labs}) are" in opening
