"""Each notebook's time plan, read from its opening cells, and the course's paths by length.

A lesson's plan is the table (``| section | minutes |``) or the paragraph ("1 · title, 12 min;
...") after "Time plan" in its first three markdown cells; rows marked "at home" are reading for
home, not class time. :data:`PATHS` picks sections of these plans for a 2-hour workshop, a
one-day lab and a 10-week term; :func:`path_sessions` times them from the plans themselves, so a
path stays true when a plan changes (``tests/test_docs.py`` holds each to its length).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from course_utils import syllabus

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@dataclass(frozen=True)
class Section:
    label: str  # as the plan writes it: "3 · GeLU five ways (and two exercises)"
    minutes: int
    at_home: bool


def opening(lesson: syllabus.Lesson) -> str:
    """The first three markdown cells of the lesson's notebook: title, objectives, plan."""
    cells = json.loads((NOTEBOOKS / lesson.notebook).read_text())["cells"]
    return "\n\n".join(["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"][:3])


def sections(lesson: syllabus.Lesson) -> list[Section]:
    """The rows of the lesson's time plan (none for a reference lesson, which has no plan)."""
    text = opening(lesson)
    if "Time plan" not in text:
        return []
    return parse(text[text.index("Time plan"):])


def parse(plan: str) -> list[Section]:
    """Sections of a plan that starts at "Time plan": a table's rows (a row that says "at home"
    is reading for home), or a paragraph's "title, N min" items (a lab's: all of it is the
    lab)."""
    rows = re.findall(r"^\|([^\n]*)\|\s*(\d+)\s*\|\s*$", plan, flags=re.M)
    if rows:
        return [Section(label.strip(), int(m), bool(re.search(r"\bat home\b", label, re.I)))
                for label, m in rows]
    paragraph = plan.split("\n\n", 1)[0].replace("\n", " ")
    items = paragraph.split(":", 1)[1] if ":" in paragraph else paragraph
    found = re.findall(r"([^;]*?),\s*(\d+)\s*min\b", items)
    return [Section(label.strip(" ·;.").strip(), int(m), False) for label, m in found]


def class_minutes(lesson: syllabus.Lesson) -> int:
    """Minutes of the lesson's plan spent in class."""
    return sum(s.minutes for s in sections(lesson) if not s.at_home)


# ---- paths by length ---------------------------------------------------------------------------
# A path is sessions; a session is (lesson slug, section prefixes) pairs, taught in that order.
# A prefix names the plan rows it starts (every row of the lesson's plan that starts with it);
# no prefixes: the lesson's whole class plan (a reference lesson without a plan: its minutes).
Part = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class CoursePath:
    title: str
    audience: str
    session_minutes: int  # the longest a session may run
    total_minutes: int  # the most the whole path may take
    sessions: tuple[tuple[Part, ...], ...]


WHOLE: tuple[str, ...] = ()
PATHS = {
    "workshop": CoursePath(
        "A 2-hour workshop", "a conference tutorial or a team's first look: why kernels are "
        "measured, fused and written, and a first kernel in Triton and in CUDA", 120, 120,
        ((("profiling", ("1 ·", "3 ·")), ("fusion", ("1 ·", "2 ·", "3 ·", "5 ·")),
          ("cuda_gelu", ("1 ·", "3 ·")), ("attention", ("1 ·", "2 ·", "3 · FlashAttention"))),)),
    "day": CoursePath(
        "A one-day lab", "a day of hands-on work (four blocks with breaks between them): "
        "measuring, fusing, the puzzle ladder, CUDA, and attention's online softmax", 90, 330,
        ((("profiling", WHOLE),), (("fusion", WHOLE),), (("puzzles", WHOLE),),
         (("cuda_gelu", ("1 ·", "2 ·", "3 ·", "4 ·", "5 ·")),
          ("attention", ("1 ·", "2 ·", "Exercises in class: `attention.online_step`",
                         "3 · FlashAttention", "Exercises in class: `attention.attend_block`"))))),
    "term": CoursePath(
        "A 10-week term", "two 75-minute sessions a week: the core path, then every track",
        75, 20 * 75,
        ((("profiling", WHOLE),), (("fusion", WHOLE),),
         (("puzzles", ("1–4", "5–7", "8–9")),), (("first_kernels", WHOLE),),
         (("cuda_gelu", WHOLE),), (("nvrtc", WHOLE),),
         (("puzzles", ("10–12", "13 ·")), ("nvrtc_reference", WHOLE)),
         (("mma_matmul", WHOLE),), (("mma_variants", WHOLE),), (("attention", WHOLE),),
         (("rmsnorm", WHOLE),), (("byok", WHOLE),), (("model", WHOLE),),
         (("triton_tools", WHOLE),), (("attention_variants", WHOLE),),
         (("hopper_matmul", WHOLE),), (("hopper_measured", WHOLE),),
         (("hopper_attention", WHOLE),), (("hopper_backward", WHOLE),),
         (("distributed", WHOLE),), (("patterns", WHOLE),))),
}


def part_sections(part: Part) -> list[Section]:
    """The plan rows a part of a session teaches, in the plan's order."""
    slug, prefixes = part
    lesson = syllabus.BY_SLUG[slug]
    rows = sections(lesson)
    if not prefixes:
        return [s for s in rows if not s.at_home] or [Section("the whole lesson",
                                                              lesson.minutes, False)]
    chosen = []
    for prefix in prefixes:
        found = [s for s in rows if s.label.startswith(prefix)]
        if not found:
            raise ValueError(f"{lesson.notebook}'s time plan has no section starting with "
                             f"{prefix!r}; its sections are {[s.label for s in rows]}")
        chosen += [s for s in found if s not in chosen]
    return [s for s in rows if s in chosen]


def part_minutes(part: Part) -> int:
    return sum(s.minutes for s in part_sections(part))


def session_minutes(session: tuple[Part, ...]) -> int:
    return sum(part_minutes(part) for part in session)
