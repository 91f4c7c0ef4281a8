"""The prose checked against the measurements it quotes: every ``<!-- record: ... -->`` comment
in the notebooks and guides against ``docs/results/`` (:func:`check_markdown`), every
``<!-- recorded: ... -->`` against what the GPU cells printed in ``docs/recordings/``
(:func:`check_recorded`). :mod:`course_utils.claims` says how to write either; this is the
course's own production check, run by ``tests/test_claims.py``, not something a lesson calls.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from course_utils import claims, env, recordings

COMPARISONS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}

# -- checking markdown against the records -------------------------------------------------------

QUOTE = re.compile(r"<!--\s*record:(?P<body>.*?)-->", re.S)
NUMBER = re.compile(r"(?<![\w.])(?P<digits>[0-9][0-9,]*(?:\.[0-9]+)?)(?P<percent>\s*%)?")
CONDITION = re.compile(r"^(?P<field>[a-z ]+?)\s*(?P<op><=|>=|<|>)\s*(?P<bound>[0-9.]+)$")


@dataclass(frozen=True)
class Quote:
    """One ``<!-- record: ... -->`` comment of a markdown text and the number it backs."""

    where: str  # "notebooks/01_x.ipynb cell 3, line 2" (for the message)
    lesson: str
    what: str
    field: str
    device: str
    quoted: str | None  # the number as written ("0.64", "64%"); None for a condition
    condition: tuple[str, float] | None  # ("<", 0.75) for a claim

    def problem(self, directory: str | Path | None = None,
                cache: dict | None = None) -> str | None:
        """None when the records agree with this quote, else what is wrong, in words."""
        cache = {} if cache is None else cache
        try:
            if self.device not in cache:
                cache[self.device] = claims.load(self.device, directory)
            record = cache[self.device].find(self.lesson, self.what)
            actual = claims.field(record, self.field)
        except (FileNotFoundError, ValueError) as gone:
            return f"{self.where}: {gone}"
        if self.condition:
            op, bound = self.condition
            if not COMPARISONS[op](actual, bound):
                return (f"{self.where}: claims {self.field} {op} {bound} for {self.what!r}, "
                        f"the record says {actual:.4g}")
            return None
        if self.quoted is None:
            return (f"{self.where}: no number before the quote of {self.what!r} "
                    f"({self.field}); put the comment right after the number it backs")
        value, tolerance = _parse_quoted(self.quoted)
        if abs(value - actual) > tolerance:
            return (f"{self.where}: quotes {self.quoted} for {self.field} of {self.what!r}, "
                    f"the record says {actual:.4g} ({self.device})")
        return None


def _parse_quoted(text: str) -> tuple[float, float]:
    """(value, half a unit of its last digit): "0.64" -> (0.64, 0.005); "64%" -> (0.64,
    0.005); "1,234" -> (1234, 0.5)."""
    match = NUMBER.fullmatch(text.strip())
    if not match:
        raise ValueError(f"quoted number expected digits like 0.64, 64% or 1,234, got {text!r}")
    digits = match["digits"].replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    scale = 100.0 if match["percent"] else 1.0
    return float(digits) / scale, 0.5 * 10 ** -decimals / scale + 1e-12


CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def _without_code(text: str) -> str:
    """``text`` with code spans and fenced blocks blanked (same length, newlines kept): a quote
    shown as an example inside backticks is not a quote."""
    return CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def quotes(text: str, where: str = "text") -> list[Quote]:
    """Every record quote in markdown ``text`` (outside code); ValueError naming a malformed
    one."""
    text = _without_code(text)
    found = []
    for match in QUOTE.finditer(text):
        parts = [p.strip() for p in match["body"].split("|")]
        line = text.count("\n", 0, match.start()) + 1
        at = f"{where}, line {line}"
        if len(parts) not in (3, 4) or not all(parts):
            raise ValueError(f"{at}: record quote expected 'LESSON | WHAT | FIELD [| DEVICE]', "
                             f"got {match['body'].strip()!r}")
        lesson, what, spec = parts[:3]
        device = parts[3] if len(parts) == 4 else claims.RECORDED
        condition = None
        if cond := CONDITION.match(spec):
            spec, condition = cond["field"].strip(), (cond["op"], float(cond["bound"]))
        if spec not in claims.FIELDS:
            raise ValueError(f"{at}: record quote field expected one of {', '.join(claims.FIELDS)} "
                             f"(optionally with < <= > >= and a number), got {spec!r}")
        # the text before the comment on its line, after any earlier comment on that line
        before = text[text.rfind("\n", 0, match.start()) + 1:match.start()].split("-->")[-1]
        numbers = list(NUMBER.finditer(before))
        quoted = numbers[-1].group(0).strip() if numbers and condition is None else None
        found.append(Quote(at, lesson, what, spec, device, quoted, condition))
    return found


def markdown_of(path: str | Path) -> list[tuple[str, str]]:
    """``(where, markdown)`` pieces of a file: each markdown cell of a notebook, or the whole
    of a ``.md`` file."""
    path = Path(path)
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return [(f"{path.name} cell {i}", "".join(c["source"])) for i, c in enumerate(cells)
                if c["cell_type"] == "markdown"]
    return [(path.name, path.read_text())]


def check_markdown(paths: Iterable[str | Path], directory: str | Path | None = None) -> tuple[
        int, list[str]]:
    """(quotes found, problems) over every record quote in ``paths`` (notebooks, .md files)."""
    cache: dict = {}
    count, problems = 0, []
    for path in paths:
        for where, text in markdown_of(path):
            for quote in quotes(text, where):
                count += 1
                if problem := quote.problem(directory, cache):
                    problems.append(problem)
    return count, problems


# -- quoting what a recorded cell printed ---------------------------------------------------------

RECORDED_QUOTE = re.compile(r"<!--\s*recorded:(?P<body>.*?)-->", re.S)


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def recorded_problems(text: str, where: str = "text",
                      folder: str | Path | None = None) -> tuple[int, list[str]]:
    """(quotes, problems) of the ``<!-- recorded: NOTEBOOK | TEXT -->`` comments in markdown
    ``text``: each claims that a ``%%requires`` cell of ``docs/recordings/NOTEBOOK.json``
    printed TEXT (spaces squeezed), for prose that quotes what the GPU showed ("59%", "as
    expected") rather than a record of ``make bench``."""
    folder = Path(folder) if folder else env.ROOT / "docs" / "recordings"
    count, problems = 0, []
    for match in RECORDED_QUOTE.finditer(_without_code(text)):
        count += 1
        parts = [p.strip() for p in match["body"].split("|", 1)]
        at = f"{where}, line {text.count(chr(10), 0, match.start()) + 1}"
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{at}: recorded quote expected 'NOTEBOOK | TEXT', got "
                             f"{match['body'].strip()!r}")
        path = folder / f"{recordings.recording_key(parts[0])}.json"
        if not path.exists():
            problems.append(f"{at}: no recordings {path.name} in {folder}")
            continue
        cells = json.loads(path.read_text())["cells"]
        printed = _squeeze("\n".join(o.get("text", "") for c in cells for o in c["outputs"]))
        if _squeeze(parts[1]) not in printed:
            problems.append(f"{at}: no recorded cell of {parts[0]} printed {parts[1]!r}")
    return count, problems


def check_recorded(paths: Iterable[str | Path], folder: str | Path | None = None) -> tuple[
        int, list[str]]:
    """:func:`recorded_problems` over every markdown piece of ``paths``."""
    count, problems = 0, []
    for path in paths:
        for where, text in markdown_of(path):
            n, found = recorded_problems(text, where, folder)
            count, problems = count + n, problems + found
    return count, problems
