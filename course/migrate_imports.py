"""Rewrite notebooks' import lines from the old layout to the layered one (issue 15).

    python -m course.migrate_imports notebooks/16_hopper_matmul.ipynb ...   # default: every one

``course_utils.exercises`` became the top-level ``exercises`` package, and the commands that need
the kernels moved from ``python -m course_utils`` to ``python -m course``. A branch written
before the move runs this once on its notebooks. It edits the JSON of code and markdown cells
only (outputs stay as they are: committed notebooks are stripped) and keeps the file's layout.
The GPU recordings of those notebooks (``docs/recordings/<notebook>.json``) are keyed by each
cell's source: a recorded cell whose source changes gets the new source and key, so it stays
fresh (only its import lines changed, not what it computes).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from course_utils import env, recordings

# (old, new), applied in order; the first ones are the more specific
REWRITES = [
    (r"\bfrom course_utils import exercises\b", "import exercises"),
    (r"\bfrom course_utils\.exercises import\b", "from exercises import"),
    (r"\bcourse_utils\.exercises\b", "exercises"),
    (r"\bcourse_utils/exercises/", "exercises/"),
    (r"-m course_utils\b", "-m course"),
]


def rewrite(text: str) -> str:
    for old, new in REWRITES:
        text = re.sub(old, new, text)
    return text


def migrate(path: Path) -> int:
    """Rewrite one notebook in place; the number of cells changed."""
    nb = json.loads(path.read_text())
    changed = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if (new := rewrite(source)) != source:
            cell["source"] = new.splitlines(keepends=True)
            changed += 1
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


def migrate_recording(notebook: Path) -> int:
    """Re-key the recorded cells of ``notebook`` whose source the rewrite changes."""
    path = recordings.RECORDINGS / f"{notebook.stem}.json"
    if not path.exists():
        return 0
    data = json.loads(path.read_text())
    changed = 0
    for cell in data["cells"]:
        if (new := rewrite(cell["source"])) != cell["source"]:
            cell["source"], cell["hash"] = new, recordings.source_hash(new)
            changed += 1
    if changed:
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return changed


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((env.ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        print(f"{path.name}: {migrate(path)} cells rewritten, "
              f"{migrate_recording(path)} recordings re-keyed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
