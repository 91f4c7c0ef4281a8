"""Nsight Compute's source page: how many threads executed each load and store of a kernel.

:func:`course_utils.ncu.profile` reads hardware counters, which count a warp's access as one
request whatever its lanes did: a store made by all 32 lanes of a warp to one address costs
what a store by lane 0 costs. The source page counts per SASS instruction instead, from a
patched copy of the kernel (the ``SourceCounters`` section): how often it ran, with how many
threads whose predicate was on, and what it accessed (address space and operation). Summed by
access, that is the number of loads and stores the threads really made::

    launches = ncu_source.memory_accesses("mymodule:launch_it", 1024)
    launches[0]["Global Store"]    # thread-level global stores of the first launch

(ncu 2025.3 on an H100 has no hardware counter for thread-level global loads or stores: the
``smsp__sass_thread_inst_executed_op_global_ld`` of older releases is gone, and
``sass__inst_executed_global_loads`` comes back empty.)
"""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from course_utils import env, ncu

THREADS = "Predicated-On Thread Instructions Executed"  # threads that did the access


def parse_source_csv(text: str) -> list[dict[str, str | float]]:
    """``ncu --page source --csv --print-source sass`` -> one dict per profiled launch, in
    order: ``{"kernel": name, "Global Load": threads, "Global Store": ..., "Shared Load": ...}``
    (only the accesses the kernel has; instructions that access no memory are left out)."""
    launches: list[dict[str, str | float]] = []
    header: list[str] | None = None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    for row in csv.reader(lines):
        if row[0] == "Kernel Name":  # each launch: its name, then its own header row
            launches.append({"kernel": row[1]})
            header = None
        elif header is None:
            header = row
            missing = {THREADS, "Address Space", "Access Operation"} - set(header)
            if not launches or missing:
                raise ValueError(f"not ncu's source page (no {sorted(missing) or 'Kernel Name'}"
                                 f"): {row[:4]}...")
        else:
            cells = dict(zip(header, row, strict=False))
            space, op = cells["Address Space"].strip(), cells["Access Operation"].strip()
            if space in ("", "-") or op in ("", "-"):
                continue
            threads = ncu._number(cells[THREADS])
            key = f"{space} {op}"
            launches[-1][key] = launches[-1].get(key, 0.0) + (
                threads if isinstance(threads, float) else 0.0)
    return launches


def memory_accesses(call: str, *args, timeout: float = 600) -> list[dict[str, str | float]]:
    """Profile ``call`` (``"module:function"``, called with ``args``, as
    :func:`course_utils.ncu.profile` does) with the ``SourceCounters`` section and return
    :func:`parse_source_csv` of its source page. Raises RuntimeError with ncu's last lines
    when ncu fails."""
    if reason := ncu.unavailable_reason():
        raise RuntimeError(reason)
    tool = ncu.path() or "ncu"
    with tempfile.TemporaryDirectory(prefix="ncu_source_") as folder:
        spec_file, report = Path(folder) / "spec.json", Path(folder) / "report"
        spec_file.write_text(json.dumps({"call": call, "args": list(args), "kwargs": {},
                                         "setup": ""}))
        steps = ([tool, "--profile-from-start", "off", "--section", "SourceCounters", "-f",
                  "-o", str(report), sys.executable, "-m", "course_utils.ncu", str(spec_file)],
                 [tool, "-i", f"{report}.ncu-rep", "--page", "source", "--csv",
                  "--print-source", "sass"])
        for cmd, profiles in zip(steps, (True, False), strict=True):
            with ncu.counters_lock() if profiles else contextlib.nullcontext():
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                      cwd=env.ROOT, env=env.child_environment())
            if done.returncode != 0 or "==ERROR==" in done.stdout + done.stderr:
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
                raise RuntimeError(f"ncu failed (exit {done.returncode}):\n{tail}")
    return parse_source_csv(done.stdout)
