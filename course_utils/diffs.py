"""What changed from one kernel to the next: annotated unified diffs for a notebook.

A step of a kernel series is easiest to read as what it changes from the step before, not as a
whole file (the H100 worklogs, llm.c's ``dev/cuda``)::

    from course_utils import diffs
    diffs.diff_files("kernels/matmul/steps/mma_simple.cu", "kernels/matmul/steps/mma_cp_async.cu")
    diffs.diff(diffs.excerpt(path, "// Step 1:", "// Step 2:"),
               diffs.excerpt(path, "// Step 2:", "// Steps 3 and 4"), names=("step 1", "step 2"))
    diffs.region(path, "epilogue")   # the text between "// region: epilogue" and "// endregion"

:func:`show` displays a whole source file, or an excerpt of it between two marker texts, with
its syntax highlighted: every lesson shows kernels from their files this one way.

A :class:`Diff` shows itself as coloured HTML in Jupyter (``_repr_html_``) and as a plain
unified diff everywhere else (``str``), so an executed notebook's text output stays the same
from run to run. Each hunk carries a one-line note where the new source has one: an added
comment line ``// new in <step>: ...`` (or ``# new in <step>: ...``), e.g.
``// new in mma_cp_async: a ring of STAGES slots``. The note is shown on the hunk's header line;
the comment stays in the code, where it keeps saying, in every later step, which step brought
that line.
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import os
import re
from pathlib import Path

NOTE = re.compile(r"^\s*(?://|#)\s*new in [\w.\-]+:\s*(?P<text>.*?)\s*$")
REGION_START = "// region: {name}"
REGION_END = "// endregion"


def _read(path: str | os.PathLike, argument: str) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{argument} expected a readable file, got {str(path)!r}")
    return path.read_text().splitlines()


def excerpt(path: str | os.PathLike, start: str, end: str | None = None) -> str:
    """The lines of ``path`` from the first that contains ``start`` up to (not including) the
    first line after it that contains ``end`` (to the end of the file without one)."""
    lines = _read(path, "path")
    first = next((i for i, line in enumerate(lines) if start in line), None)
    if first is None:
        raise ValueError(f"start expected a text found in {Path(path).name}, got {start!r}")
    if end is None:
        return "\n".join(lines[first:]) + "\n"
    last = next((i for i in range(first + 1, len(lines)) if end in lines[i]), None)
    if last is None:
        raise ValueError(f"end expected a text found after {start!r} in {Path(path).name}, "
                         f"got {end!r}")
    return "\n".join(lines[first:last]) + "\n"


def show(path: str | os.PathLike, start: str | None = None, end: str | None = None) -> None:
    """Display ``path`` (or its :func:`excerpt` from ``start`` to ``end``) in a notebook, as
    CUDA or Python by its suffix. Blank lines and a lone ``@triton.jit`` at the end of an
    excerpt are left out: they belong to the next function."""
    from IPython.display import Code, display

    text = excerpt(path, start, end) if start else "\n".join(_read(path, "path")) + "\n"
    lines = text.rstrip("\n").splitlines()
    while start and lines and lines[-1].strip() in ("", "@triton.jit"):
        lines.pop()
    language = "cuda" if Path(path).suffix in (".cu", ".cuh") else (
        "c++" if Path(path).suffix in (".cpp", ".h") else "python")
    display(Code("\n".join(lines), language=language))


def region(path: str | os.PathLike, name: str) -> str:
    """The lines between ``// region: name`` and the next ``// endregion`` (markers left out)."""
    lines = _read(path, "path")
    marker = REGION_START.format(name=name)
    first = next((i for i, line in enumerate(lines) if line.strip() == marker), None)
    if first is None:
        found = [ln.strip()[len(REGION_START.format(name="")):] for ln in lines
                 if ln.strip().startswith(REGION_START.format(name=""))]
        raise ValueError(f"name expected a region of {Path(path).name} "
                         f"({', '.join(found) or 'it has none'}), got {name!r}")
    last = next((i for i in range(first + 1, len(lines)) if lines[i].strip() == REGION_END),
                None)
    if last is None:
        raise ValueError(f"region {name!r} of {Path(path).name} has no {REGION_END!r} after it")
    return "\n".join(lines[first + 1:last]) + "\n"


@dataclasses.dataclass(frozen=True)
class Hunk:
    """One block of changes: ``lines`` are ``(tag, text)`` with tag ``" "``, ``"-"`` or ``"+"``."""

    header: str  # "@@ -12,7 +12,9 @@"
    lines: tuple[tuple[str, str], ...]
    note: str | None  # the first added "new in <step>:" comment, if any

    @property
    def added(self) -> int:
        return sum(tag == "+" for tag, _ in self.lines)

    @property
    def removed(self) -> int:
        return sum(tag == "-" for tag, _ in self.lines)


@dataclasses.dataclass(frozen=True)
class Diff:
    """A unified diff of ``before`` -> ``after`` (names), hunk by hunk."""

    before: str
    after: str
    hunks: tuple[Hunk, ...]

    @property
    def added(self) -> int:
        return sum(h.added for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.removed for h in self.hunks)

    def summary(self) -> str:
        if not self.hunks:
            return f"{self.before} -> {self.after}: no change"
        return (f"{self.before} -> {self.after}: +{self.added} -{self.removed} lines in "
                f"{len(self.hunks)} hunk{'s' if len(self.hunks) > 1 else ''}")

    def __str__(self) -> str:
        out = [self.summary(), f"--- {self.before}", f"+++ {self.after}"]
        for hunk in self.hunks:
            out.append(hunk.header + (f"  # {hunk.note}" if hunk.note else ""))
            out += [tag + text for tag, text in hunk.lines]
        return "\n".join(out) + "\n"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        style = {"+": "background:#e6ffec", "-": "background:#ffebe9;color:#82071e", " ": ""}
        rows = [f"<div style='font-weight:bold'>{html.escape(self.summary())}</div>"]
        for hunk in self.hunks:
            note = (f" <span style='color:#0550ae;font-style:italic'>"
                    f"{html.escape(hunk.note)}</span>" if hunk.note else "")
            rows.append(f"<div style='color:#6e7781;background:#f6f8fa'>"
                        f"{html.escape(hunk.header)}{note}</div>")
            rows += [f"<div style='{style[tag]}'>{html.escape(tag + text) or '&nbsp;'}</div>"
                     for tag, text in hunk.lines]
        return ("<div style='font-family:monospace;font-size:12px;white-space:pre;"
                "line-height:1.3;overflow-x:auto'>" + "".join(rows) + "</div>")


def _note(lines: list[tuple[str, str]]) -> str | None:
    for tag, text in lines:
        if tag == "+" and (m := NOTE.match(text)):
            return m["text"]
    return None


def diff(before: str, after: str, *, names: tuple[str, str] = ("before", "after"),
         context: int = 3) -> Diff:
    """The difference between two texts, with ``context`` unchanged lines around each change;
    ``names`` label the two sides."""
    for argument, value in (("before", before), ("after", after)):
        if not isinstance(value, str):
            raise ValueError(f"{argument} expected the text of a source, got "
                             f"{type(value).__name__}")
    if not isinstance(context, int) or context < 0:
        raise ValueError(f"context expected an int >= 0, got {context!r}")
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    hunks = []
    for group in matcher.get_grouped_opcodes(context):
        lines: list[tuple[str, str]] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [(" ", text) for text in old[i1:i2]]
                continue
            lines += [("-", text) for text in old[i1:i2]]
            lines += [("+", text) for text in new[j1:j2]]
        first, last = group[0], group[-1]
        header = (f"@@ -{first[1] + 1},{last[2] - first[1]} "
                  f"+{first[3] + 1},{last[4] - first[3]} @@")
        hunks.append(Hunk(header, tuple(lines), _note(lines)))
    return Diff(names[0], names[1], tuple(hunks))


def diff_files(before: str | os.PathLike, after: str | os.PathLike, *, context: int = 3) -> Diff:
    """What changed from file ``before`` to file ``after`` (named by their file names)."""
    old, new = _read(before, "before"), _read(after, "after")
    return diff("\n".join(old), "\n".join(new), names=(Path(before).name, Path(after).name),
                context=context)
