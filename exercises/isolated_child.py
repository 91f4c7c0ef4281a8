"""The child process of :mod:`exercises.isolated`: ``python -m exercises.isolated_child <id>
<name>...`` imports the answer's source from stdin, checks the answers it names for exercise
``<id>`` with :func:`exercises.run_check` (the same check as in the notebook's process) and
prints the result as one JSON line, which the parent reads back."""

from __future__ import annotations

import json
import sys

import exercises
from exercises import triton_child


def main(argv: list[str]) -> int:
    id, names = argv[0], argv[1:]
    module = triton_child.imported(sys.stdin.read())
    result = exercises.run_check(id, *(getattr(module, n) for n in names))
    print(json.dumps({"status": result.status, "lines": result.lines}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
