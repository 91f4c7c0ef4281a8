"""Nsight Compute from a notebook: profile the kernels of ONE call, get a table and a figure.

``ncu`` replays each kernel several times to collect hardware counters, so it cannot profile a
notebook's own process; :func:`profile` starts a child Python under ``ncu`` instead::

    from course_utils import ncu
    report = ncu.profile("mma.matmul(a, b, 'bf16')",
                         setup="from kernels.matmul import autotune, mma\\n"
                               "a, b = autotune.operands(mma.variant('bf16'), 4096, 4096, 4096)")
    print(report)              # speed of light, occupancy, bank conflicts, top stall reasons
    report.figure()            # where the warps wait: stall reasons as bars

``call`` is a Python expression evaluated after ``setup`` in the child, or ``"module:function"``
with JSON-able ``args``/``kwargs``: the function is called with them and, if it returns a
callable, that callable is the call to profile (the function was the set-up); otherwise the
function itself is the call. The child runs the call once un-profiled (compilation, autotuning,
caches), synchronises, and only then opens the profiler (``cudaProfilerStart``) around one more
call: with ``ncu --profile-from-start off`` only the kernels of that call are measured.

Sections (``--section``): ``SpeedOfLight`` (how busy compute and memory are, as % of peak),
``Occupancy`` (warps per SM and what limits them), ``WarpStateStats`` (stall reasons: per issued
instruction, how many cycles a warp waited, by reason), plus metrics for the tensor pipe and
shared-memory bank conflicts. The child writes ``--csv --page raw`` (one row per kernel, one
column per metric), which :func:`parse_csv` reads; nothing depends on ncu's text layout.

ncu locks the GPU clock to its base frequency while it measures (``--clock-control base``, the
default), so durations here are longer than a benchmark's: read the percentages, not the times.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course_utils import env

SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats")
# Beyond the sections: tensor-pipe activity and shared-memory bank conflicts (ldmatrix,
# ld.shared and st.shared all go through the LSU's shared-memory path).
METRICS = (
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
)

# The rows of the summary table: (label, metric, unit shown). Missing metrics print as "n/a".
SUMMARY = (
    ("duration (base clock)", "gpu__time_duration.sum", "us"),
    ("compute (SM) throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    ("memory throughput", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    ("DRAM throughput", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    ("L1/shared throughput", "l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
    ("L2 throughput", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    ("tensor pipe busy", METRICS[0], "%"),
    ("registers per thread", "launch__registers_per_thread", ""),
    ("block size", "launch__block_size", ""),
    ("grid size", "launch__grid_size", ""),
    ("theoretical occupancy", "sm__maximum_warps_per_active_cycle_pct", "%"),
    ("achieved occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
    ("achieved warps per SM", "sm__warps_active.avg.per_cycle_active", ""),
    ("blocks/SM limit: registers", "launch__occupancy_limit_registers", ""),
    ("blocks/SM limit: shared mem", "launch__occupancy_limit_shared_mem", ""),
    ("cycles per issued instruction", "smsp__average_warp_latency_per_inst_issued.ratio", ""),
)
# smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio: cycles a warp spent stalled
# for <reason>, per instruction issued. Summed over reasons, it is the gap between issues.
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# What each stall reason means, in the words a lesson uses (ncu's own names as keys).
STALL_MEANING = {
    "wait": "fixed-latency dependency (a fixed wait after an instruction)",
    "long_scoreboard": "waiting for global/local memory (L1TEX)",
    "short_scoreboard": "waiting for shared memory or MUFU",
    "barrier": "waiting at __syncthreads",
    "math_pipe_throttle": "the math pipe (e.g. tensor cores) is busy",
    "mio_throttle": "shared-memory instruction queue full",
    "lg_throttle": "global/local memory queue full",
    "not_selected": "ready, another warp issued",
    "selected": "issuing",
    "dispatch_stall": "dispatch stall",
    "no_instruction": "instruction fetch",
    "branch_resolving": "branch resolving",
    "membar": "memory barrier",
    "drain": "draining stores at exit",
    "sleeping": "sleeping",
    "tex_throttle": "texture queue full",
    "imc_miss": "constant cache miss",
    "misc": "other",
}


def path() -> str | None:
    """The ``ncu`` executable (PATH, else the CUDA toolkit's bin/), or None."""
    found = shutil.which("ncu")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "ncu").exists():
            return str(Path(home) / "bin" / "ncu")
    return None


def unavailable_reason() -> str | None:
    """None when ``ncu`` can profile here; otherwise why not (for ``%%requires ncu``)."""
    if path() is None:
        return "Nsight Compute (ncu) not found (it ships with the CUDA toolkit: $CUDA_HOME/bin)"
    return None


# --------------------------------------------------------------------------------------------
# Parsing: ncu --csv --page raw
# --------------------------------------------------------------------------------------------


def _number(text: str) -> float | str | None:
    """ncu's cell as a number where it is one ("4,606,513" -> 4606513.0), else the text."""
    text = text.strip()
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text


@dataclasses.dataclass
class Kernel:
    """One profiled kernel launch: its name and every metric ncu reported for it."""

    name: str
    metrics: dict[str, float | str | None]
    units: dict[str, str]

    def get(self, metric: str) -> float | str | None:
        return self.metrics.get(metric)

    def microseconds(self) -> float | None:
        """The kernel's duration in µs, whatever unit ncu printed it in."""
        value = self.get("gpu__time_duration.sum")
        if not isinstance(value, float):
            return None
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
                 "msecond": 1e3, "s": 1e6, "second": 1e6}
        return value * scale.get(self.units.get("gpu__time_duration.sum", "ns"), 1e-3)

    @property
    def stalls(self) -> dict[str, float]:
        """Stall reason -> cycles per issued instruction, largest first ("selected" is the
        issuing itself, not a stall: left out)."""
        found = {}
        for metric, value in self.metrics.items():
            if (match := STALL.match(metric)) and isinstance(value, float):
                reason = match.group(1)
                if reason != "selected":
                    found[reason] = value
        return dict(sorted(found.items(), key=lambda item: -item[1]))

    @property
    def bank_conflict_pct(self) -> float | None:
        """Shared-memory bank conflicts as % of the shared-memory wavefronts (0: none)."""
        conflicts = self.get(METRICS[2])
        wavefronts = self.get(METRICS[3])
        if isinstance(conflicts, float) and isinstance(wavefronts, float) and wavefronts:
            return 100.0 * conflicts / wavefronts
        return None

    def summary(self) -> dict[str, float | str | None]:
        """The numbers a lesson reads, by label (see :data:`SUMMARY`)."""
        out: dict[str, float | str | None] = {}
        for label, metric, _unit in SUMMARY:
            out[label] = self.microseconds() if metric == "gpu__time_duration.sum" else \
                self.get(metric)
        out["shared bank conflicts"] = self.bank_conflict_pct
        stalls = self.stalls
        for rank, (reason, cycles) in enumerate(list(stalls.items())[:3], start=1):
            out[f"stall #{rank}"] = f"{reason} {cycles:.2f}"
        return out


def parse_csv(text: str) -> list[Kernel]:
    """The kernels of ``ncu --csv --page raw`` output: a header row of metric names, a row of
    units, then one row per kernel. Lines ncu prints around the table (``==PROF==``, the
    program's own output) are skipped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    if "Kernel Name" not in header:
        raise ValueError("ncu output expected a --page raw CSV header with 'Kernel Name', "
                         f"got columns {header[:5]}...")
    units_row = rows[1] if len(rows) > 1 and not rows[1][header.index("ID")].strip() else None
    body = rows[2:] if units_row else rows[1:]
    units = dict(zip(header, units_row, strict=False)) if units_row else {}
    kernels = []
    for row in body:
        cells = dict(zip(header, row, strict=False))
        metrics = {name: _number(value) for name, value in cells.items()}
        kernels.append(Kernel(name=cells["Kernel Name"], metrics=metrics,
                              units={k: v for k, v in units.items() if v}))
    return kernels


# --------------------------------------------------------------------------------------------
# Profiling: the child process
# --------------------------------------------------------------------------------------------

_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _child(spec: dict) -> None:
    """Runs inside ``ncu``: set up, one warm-up call, then one call between profiler start/stop."""
    import importlib

    import torch

    if _TARGET.match(spec["call"]):
        module, name = spec["call"].split(":")
        function = getattr(importlib.import_module(module), name)
        made = function(*spec["args"], **spec["kwargs"])
        if callable(made):  # set-up that returned the call: warm it up
            call = made
            call()
        else:  # the function is the call, and its first run was the warm-up
            call = lambda: function(*spec["args"], **spec["kwargs"])  # noqa: E731
    else:
        namespace: dict = {}
        exec(spec["setup"], namespace)  # noqa: S102  (the notebook's own set-up code)
        call = lambda: eval(spec["call"], namespace)  # noqa: E731, S307
        call()  # warm-up: compile, tune, allocate, fill caches; not profiled
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


@dataclasses.dataclass
class Report:
    """What :func:`profile` measured: the kernels of one call (usually one) and how."""

    label: str
    kernels: list[Kernel]
    command: str
    raw: str  # the CSV as ncu wrote it (save it to replay the parsing without a GPU)

    def table(self) -> list[dict]:
        """One row per summary metric, one column per kernel of the call."""
        if not self.kernels:
            return []
        summaries = [k.summary() for k in self.kernels]
        columns = [_short(k.name) for k in self.kernels]
        return [{"metric": label, **{col: s.get(label) for col, s in
                                     zip(columns, summaries, strict=True)}}
                for label in summaries[0]]

    def __str__(self) -> str:
        from course_utils import plots

        if not self.kernels:
            return f"{self.label}: ncu profiled no kernel (did the call launch one?)"
        return plots.stamped_table(self.table(), title=f"Nsight Compute: {self.label}")

    @property
    def main(self) -> Kernel:
        """The call's longest kernel (a call may launch small helper kernels beside it)."""
        return max(self.kernels, key=lambda k: k.microseconds() or 0.0)

    def per_kernel(self, labels: list[str] | tuple[str, ...] | None = None) -> list[Report]:
        """One report per kernel of the call, labelled ``labels`` (default: kernel names).

        Profiling two kernels in one call (``"f(x), g(x)"``) starts ncu, Python and CUDA once
        instead of twice (about 20 s each on the H100 box); :func:`compare` and
        :func:`stall_figure` then show them side by side like two separate profiles."""
        if labels is not None and len(labels) != len(self.kernels):
            names = ", ".join(k.name for k in self.kernels) or "none"
            raise ValueError(f"labels: expected one per kernel of the call ({len(self.kernels)}: "
                             f"{names}), got {len(labels)}")
        labels = labels or [_short(k.name) for k in self.kernels]
        return [dataclasses.replace(self, label=label, kernels=[kernel])
                for label, kernel in zip(labels, self.kernels, strict=True)]

    def figure(self, top: int = 8, stamp: bool = True):
        """Stall reasons of the call's longest kernel as horizontal bars (cycles per issued
        instruction): the longest bar is what the warps mostly wait for."""
        return stall_figure([self], top=top, stamp=stamp)


def compare(reports: list[Report]) -> str:
    """One stamped table with the longest kernel of each report side by side."""
    from course_utils import plots

    rows: dict[str, dict] = {}
    for report in reports:
        if not report.kernels:
            continue
        for label, value in report.main.summary().items():
            rows.setdefault(label, {"metric": label})[report.label] = value
    labels = [r.label for r in reports if r.kernels]
    for row in rows.values():  # every column in every row, so the table lines up
        for label in labels:
            row.setdefault(label, None)
    return plots.stamped_table(list(rows.values()), title="Nsight Compute")


def stall_figure(reports: list[Report], top: int = 8, stamp: bool = True):
    """Grouped horizontal bars: the ``top`` stall reasons (of all reports together) of each
    report's longest kernel, in cycles per issued instruction. Stamped with the environment
    unless ``stamp=False`` (for ``plots.save``, which stamps what it saves)."""
    from course_utils import plots

    mains = [(r.label, r.main) for r in reports if r.kernels]
    totals: dict[str, float] = {}
    for _label, kernel in mains:
        for reason, cycles in kernel.stalls.items():
            totals[reason] = totals.get(reason, 0.0) + cycles
    reasons = sorted(totals, key=lambda reason: totals[reason])[-top:]
    fig, ax = plots.figure("Warp stall reasons (Nsight Compute)",
                           xlabel="cycles stalled per issued instruction",
                           figsize=(9, 1.5 + 0.3 * max(len(reasons), 1) * max(len(mains), 1)))
    height = 0.8 / max(len(mains), 1)
    for n, (label, kernel) in enumerate(mains):
        stalls = kernel.stalls
        # the first report's bar on top within each group, as in the legend
        ax.barh([i + (len(mains) - 1 - n) * height for i in range(len(reasons))],
                [stalls.get(reason, 0.0) for reason in reasons], height=height, label=label)
    ax.set_yticks([i + height * (len(mains) - 1) / 2 for i in range(len(reasons))],
                  [f"{reason}: {STALL_MEANING.get(reason, reason)}" for reason in reasons],
                  fontsize=8)
    if len(mains) > 1:
        ax.legend()
    fig.tight_layout()
    if stamp:
        plots.stamp(fig)
    return fig


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def command(spec_file: str, sections=SECTIONS, metrics=METRICS, log_file: str = "") -> list[str]:
    """The ncu command line :func:`profile` runs (a list, for ``subprocess``)."""
    ncu = path() or "ncu"
    cmd = [ncu, "--profile-from-start", "off", "--csv", "--page", "raw",
           "--print-units", "base"]
    for section in sections:
        cmd += ["--section", section]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    if log_file:
        cmd += ["--log-file", log_file]
    return [*cmd, sys.executable, "-m", "course_utils.ncu", spec_file]


@contextlib.contextmanager
def counters_lock():
    """One ncu at a time on this machine: two profiling the GPU at once fail ("LaunchFailed",
    "An error was reported by the counter measurement library", seen on an H100 with 16
    checks in parallel), so each waits for the lock file in var/ (held only while ncu runs)."""
    try:
        import fcntl
    except ImportError:  # not on Linux: no lock (and no ncu run in parallel there, we expect)
        yield
        return
    with open(env.var_dir() / "ncu.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def profile(call: str, *args, setup: str = "", label: str | None = None,
            sections=SECTIONS, metrics=METRICS, timeout: float = 600, **kwargs) -> Report:
    """Profile the kernels of one call under ``ncu`` (see the module docstring).

    ``call``: ``"module:function"`` (called with ``args``/``kwargs``, which must be JSON-able) or
    a Python expression evaluated after ``setup``. Returns a :class:`Report`; raises
    RuntimeError with ncu's last lines when the child fails (no GPU, no permission to read the
    counters, an exception in the call).
    """
    if reason := unavailable_reason():
        raise RuntimeError(reason)
    if not _TARGET.match(call) and (args or kwargs):
        raise ValueError(f"args/kwargs go with a 'module:function' call, got the expression "
                         f"{call!r}: put the values in the expression or in setup")
    spec = {"call": call, "args": list(args), "kwargs": kwargs, "setup": setup}
    with tempfile.TemporaryDirectory(prefix="ncu_") as folder:
        spec_file = Path(folder) / "spec.json"
        spec_file.write_text(json.dumps(spec))
        log = Path(folder) / "ncu.csv"
        cmd = command(str(spec_file), sections, metrics, str(log))
        with counters_lock():
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=env.ROOT, env=env.child_environment())
        raw = log.read_text() if log.exists() else ""
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0 or "==ERROR==" in raw + output:
        tail = "\n".join((raw + "\n" + output).strip().splitlines()[-12:])
        raise RuntimeError(f"ncu failed (exit {done.returncode}):\n{tail}")
    shown = " ".join(c if "/" not in c else c.rsplit("/", 1)[-1] for c in cmd)
    return Report(label or call, parse_csv(raw), shown, raw)


if __name__ == "__main__":  # the child: python -m course_utils.ncu spec.json (under ncu)
    _child(json.loads(Path(sys.argv[1]).read_text()))
