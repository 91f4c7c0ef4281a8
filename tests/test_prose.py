"""Prose that stays true as the course changes (issue 31):

* every "lesson NN", "notebook NN", "section N" and "step N" in the notebooks' markdown, in
  docs/teaching.md and in README.md names a notebook, a numbered section and a step that exist
  (a section of the lesson the sentence is about; a step of the tensor-core matmul's, the Hopper
  matmul's or the Hopper attention's staircase);
* docs/teaching.md has a "### NN" section for every notebook that names each of its current
  "## N · Title" sections;
* a time plan fits what it plans: prose words, code cells and the kernel lines a staircase shows,
  per planned minute, under the budgets below, and the plan includes the lesson's exercises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from course_utils import syllabus

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
EVERY = sorted(FOLDER.glob("*.ipynb"))
KEYS = {p.name[:2]: p for p in EVERY}  # "01" .. "18": the syllabus's numbers
TEACHING = ROOT / "docs" / "teaching.md"
README = ROOT / "README.md"
BEING_REWRITTEN: dict[str, str] = {}  # lesson -> why its prose is not held to the tests yet

# -- the budgets of a time plan -------------------------------------------------------------------
# A lecturer speaks about 130 words a minute, but a lesson's prose is not read aloud at that
# pace: it is on screen, read with the class, and every Predict is a pause for a guess and a
# discussion. Half the speaking rate is what a section can hold.
WORDS_PER_MINUTE = 65
# A code cell is run, its output read and discussed: about a minute each.
CELLS_PER_MINUTE = 1.0
# A staircase step is read as code: a whole new kernel file, or the diff from the step before.
# Dense CUDA explained line by line goes at about a dozen lines a minute.
KERNEL_LINES_PER_MINUTE = 15


# -- reading the notebooks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    index: int
    kind: str  # "markdown" or "code"
    source: str
    exercise: str | None  # the exercise id of a cell `python -m course exercises sync` wrote


@cache
def cells(key: str) -> tuple[Cell, ...]:
    nb = json.loads(KEYS[key].read_text())
    return tuple(Cell(i, c["cell_type"], "".join(c["source"]),
                      c.get("metadata", {}).get("exercise", {}).get("id"))
                 for i, c in enumerate(nb["cells"]))


HEADING = re.compile(r"^## (\d+) · (.+)$", re.M)


@cache
def sections(key: str) -> dict[int, list[str]]:
    """The numbered sections of a notebook: {N: [title, ...]} from its "## N · Title" headings
    (09 has two sections 7)."""
    found: dict[int, list[str]] = {}
    for cell in cells(key):
        if cell.kind == "markdown":
            for number, title in HEADING.findall(cell.source):
                found.setdefault(int(number), []).append(title.strip())
    return found


def title(key: str) -> str:
    first = cells(key)[0].source.splitlines()[0]
    return first.removeprefix("# ").strip()


@cache
def staircases() -> dict[str, set[int]]:
    """The step numbers that exist, per lesson number: the tensor-core matmul's steps (and step
    13, the full kernel its staircase ends with), the Hopper matmul's `wgmma.cu` steps (built in one
    lesson, measured in the next), the Hopper attention's forward steps."""
    from kernels.attention.hopper import fwd
    from kernels.matmul import bench_steps, steps
    from kernels.matmul.hopper import wgmma

    five = {int(v.split("_")[0]) for v in steps.STEPS} | {
        int(bench_steps.FULL_KERNEL.split("_")[0])}
    label = {slug: lesson.label for slug, lesson in syllabus.BY_SLUG.items()}
    return {label["mma_matmul"]: five, label["hopper_matmul"]: set(wgmma.STEPS),
            label["hopper_measured"]: set(wgmma.STEPS), label["hopper_attention"]: set(fwd.STEPS)}


# -- references -----------------------------------------------------------------------------------

NN = r"(?:\d\d|A\d)"  # any two digits: "lesson 19" is caught, not skipped
# one number, a range (1–3, 1-3, 4 to 8) or a list that ends in "and"/"or" (2, 3 and 4)
NUMS = (r"\d+(?:\s*(?:–|-|to)\s*\d+\b|(?:,\s\d+)*,?\s(?:and|or)\s\d+\b(?![.,]\d))?"
        r"(?![\w.]\d|[a-z]|-[a-z])")  # not "5b" (a section of hopper.cuh), not "8-row"
LESSON_REF = re.compile(rf"\b(?:[Ll]essons?|[Nn]otebooks?|[Aa]ppendix)\s+({NN}(?:\s*(?:–|-|to|"
                        rf"and|,)\s*{NN})*)\b")
# "lesson 08, section 3", "lesson 08's section 3", "Step 12 of lesson 07", "lesson 07's step 3"
QUALIFIED = re.compile(rf"\b(?:[Ll]esson|[Aa]ppendix) ({NN})(?:'s|,)?\s+(sections?|steps?)\s+"
                       rf"({NUMS})|\b([Ss]ections?|[Ss]teps?)\s+({NUMS})\s+of\s+"
                       rf"(?:lesson|notebook|appendix)\s+({NN})")
BARE = re.compile(rf"\b([Ss]ections?|[Ss]teps?)\s+({NUMS})")
# sentences about the numbering before issue 24 (README's and the guide's migration notes)
HISTORY = re.compile(r"[Bb]efore (?:the split of )?issue 24|[Bb]efore (?:its|the) split|"
                     r"\bold (?:0\d|sections?)\b|Renumbered|\(0\d before")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)  # a record quote: not read, not counted


def expand(numbers: str) -> list[int]:
    """ "1–3" -> [1, 2, 3]; "2, 3 and 5" -> [2, 3, 5]."""
    if m := re.fullmatch(r"(\d+)\s*(?:–|-|to)\s*(\d+)", numbers):
        return list(range(int(m[1]), int(m[2]) + 1))
    return [int(n) for n in re.findall(r"\d+", numbers)]


def lesson_keys(text: str) -> list[str]:
    keys = re.findall(NN, text)
    if re.search(r"\d\s*(?:–|-|to)\s*\d", text) and len(keys) == 2 and \
            not any(k.startswith("A") for k in keys):
        return [f"{n:02d}" for n in range(int(keys[0]), int(keys[1]) + 1)]
    return keys


def _sentence(text: str, at: int) -> str:
    start = max(text.rfind(". ", 0, at), text.rfind("\n\n", 0, at), text.rfind("|", 0, at))
    ends = [e for e in (text.find(". ", at), text.find("\n\n", at), text.find("|", at)) if e >= 0]
    return text[start + 1:min(ends) if ends else len(text)]


def problems_in(text: str, where: str, about: str | None) -> list[str]:
    """Every broken reference in one piece of markdown. ``about``: the notebook a bare "section
    N" or "step N" is about (None: ambiguous, so the number must exist in some notebook)."""
    text = CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = []

    def line(at: int) -> str:
        return f"{where}, line {text.count(chr(10), 0, at) + 1}"

    taken: list[tuple[int, int]] = []
    for m in LESSON_REF.finditer(text):
        if HISTORY.search(_sentence(text, m.start())):
            continue
        for key in lesson_keys(m[1]):
            if key not in KEYS:
                found.append(f"{line(m.start())}: {m[0]!r} names no notebook")
    for m in QUALIFIED.finditer(text):
        taken.append(m.span())
        if HISTORY.search(_sentence(text, m.start())):
            continue
        key, kind, numbers = (m[1], m[2], m[3]) if m[1] else (m[6], m[4], m[5])
        found += _check(key, kind.lower(), numbers, f"{line(m.start())}: {m[0]!r}")
    for m in BARE.finditer(text):
        if any(a <= m.start() < b for a, b in taken) or HISTORY.search(_sentence(text, m.start())):
            continue
        kind, numbers = m[1].lower(), m[2]
        if kind.startswith("step") and about not in staircases():
            about = None  # a lesson without a staircase: some staircase must have the step
        found += _check(about, kind, numbers, f"{line(m.start())}: {m[0]!r}")
    return found


def _check(key: str | None, kind: str, numbers: str, label: str) -> list[str]:
    if key is None:  # ambiguous: the number must exist in some notebook
        pool = {n for k in KEYS for n in (sections(k) if kind.startswith("section")
                                         else staircases().get(k, ()))}
        bad = [n for n in expand(numbers) if n not in pool]
        return [f"{label}: no notebook has {kind} {bad}"] if bad else []
    if key not in KEYS:
        return [f"{label}: no notebook {key}"]
    if kind.startswith("section"):
        have, what = set(sections(key)), "sections"
    else:
        have, what = staircases().get(key, set()), "steps"
    bad = [n for n in expand(numbers) if n not in have]
    return [f"{label}: notebook {key} has {what} {sorted(have)}, not {bad}"] if bad else []


def teaching_parts() -> list[tuple[str, str | None, str]]:
    """(where, the notebook a part is about, its text) of docs/teaching.md, without the
    migration section (it names the numbering before issue 24 on purpose)."""
    text = TEACHING.read_text()
    text = re.sub(r"\n## Migration.*?(?=\n## )", "\n", text, flags=re.S)
    parts, about, start = [], None, 0
    for m in re.finditer(r"^(###? )(.*)$", text, flags=re.M):
        parts.append((start, about, text[start:m.start()]))
        key = m[2][:2] if m[1] == "### " else None
        about, start = (key if key in KEYS else None), m.start()
    parts.append((start, about, text[start:]))
    return [(f"docs/teaching.md, from line {text.count(chr(10), 0, s) + 1}", a, t)
            for s, a, t in parts]


def every_reference_problem(exercises: bool) -> list[str]:
    found = []
    for key in KEYS:
        for cell in cells(key):
            if cell.kind == "markdown" and bool(cell.exercise) == exercises:
                found += problems_in(cell.source, f"{KEYS[key].name} cell {cell.index}", key)
    if not exercises:
        for where, about, text in teaching_parts():
            found += problems_in(text, where, about)
        found += problems_in(README.read_text(), "README.md", None)
    return found


# -- time plans -----------------------------------------------------------------------------------

PLAN_ROW = re.compile(r"^\|\s*([^|\n]*?)\s*\|\s*(\d+)\s*\|\s*$", re.M)
PLAN_ITEM = re.compile(r"(\d+(?:\s*[–-]\s*\d+)?\s*·\s*[^,·]+|(?<=· )(?:takeaways|exercises)[^,·]*),"
                       r"\s*(\d+) min", re.I)
AT_HOME = re.compile(r"\bat home\b", re.I)


@dataclass(frozen=True)
class Row:
    label: str
    minutes: int

    @property
    def sections(self) -> set[int]:
        m = re.match(r"(\d+)(?:\s*[–-]\s*(\d+))?\s*·", self.label)
        return set(range(int(m[1]), int(m[2] or m[1]) + 1)) if m else set()

    @property
    def exercises(self) -> bool:
        return self.label.lower().startswith("exercises")

    @property
    def at_home(self) -> bool:
        return bool(AT_HOME.search(self.label))


def plan_text(key: str) -> str:
    opening = "\n\n".join(c.source for c in cells(key)[:4] if c.kind == "markdown")
    return opening[opening.index("Time plan"):] if "Time plan" in opening else ""


def plan(key: str) -> list[Row]:
    """The rows of a notebook's time plan: a table (label | minutes) or a paragraph of
    "N · title, M min" items."""
    text = plan_text(key)
    if rows := PLAN_ROW.findall(text):
        return [Row(label, int(m)) for label, m in rows if not set(label) <= set("-: ")]
    paragraph = text.split("\n\n", 1)[0]
    return [Row(label.strip(" ·"), int(m)) for label, m in PLAN_ITEM.findall(paragraph)]


@cache
def step_lines() -> dict[str, int]:
    """Lines a student reads for each of the tensor-core matmul's steps: the whole file where a
    cell shows it, the diff from the step before where a cell shows what changed (both computed
    by the course's own `steps` and `diffs`, as the notebook shows them)."""
    from kernels.matmul import steps

    found = {}
    for variant, step in steps.STEPS.items():
        whole = len(Path(step.source).read_text().splitlines())
        changed = None
        if steps.previous(variant) is not None:
            d = steps.what_changed(variant)
            changed = d.added + d.removed
        found[variant] = (whole, changed)
    return found


def kernel_lines(cell: Cell) -> int:
    """Kernel lines one code cell of the tensor-core matmul shows:
    `show(steps.STEPS[v].source)` is a whole file, `steps.what_changed(v)` a diff."""
    if cell.kind != "code":
        return 0
    total = 0
    for variant, (whole, changed) in step_lines().items():
        if f'"{variant}"' in cell.source:
            if "what_changed" in cell.source:
                total += changed
            elif "show(" in cell.source:
                total += whole
    return total


@dataclass
class Load:
    """What a group of plan rows covers, against its minutes."""

    label: str
    minutes: int = 0
    words: int = 0
    code: int = 0
    kernel: int = 0

    def over(self) -> list[str]:
        found = []
        for what, amount, budget in (("prose words", self.words, WORDS_PER_MINUTE),
                                     ("code cells", self.code, CELLS_PER_MINUTE),
                                     ("kernel lines", self.kernel, KERNEL_LINES_PER_MINUTE)):
            if amount > budget * self.minutes:
                found.append(f"{self.label}: {amount} {what} in {self.minutes} min "
                             f"({amount / max(self.minutes, 1):.1f} a minute, budget {budget}: "
                             f"plan at least {-(-amount // budget):.0f} min)")
        return found


def loads(key: str) -> list[Load]:
    """The content of each group of plan rows (rows that share a section are one group; the
    takeaways belong to the last section; exercise cells to the exercises rows)."""
    rows = plan(key)
    section_of: dict[int, int] = {}  # section number -> group
    groups: list[Load] = []
    exercises = Load("exercises")
    for row in rows:
        if row.exercises:
            exercises.minutes += row.minutes
            continue
        numbers = row.sections or ({max(section_of)} if section_of else set())
        shared = {section_of[n] for n in numbers if n in section_of}
        if shared:
            group = groups[min(shared)]
            group.label += f" + {row.label}"
        else:
            groups.append(Load(f"{KEYS[key].name[:2]}: {row.label}"))
            group = groups[-1]
        group.minutes += row.minutes
        for n in numbers:
            section_of[n] = groups.index(group)
    if exercises.minutes:
        groups.append(exercises)
    current = None
    for cell in cells(key):
        if cell.kind == "markdown" and (m := HEADING.search(cell.source)):
            current = int(m[1])
        if current is None:
            continue
        if cell.exercise:
            target = exercises
        else:
            target = groups[section_of.get(current, section_of.get(max(section_of), 0))] \
                if section_of else exercises
        if cell.kind == "markdown":
            target.words += len(re.findall(r"\S+", COMMENT.sub(" ", cell.source)))
        else:
            target.code += 1
            target.kernel += kernel_lines(cell) if key == MMA_MATMUL else 0
    return groups


# -- the tests ------------------------------------------------------------------------------------

MMA_MATMUL = syllabus.BY_SLUG["mma_matmul"].label  # the lesson whose plan counts kernel lines
# every notebook but the reference (looked up, not taught: it has no time plan to hold)
LESSONS = [k for k in KEYS if syllabus.lesson(KEYS[k].stem).kind != "reference"]


def _xfail_if_rewritten(key: str):
    marks = [pytest.mark.xfail(reason=BEING_REWRITTEN[key], strict=False)] \
        if key in BEING_REWRITTEN else []
    return pytest.param(key, marks=marks, id=key)


def test_the_reference_checker_finds_broken_references():
    mma, variants, hopper, ref = (syllabus.BY_SLUG[s].label for s in (
        "mma_matmul", "mma_variants", "hopper_matmul", "nvrtc_reference"))
    assert problems_in(f"As lesson {variants}, section 3 shows; see lessons {mma}, {variants} "
                       f"and {hopper} and lesson {ref}.", "t", "01") == []
    broken = problems_in(f"See lesson 99, lesson {variants}'s section 9, section 12 of lesson "
                         f"{mma}, steps 4 to 7, and step 6 of lesson {hopper}.", "t", hopper)
    assert len(broken) == 5, broken
    assert problems_in("section 5b of hopper.cuh, which steps 8-row atoms", "t", hopper) == []
    assert problems_in(f"a primer is section 4 of lesson {ref}; lesson {ref}'s section 2", "t",
                       mma) == []
    assert len(problems_in(f"section 9 of lesson {ref}", "t", mma)) == 1
    assert problems_in("**Section 19.** Step 13.", "t", None) == ["t, line 1: 'Section 19': no "
                                                                  "notebook has section [19]"]
    assert expand("2, 3 and 5") == [2, 3, 5] and expand("4 to 6") == [4, 5, 6]


def test_every_lesson_section_and_step_reference_exists():
    """The notebooks' markdown (exercise statements apart, below), docs/teaching.md, README."""
    broken = every_reference_problem(exercises=False)
    assert not broken, "references to lessons, sections or steps that do not exist:\n" + \
        "\n".join(broken)


def test_exercise_statements_reference_what_exists():
    broken = every_reference_problem(exercises=True)
    assert not broken, "exercise statements (exercises/<slug>*.py) with broken references:\n" \
        + "\n".join(broken)


@pytest.mark.parametrize("key", [_xfail_if_rewritten(k) for k in KEYS])
def test_the_teaching_guide_names_every_section_of_the_notebook(key):
    text = TEACHING.read_text()
    heading = re.search(rf"^### {key} · .*$", text, flags=re.M)
    assert heading, f"docs/teaching.md has no '### {key} · ...' section for {KEYS[key].name}"
    end = re.search(r"^##+ ", text[heading.end():], flags=re.M)
    body = text[heading.end():heading.end() + end.start() if end else len(text)]

    def plain(s: str) -> str:
        return re.sub(r"[\s`*_]+", " ", s).strip().lower()

    missing = [f"{n} · {t}" for n, titles in sections(key).items() for t in titles
               if plain(t) not in plain(body)]
    assert not missing, (f"docs/teaching.md's '### {key}' does not name these sections of "
                         f"{KEYS[key].name}: {missing}")


@pytest.mark.parametrize("key", [_xfail_if_rewritten(k) for k in LESSONS])
def test_a_time_plan_fits_its_content(key):
    groups = loads(key)
    assert groups, f"{KEYS[key].name}: no time plan found"
    over = [line for group in groups for line in group.over()]
    assert not over, f"{KEYS[key].name}: the time plan does not fit its content:\n" + \
        "\n".join(over)


@pytest.mark.parametrize("key", [_xfail_if_rewritten(k) for k in LESSONS])
def test_the_time_plan_includes_the_exercises(key):
    ids = sorted({c.exercise for c in cells(key) if c.exercise})
    if not ids:
        return
    rows = plan(key)
    text = plan_text(key).split("\n\n", 2)
    named = all(i in "\n\n".join(text[:2]) for i in ids)
    assert named or any(r.exercises and r.minutes for r in rows), (
        f"{KEYS[key].name}: the time plan leaves out the exercises {ids}: give them a row "
        f"('Exercises ... | minutes') or name every one")


def test_the_budgets_reject_the_plans_issue_31_found_too_full():
    """The old 07 (6,253 words and 43 code cells in 75 minutes) and the old 05 (steps 1-12, 547
    kernel lines, in 30 minutes) fail; a plan that fits passes."""
    old_07 = Load("old 07", minutes=75, words=6253, code=43)
    assert any("prose words" in line for line in old_07.over())
    old_05 = Load("old 05 section 2", minutes=30, words=955, code=11, kernel=547)
    assert any("kernel lines" in line for line in old_05.over())
    assert Load("fits", minutes=42, words=955, code=11, kernel=547).over() == []
