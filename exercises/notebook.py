"""Write a lesson's "Exercises" section from the registry (``python -m course exercises``).

    python -m course exercises sync fusion  # (re)write lesson 02's (or: sync 02) exercises
    python -m course exercises list         # every exercise, lesson by lesson

Per exercise: a markdown statement, the tool cells it names (``before``), the stub cell and the
check cell. An exercise registered with ``section=`` closes the notebook section whose heading
contains that text (it comes right after its idea, before the next heading of the same or a
higher level); the others follow a final "Exercises" heading. Each cell carries
``metadata.exercise = {"id", "role"}`` so a re-sync replaces exactly those cells (keeping their
ids) and nothing else. The notebook stays stripped (no outputs), as committed notebooks must be.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

from course_utils import env, syllabus
from exercises import Exercise, all_exercises

NOTEBOOKS = env.ROOT / "notebooks"
HEADING = """## Exercises

Your turn. Each exercise is a stub cell (edit it: the signature is given) and a check cell that
tests your answer on fresh random inputs, awkward shapes included, and says what is wrong if it
is. An untouched stub says "not attempted". On a GPU a correct answer is also measured against
this lesson's ceiling. Solutions are in `exercises/solutions/`: try first."""


def lesson_notebook(lesson: str, folder: Path = NOTEBOOKS) -> Path:
    """The notebook of ``lesson`` (a slug, or the number students see) in ``folder``."""
    try:
        lesson = syllabus.lesson(lesson).label
    except KeyError:
        pass  # not a lesson of the syllabus: a notebook named by its number, as in the tests
    found = sorted(Path(folder).glob(f"{lesson}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"lesson expected one notebook {lesson}_*.ipynb in {folder}, "
                         f"found {[p.name for p in found]}")
    return found[0]


def _cell(kind: str, source: str, exercise_id: str, role: str, old_ids: dict) -> dict:
    cell = {"cell_type": kind, "id": old_ids.get((exercise_id, role)) or uuid.uuid4().hex[:8],
            "metadata": {"exercise": {"id": exercise_id, "role": role}},
            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def exercise_cells(ex: Exercise, old_ids: dict | None = None) -> list[dict]:
    """The statement, tool, stub and check cells of one exercise."""
    old_ids = old_ids or {}
    cells = [_cell("markdown", f"### ✏️ Exercise {ex.id}: {ex.title}\n\n{ex.intro.strip()}",
                   ex.id, "statement", old_ids)]
    for i, source in enumerate(ex.before):
        cells.append(_cell("code", source, ex.id, f"before-{i}", old_ids))
    cells.append(_cell("code", ex.stub_cell(), ex.id, "stub", old_ids))
    cells.append(_cell("code", ex.check_cell(), ex.id, "check", old_ids))
    return cells


def section_cells(exercises: list[Exercise], old_ids: dict | None = None) -> list[dict]:
    """The closing "Exercises" section: its heading, then every exercise's cells."""
    old_ids = old_ids or {}
    cells = [_cell("markdown", HEADING, "section", "heading", old_ids)]
    for ex in exercises:
        cells.extend(exercise_cells(ex, old_ids))
    return cells


def _heading(cell: dict) -> tuple[int, str] | None:
    """(level, text) of a markdown cell that opens with a heading, else None."""
    if cell["cell_type"] != "markdown":
        return None
    first = "".join(cell["source"]).lstrip().split("\n", 1)[0]
    level = len(first) - len(first.lstrip("#"))
    return (level, first[level:].strip()) if 0 < level <= 6 else None


def section_end(cells: list[dict], section: str, where: str = "the notebook") -> int:
    """Index just past the section whose heading contains ``section``: the next heading of the
    same or a higher level, or the end. ValueError when no heading, or several, match."""
    found = [(i, h) for i, c in enumerate(cells) if (h := _heading(c)) and section in h[1]]
    if len(found) != 1:
        headings = [h[1] for c in cells if (h := _heading(c))]
        raise ValueError(f"section expected the text of exactly one heading of {where}, got "
                         f"{section!r} matching {len(found)}; headings: {headings}")
    start, (level, _) = found[0]
    for i in range(start + 1, len(cells)):
        if (h := _heading(cells[i])) and h[0] <= level:
            return i
    return len(cells)


def place(cells: list[dict], exercises: list[Exercise], old_ids: dict | None = None,
          where: str = "the notebook") -> list[dict]:
    """``cells`` (no exercise cells among them) with every exercise inserted: each at the end of
    its section, in registration order, the rest in a closing "Exercises" section."""
    placed: dict[int, list[dict]] = {}
    for ex in exercises:
        if ex.section:
            at = section_end(cells, ex.section, where)
            placed.setdefault(at, []).extend(exercise_cells(ex, old_ids))
    out: list[dict] = []
    for i, cell in enumerate(cells):
        out.extend(placed.get(i, []))
        out.append(cell)
    out.extend(placed.get(len(cells), []))
    if rest := [ex for ex in exercises if not ex.section]:
        out.extend(section_cells(rest, old_ids))
    return out


def sync(lesson: str, folder: Path = NOTEBOOKS) -> Path:
    """Rewrite the exercise cells of lesson ``lesson``'s notebook from the registry."""
    exercises = all_exercises(lesson)
    if not exercises:
        raise ValueError(f"lesson {lesson!r} has no registered exercises")
    path = lesson_notebook(lesson, folder)
    nb = json.loads(path.read_text())
    old_ids = {(c["metadata"]["exercise"]["id"], c["metadata"]["exercise"]["role"]): c["id"]
               for c in nb["cells"] if "exercise" in c.get("metadata", {})}
    kept = [c for c in nb["cells"] if "exercise" not in c.get("metadata", {})]
    nb["cells"] = place(kept, exercises, old_ids, where=path.name)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return path


def notebook_stubs(path: Path) -> dict[str, dict[str, str]]:
    """``{exercise id: {role: source}}`` of the exercise cells in a notebook."""
    nb = json.loads(Path(path).read_text())
    found: dict[str, dict[str, str]] = {}
    for cell in nb["cells"]:
        if meta := cell.get("metadata", {}).get("exercise"):
            found.setdefault(meta["id"], {})[meta["role"]] = "".join(cell["source"])
    return found


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "mutants":  # mutation testing of the checks: its own options
        from exercises import mutants

        return mutants.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m course exercises")
    parser.add_argument("command", choices=["sync", "list", "mutants"])
    parser.add_argument("lessons", nargs="*",
                        help="lessons: slugs or numbers, e.g. fusion 09 (default: all)")
    args = parser.parse_args(argv)
    lessons = args.lessons or list(dict.fromkeys(e.lesson for e in all_exercises()))
    for lesson in lessons:
        if args.command == "sync":
            print(f"wrote the Exercises section of {sync(lesson).name}")
        else:
            for ex in all_exercises(lesson):
                print(f"{ex.id:28s} {ex.title}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
