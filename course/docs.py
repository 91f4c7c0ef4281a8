"""``python -m course docs``: the parts of the documentation that are facts of the repository,
written from the syllabus and the records so that they cannot drift from them.

* README.md: the core path and each track (from :mod:`course_utils.syllabus`), and which
  machines ran what (from ``docs/results/`` and ``docs/recordings/``);
* docs/teaching.md: the paths by length (:data:`course.plans.PATHS`, timed from the plans);
* docs/results/README.md: every set of records, by lesson and device, with date and revision.

Each generated part sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``;
``--check`` says which are out of date instead of writing them (``tests/test_docs.py``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from course import plans
from course_utils import syllabus

ROOT = Path(__file__).resolve().parents[1]
RESULTS, RECORDINGS = ROOT / "docs" / "results", ROOT / "docs" / "recordings"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n).*?(<!-- end: (?P=name) -->)", re.S)


def _link(lesson: syllabus.Lesson, prefix: str = "notebooks/") -> str:
    return f"[{lesson.label} · {lesson.title}]({prefix}{lesson.notebook})"


def syllabus_tables() -> str:
    """The core path, then each optional track: lesson, kind, minutes, what needs a GPU."""
    out = []
    for name, what in syllabus.TRACKS.items():
        lessons = syllabus.track(name)
        total = sum(lesson.minutes for lesson in lessons)
        heading = "The core path" if name == syllabus.CORE else f"Track: {name}"
        after = "" if name == syllabus.CORE else ", after " + ", ".join(
            sorted({f"lesson {syllabus.BY_SLUG[p].label}" for lesson in lessons
                    for p in lesson.prerequisites if syllabus.BY_SLUG[p].core}))
        count = f"{len(lessons)} lesson" + ("s" if len(lessons) != 1 else "")
        out += [f"**{heading}** ({what}; {count}, {total} min{after})", "",
                "| lesson | kind | minutes | exercises | a GPU shows |", "|---|---|---|---|---|"]
        out += [f"| {_link(lesson)} | {lesson.kind} | {lesson.minutes} | "
                f"{len(lesson.exercises)} | {lesson.needs} |" for lesson in lessons]
        out.append("")
    return "\n".join(out)


def _device_results() -> list[tuple[str, dict]]:
    """(file stem, data) of every device's records, ``docs/results/<device>.json``."""
    found = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "records" in data and "environments" in data:
            found.append((path.stem, data))
    return found


def _labels(keys) -> str:
    numbers = sorted({syllabus.lesson(k).label for k in keys})
    return ", ".join(numbers) if numbers else "-"


def machines_table() -> str:
    """Which machines ran what: per GPU the lessons benchmarked and recorded, with the latest
    date; the CPU row from the last runs of the exercise checks there."""
    recorded: dict[str, set[str]] = {}
    dates: dict[str, set[str]] = {}
    for path in sorted(RECORDINGS.glob("*.json")):
        env = json.loads(path.read_text())["environment"]
        recorded.setdefault(env["device"], set()).add(path.stem)
        dates.setdefault(env["device"], set()).add(env["date"][:10])
    rows = ["| machine | benchmarks of lessons | recordings of lessons | last run |",
            "|---|---|---|---|"]
    cpu = [json.loads(p.read_text())["environment"] for p in RESULTS.glob("mutants-cpu*.json")]
    if cpu:
        last = max(cpu, key=lambda e: e["date"])
        rows.append(f"| CPU only ({last['device']}; torch {last['torch']}, Triton's "
                    f"interpreter) | every notebook runs (`make test`) | - | "
                    f"{last['date'][:10]} |")
    for _, data in _device_results():
        device = data["environment"]["device"]
        envs = data["environments"].values()
        last = max([e["date"][:10] for e in envs] + sorted(dates.get(device, ())))
        rows.append(f"| {device} (torch {data['environment']['torch']}) | "
                    f"{_labels(data['environments'])} | {_labels(recorded.get(device, ()))} "
                    f"| {last} |")
    return "\n".join(rows) + "\n"


def paths_text() -> str:
    """Each path by length: its sessions, each a list of lessons and sections, each timed."""
    out = []
    for path in plans.PATHS.values():
        total = sum(plans.session_minutes(s) for s in path.sessions)
        out += [f"### {path.title} ({len(path.sessions)} session"
                f"{'s' if len(path.sessions) > 1 else ''}, {total} min)", "",
                f"For {path.audience}.", ""]
        for i, session in enumerate(path.sessions, start=1):
            parts = []
            for part in session:
                lesson = syllabus.BY_SLUG[part[0]]
                what = "the whole notebook" if not part[1] else "; ".join(
                    s.label for s in plans.part_sections(part))
                parts.append(f"{_link(lesson, '../notebooks/')}: {what} "
                             f"({plans.part_minutes(part)} min)")
            lead = f"{i}. " if len(path.sessions) > 1 else "* "
            out.append(f"{lead}**{plans.session_minutes(session)} min**: " + " + ".join(parts))
        out.append("")
    return "\n".join(out)


def results_index() -> str:
    """docs/results/README.md: every lesson's records per device, with date and revision."""
    out = ["# Measured results", "",
           "Written by `python -m course docs` from the records in this folder; do not edit by "
           "hand. Every figure was measured by `make bench` (or the lesson's own script) on the "
           "device named, with its ceiling and its peer measured in the same run; each "
           "device's full table is its `.md` file, the raw records its `.json`.", ""]
    for stem, data in _device_results():
        env = data["environment"]
        out += [f"## {env['device']}", "",
                f"[{stem}.md]({stem}.md) · driver {env['driver']}, CUDA {env['cuda']}, "
                f"torch {env['torch']}, Triton {env['triton']}, Python {env['python']}", "",
                "| records | lesson | figures | date | revision |", "|---|---|---|---|---|"]
        counts: dict[str, int] = {}
        for record in data["records"]:
            counts[record["lesson"]] = counts.get(record["lesson"], 0) + 1
        keys = sorted(data["environments"], key=lambda k: (syllabus.lesson(k).number, k))
        for key in keys:
            e, lesson = data["environments"][key], syllabus.lesson(key)
            out.append(f"| `{key}` | [{lesson.label} · {lesson.title}]"
                       f"(../../notebooks/{lesson.notebook}) | {counts.get(key, 0)} | "
                       f"{e['date']} | {e['git']} |")
        out.append("")
    out += ["## Other runs kept here", "",
            "Logs of test, sanitizer, profiler and tuning runs, named "
            "`<device>-<what>-<revision>.log|txt`; the exercise checks' mutant runs, "
            "`mutants-<machine>*.json|log`; tuning notes: "
            "[hopper-tuning-notes.md](hopper-tuning-notes.md), "
            "[mma-tuning-notes.md](mma-tuning-notes.md); the history of the measurements, as "
            "it was logged while the course was built: [history.md](history.md).", ""]
    return "\n".join(out)


GENERATED = {"README.md": {"syllabus": syllabus_tables, "machines": machines_table},
             "docs/teaching.md": {"paths": paths_text}}


def _fill(text: str, blocks: dict, where: str) -> str:
    names = {m["name"] for m in BLOCK.finditer(text)}
    if missing := set(blocks) - names:
        raise ValueError(f"{where} has no '<!-- generated: NAME -->' block for {sorted(missing)}")
    return BLOCK.sub(lambda m: m[1] + blocks[m["name"]]() + m[3], text)


def wanted() -> dict[Path, str]:
    """Every generated file's text as it should be now."""
    out = {ROOT / name: _fill((ROOT / name).read_text(), blocks, name)
           for name, blocks in GENERATED.items()}
    out[RESULTS / "README.md"] = results_index()
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in wanted().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not check:
            path.write_text(text)
    verb = "out of date (run python -m course docs)" if check else "written"
    print("\n".join(f"{p}: {verb}" for p in stale) or "docs: up to date")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
