"""A check whose compiled answer may fault, run in a child process on a GPU.

Lesson 09's exercises hand a piece of FlashAttention to the student (the loop body, the range
of key blocks, the backward's step) and run the course's kernel with that piece inside it,
compiled. A wrong range or offset there reads outside q, k or v. Usually the read lands in
memory the caching allocator holds and the values come out wrong (the check says "not yet").
Sometimes it lands in memory no allocation maps, and the GPU reports an *illegal memory
access*: that error is sticky, so every later CUDA call of the process fails with it. In a
notebook that is every later cell; in the test suite it was every later test of one worker
(the H100 run at 63f3a2e: a wrong answer's fault surfaced in the next test's
``torch.manual_seed``).

So on a GPU such a check runs in a child: the answer's source (:func:`exercises.triton_child.
answer_source`, the student's functions and everything of theirs they name) is imported there
and checked by the same :func:`exercises.run_check`; the child prints the result as one JSON
line. A child that dies is a "not yet" naming the crash, and the notebook's process never
touched the wrong kernel. In Triton's interpreter (a CPU) nothing faults (a wild address is an
error the check reports), so the check runs in the process, as before.

``python -m exercises.isolated_child <id> <name>...`` (the answer's source on stdin) is the
child: a module of its own, since it runs checks and this module is part of running them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from course_utils import env
from exercises import triton_child
from exercises.catalogue import Result

CHILD = "COURSE_EXERCISE_CHILD"  # set in the child: check here, do not start another
CHILD_MODULE = "exercises.isolated_child"  # what the child runs (python -m)
TIMEOUT_S = 600  # a check compiles the course's kernel and times it: minutes at most


def wanted() -> bool:
    """Whether an isolated check runs in a child here: compiled on a GPU, not in a child yet."""
    return env.HAS_CUDA and not env.TRITON_INTERPRET and os.environ.get(CHILD) != "1"


def _name(answer) -> str:
    return getattr(getattr(answer, "fn", answer), "__name__", "")


def run(ex, answers: tuple):
    """``ex``'s check of ``answers`` in a child process: its :class:`exercises.Result`."""
    command = [sys.executable, "-m", CHILD_MODULE, ex.id, *map(_name, answers)]
    try:  # the answer's source goes in on stdin; the child imports it from a file of its own
        done = subprocess.run(command, input=triton_child.answer_source(*answers),
                              capture_output=True, text=True, timeout=TIMEOUT_S, cwd=env.ROOT,
                              env=env.child_environment(**{CHILD: "1"}))
    except subprocess.TimeoutExpired:
        return Result(ex, "not yet", [f"no answer after {TIMEOUT_S} s: your code hangs the "
                                      "GPU (a loop whose end is never reached?)",
                                      "hint: try the smallest case in the stub cell"])
    said = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if said:
        result = json.loads(said[-1])
        return Result(ex, result["status"], result["lines"])
    tail = [ln for ln in done.stderr.splitlines() if ln.strip()][-1:]
    return Result(ex, "not yet", [
        f"your code crashed the GPU: {tail[0] if tail else f'exit status {done.returncode}'}",
        "(the check ran it in a separate process, so this notebook is unharmed; the same call "
        "here would have ended its kernel: every later cell would fail)",
        "hint: an address outside q, k or v: check the first and last key block your code "
        "gives for the first and the last query block, and where a block is masked"])
