"""Prose that agrees with the records: numbers and verdicts quoted from ``docs/results/``.

A sentence about a GPU ("an H100 reaches 0.64 of the ceiling") is a copy of a measurement, and a
copy goes stale when the measurement is re-run. So the course writes such sentences from the
records (``docs/results/<device>.json``, written by ``make bench``), and where markdown quotes a
number it names the record beside it, for ``tests/test_claims.py`` to check::

    recorded = claims.load()                  # the H100's records (RECORDED), any machine
    r = recorded.find("07_hopper_matmul", "bf16 step4 8192^3")
    print(claims.sentence(r, recorded))       # value, unit, ratio to ceiling and peer, device
    print(claims.against_target(r, 0.9, against="peer", recorded=recorded))  # reaches / misses
    print(claims.against_copy(r_gelu, recorded=recorded))   # near the copy line, or how far

**Quoting a record in markdown.** Put an HTML comment (invisible once rendered) right after the
number it backs::

    step 4 runs at 1.01×<!-- record: hopper_matmul | bf16 step4 8192^3 | vs peer --> cuBLAS

``<!-- record: LESSON | WHAT | FIELD [| DEVICE] -->``: FIELD is ``value``, ``ceiling``,
``peer``, ``of ceiling`` (value ÷ ceiling) or ``vs peer`` (value ÷ peer); DEVICE is a results
file's slug (default :data:`RECORDED`). The number checked is the last one before the comment on
its line (a ``%`` after it divides it by 100; units and ``×`` may sit between it and the
comment); it must equal the record to the digits it shows. A FIELD followed by a comparison,
``of ceiling < 0.75``, is a claim instead (it backs a word such as "misses", not a number): the
record must satisfy it. :func:`course.prose_checks.check_markdown` returns what disagrees, or a
quote whose record is gone (``tests/test_claims.py`` runs it over every notebook and guide).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from course_utils import env, syllabus
from course_utils.results import Record

RECORDED = "nvidia-h100-80gb-hbm3"  # the course's reference GPU: what a CPU student is shown
FIELDS = ("value", "ceiling", "peer", "of ceiling", "vs peer")


# -- reading the records -------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """One device's results file: its records and, per lesson, the environment that ran them."""

    slug: str
    environment: dict  # of the last run that wrote the file
    environments: dict  # lesson -> environment of the run that measured that lesson
    records: tuple[Record, ...]
    notes: dict  # lesson -> markdown the benchmark wrote beside its numbers (kernel names, ...)

    @property
    def device(self) -> str:
        return self.environment.get("device", self.slug)

    def lessons(self) -> list[str]:
        return list(dict.fromkeys(r.lesson for r in self.records))

    def of(self, lesson: str) -> list[Record]:
        """The records of ``lesson`` in run order (empty when the device has none)."""
        lesson = syllabus.topic_key(lesson)
        return [r for r in self.records if r.lesson == lesson]

    def find(self, lesson: str, what: str) -> Record:
        """The record ``(lesson, what)``; ValueError naming the closest ones when it is gone."""
        lesson = syllabus.topic_key(lesson)
        for r in self.records:
            if r.lesson == lesson and r.what == what:
                return r
        near = [r.what for r in self.of(lesson) if _shares_words(r.what, what)][:5]
        raise ValueError(f"record expected ({lesson!r}, {what!r}) in {self.slug}.json, got none"
                         + (f"; near: {near}" if near else
                            f"; the file has {len(self.of(lesson))} records of {lesson}"))

    def stamp(self, lesson: str) -> dict:
        return self.environments.get(syllabus.topic_key(lesson), self.environment)

    def environment_line(self, lesson: str) -> str:
        """"NVIDIA H100 80GB HBM3 · torch 2.11.0+cu130 · 2026-11-23 · git 16758fc": where and
        when ``lesson``'s records were measured (for the note under a recorded figure)."""
        e = self.stamp(lesson)
        parts = [e.get("device", self.slug), f"torch {e.get('torch')}",
                 str(e.get("date", "")).split(" ")[0], f"git {e.get('git')}"]
        return " · ".join(p for p in parts if p and not p.endswith((" None", " unknown")))


def _shares_words(a: str, b: str) -> bool:
    return len(set(a.split()) & set(b.split())) >= 2


def results_files(directory: str | Path | None = None) -> list[str]:
    """Slugs of the devices with a results file (a JSON with records) in ``directory``."""
    root = Path(directory or env.RESULTS_DIR)
    found = []
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "records" in data:
            found.append(path.stem)
    return found


def load(slug: str = RECORDED, directory: str | Path | None = None) -> Recorded:
    """The records of device ``slug`` from ``docs/results/<slug>.json`` (or ``directory``)."""
    path = Path(directory or env.RESULTS_DIR) / f"{slug}.json"
    if not path.exists():
        raise FileNotFoundError(f"slug expected a results file in {path.parent}, got {slug!r} "
                                f"(there: {', '.join(results_files(path.parent)) or 'none'}); "
                                "`make bench` on that GPU writes it")
    data = json.loads(path.read_text())
    key = syllabus.topic_key  # a file written under an earlier numbering reads the same
    return Recorded(slug=slug, environment=data.get("environment", {}),
                    environments={key(k): v for k, v in data.get("environments", {}).items()},
                    records=tuple(Record(**{**r, "lesson": key(r["lesson"])})
                                  for r in data.get("records", [])),
                    notes={key(k): v for k, v in data.get("notes", {}).items()})


def with_lesson(lesson: str, prefer: str = RECORDED,
                directory: str | Path | None = None) -> Recorded | None:
    """The results of ``prefer`` when it has records of ``lesson``, else of the first device
    that has (so a figure still shows a GPU until ``make bench`` runs on ``prefer``); None
    when no device has any."""
    slugs = results_files(directory)
    for slug in ([prefer] if prefer in slugs else []) + [s for s in slugs if s != prefer]:
        recorded = load(slug, directory)
        if recorded.of(lesson):
            return recorded
    return None


# -- numbers and sentences -----------------------------------------------------------------------


def field(record: Record, name: str) -> float:
    """``value``, ``ceiling``, ``peer``, ``of ceiling`` or ``vs peer`` of ``record``."""
    if name not in FIELDS:
        raise ValueError(f"field expected one of {', '.join(FIELDS)}, got {name!r}")
    needs = {"ceiling": "ceiling", "of ceiling": "ceiling", "peer": "peer", "vs peer": "peer"}
    if name in needs and getattr(record, needs[name]) is None:
        raise ValueError(f"field {name!r}: record {record.what!r} has no {needs[name]}")
    return {"value": lambda: record.value, "ceiling": lambda: record.ceiling,
            "peer": lambda: record.peer, "of ceiling": lambda: record.value / record.ceiling,
            "vs peer": lambda: record.value / record.peer}[name]()


def number(x: float) -> str:
    """A measured rate as prose shows it: 3 significant figures, thousands separated."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _strip_same_run(what: str | None) -> str:
    return (what or "").replace(", same run", "")


def sentence(record: Record, recorded: Recorded | None = None) -> str:
    """``record`` as one sentence: what, value and unit, where (the device that measured it),
    then its ratio to the ceiling and to the peer of the same run, each named."""
    where = f" on the {recorded.stamp(record.lesson).get('device', recorded.slug)}" \
        if recorded else ""
    parts = [f"{record.what}: {number(record.value)} {record.unit}{where}"]
    if record.ceiling:
        parts.append(f"{record.value / record.ceiling:.2f} of the "
                     f"{_strip_same_run(record.ceiling_what)} ({number(record.ceiling)})")
    if record.peer:
        parts.append(f"{record.value / record.peer:.2f}× {_strip_same_run(record.peer_what)} "
                     f"({number(record.peer)})")
    both = record.ceiling and record.peer
    return ", ".join(parts) + (", both measured in the same run" if both else
                               ", measured in the same run" if record.ceiling or record.peer
                               else "")


@dataclass(frozen=True)
class Verdict:
    """A claim about one record computed from it: ``met`` when ``measured >= target``."""

    record: Record
    against: str  # "ceiling" or "peer"
    target: float
    measured: float
    device: str

    @property
    def met(self) -> bool:
        return self.measured >= self.target

    @property
    def word(self) -> str:
        return "reaches" if self.met else "misses"

    def __str__(self) -> str:
        what = (f"of the {_strip_same_run(self.record.ceiling_what)}"
                if self.against == "ceiling" else f"× {_strip_same_run(self.record.peer_what)}")
        outcome = "reaches the target" if self.met else "misses the target"
        return (f"{self.record.what} on the {self.device}: {self.measured:.2f} {what} "
                f"(target {self.target:.2f}): {outcome}")


def against_target(record: Record, target: float, against: str = "ceiling",
                   recorded: Recorded | None = None) -> Verdict:
    """Whether ``record`` reaches ``target`` times its ceiling (or its peer)."""
    if against not in ("ceiling", "peer"):
        raise ValueError(f"against expected 'ceiling' or 'peer', got {against!r}")
    if not isinstance(target, int | float) or not target > 0:
        raise ValueError(f"target expected a positive fraction, got {target!r}")
    measured = field(record, "of ceiling" if against == "ceiling" else "vs peer")
    device = recorded.stamp(record.lesson).get("device", recorded.slug) if recorded else "GPU"
    return Verdict(record, against, float(target), measured, device)


def against_copy(record: Record, near: float = 0.9, recorded: Recorded | None = None) -> str:
    """A memory-bound record against its copy-bandwidth ceiling: "near the copy line" from
    ``near`` of it up, otherwise how far below it sits."""
    share = field(record, "of ceiling")
    device = f" on the {recorded.stamp(record.lesson).get('device')}" if recorded else ""
    where = ("sits near the copy line" if share >= near
             else f"sits at {share:.0%} of the copy line, below it")
    return (f"{record.what}{device} {where} ({number(record.value)} of "
            f"{number(record.ceiling)} {record.unit})")


def quote(record: Record, name: str = "value", device: str = RECORDED,
          digits: int | None = None) -> str:
    """The markdown for quoting ``record``'s ``name`` field: the number as it should appear,
    then its comment (for writing prose: paste the result, then the unit)."""
    x = field(record, name)
    text = number(x) if digits is None else f"{x:.{digits}f}"
    if math.isfinite(x) and digits is None and name in ("of ceiling", "vs peer"):
        text = f"{x:.2f}"
    tail = "" if device == RECORDED else f" | {device}"
    return f"{text}<!-- record: {record.lesson} | {record.what} | {name}{tail} -->"


__all__ = ["FIELDS", "RECORDED", "Recorded", "Verdict", "against_copy", "against_target", "field",
           "load", "number", "quote", "results_files", "sentence", "with_lesson"]
