"""Results files: numbers measured on a GPU, written by the course's own benchmark code.

``docs/results/<device-slug>.json`` holds ``"environment"`` (device, driver, CUDA, torch, triton,
python, git revision, date) and ``"records"``, one per figure::

    {"lesson": "cuda_gelu", "what": "gelu cuda vectorized float32 n=2^28",
     "value": 2712.3, "unit": "GB/s",
     "ceiling": 3009.1, "ceiling_what": "device copy bandwidth, same run",
     "peer": 2650.0, "peer_what": "F.gelu, same run"}

``ceiling`` and ``peer`` are measured in the same run as ``value``. Saving the records of a lesson
replaces that lesson's earlier records and keeps the others; ``<device-slug>.md`` is re-rendered
from the JSON each time. Benchmarks write to ``var/results/`` unless told otherwise
(``COURSE_RESULTS_DIR`` or ``directory=``), so a notebook run on a laptop never touches the
committed files; ``make bench`` writes to ``docs/results/``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from course_utils import env, syllabus


@dataclass
class Record:
    lesson: str  # a record key: the lesson's topic slug, or "<slug>.<part>"
    what: str
    value: float
    unit: str
    ceiling: float | None = None
    ceiling_what: str | None = None
    peer: float | None = None
    peer_what: str | None = None

    def __post_init__(self) -> None:
        if (self.ceiling is None) != (self.ceiling_what is None):
            raise ValueError(f"record {self.what!r}: give ceiling and ceiling_what together")
        if (self.peer is None) != (self.peer_what is None):
            raise ValueError(f"record {self.what!r}: give peer and peer_what together")

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Note:
    """Markdown shown under a lesson's table: a finding that is not a number (a command and
    what it printed, say)."""

    lesson: str  # a record key: the lesson's topic slug, or "<slug>.<part>"
    text: str


def results_dir(directory: str | Path | None = None) -> Path:
    path = Path(directory or os.environ.get("COURSE_RESULTS_DIR") or env.VAR / "results")
    path.mkdir(parents=True, exist_ok=True)
    return path


def save(lesson: str, records: list[Record], directory: str | Path | None = None,
         notes: str | None = None) -> Path:
    """Replace ``lesson``'s records in this device's results file; return the JSON path.

    ``notes`` (markdown) is shown under the lesson's table: a command and what it printed,
    for findings that are not numbers (a clean compute-sanitizer run, say).
    """
    lesson = syllabus.topic_key(lesson)
    for rec in records:
        if syllabus.topic_key(rec.lesson) != lesson:
            raise ValueError(f"save({lesson!r}): record {rec.what!r} belongs to {rec.lesson!r}")
    path = results_dir(directory) / f"{env.device_slug()}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    key = syllabus.topic_key  # a file written under an earlier numbering is migrated here
    kept = [{**r, "lesson": key(r["lesson"])} for r in old.get("records", [])
            if key(r["lesson"]) != lesson]
    environments = {key(k): v for k, v in old.get("environments", {}).items()}
    environments[lesson] = env.environment()
    all_notes = {key(k): v for k, v in old.get("notes", {}).items() if key(k) != lesson}
    if notes:
        all_notes[lesson] = notes
    data = {
        "environment": env.environment(),
        # each lesson's records keep the environment of the run that measured them
        "environments": dict(sorted(environments.items())),
        "records": sorted(kept + [{**r.as_dict(), "lesson": lesson} for r in records],
                          key=lambda r: r["lesson"]),  # stable: keeps run order
        "notes": dict(sorted(all_notes.items())),
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    path.with_suffix(".md").write_text(render_markdown(data))
    return path


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _taught_in(key: str) -> str:
    """"lesson 05 · GeLU in CUDA": where a record key's numbers are taught."""
    try:
        lesson = syllabus.lesson(key)
    except KeyError:
        return "not in the syllabus"
    return f"lesson {lesson.label} · {lesson.title}"


def render_markdown(data: dict) -> str:
    """The tables of a results file, one section per lesson, ratios computed from the JSON."""
    lines = [f"# Results: {data['environment']['device']}", "",
             "Written by the course's benchmark code (`make bench` / the notebooks); do not edit.",
             "Ratios are value ÷ ceiling and value ÷ peer, both measured in the same run.", ""]
    by_lesson: dict[str, list[dict]] = {}
    for rec in data["records"]:
        by_lesson.setdefault(rec["lesson"], []).append(rec)
    for lesson, recs in by_lesson.items():
        stamp = data.get("environments", {}).get(lesson, data["environment"])
        lines += [f"## {lesson} ({_taught_in(lesson)})", "",
                  "Environment: " + ", ".join(f"{k} {v}" for k, v in stamp.items() if v), "",
                  "| what | value | unit | ceiling | of ceiling | ceiling is | peer | vs peer "
                  "| peer is |",
                  "|---|---:|---|---:|---:|---|---:|---:|---|"]
        for r in recs:
            ceil, peer = r.get("ceiling"), r.get("peer")
            of_ceiling = f"{r['value'] / ceil:.1%}" if ceil else ""
            vs_peer = f"{r['value'] / peer:.2f}×" if peer else ""
            lines.append(f"| {r['what']} | {_fmt(r['value'])} | {r['unit']} | {_fmt(ceil)} | "
                         f"{of_ceiling} | {r.get('ceiling_what', '')} | {_fmt(peer)} | "
                         f"{vs_peer} | {r.get('peer_what', '')} |")
        if note := data.get("notes", {}).get(lesson):
            lines += ["", note.rstrip()]
        lines.append("")
    return "\n".join(lines)
