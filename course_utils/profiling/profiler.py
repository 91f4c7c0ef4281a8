"""Running ``torch.profiler`` around one function: :func:`profile` and :func:`count_kernels`."""

from __future__ import annotations

import json
import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from course_utils import env, timing
from course_utils.profiling.flame import flamegraph_svg, write_folded
from course_utils.profiling.result import Profile
from course_utils.profiling.trace import parse


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"profile(name=...) expected a non-empty string, got {name!r}")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip())


def _run(fn: Callable, args: tuple, kwargs: dict, *, label: str, reps: int, warmup: int,
         device: str | None, with_stack: bool, trace_path: Path):
    """Warm up, profile ``reps`` calls, write the Chrome trace; return (prof, kind, events)."""
    if not callable(fn):
        raise TypeError(f"profile(fn=...) expected a callable, got {type(fn).__name__}: "
                        f"{fn!r:.60}")
    if reps < 1 or warmup < 0:
        raise ValueError(f"profile expected reps >= 1 and warmup >= 0, got reps={reps}, "
                         f"warmup={warmup}")
    fn_name = timing._describe(fn)
    kind = timing._pick_device(device, [*args, *kwargs.values()])
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    for _ in range(warmup):
        timing._call(fn, args, kwargs, fn_name, "warm-up", who="profile")
    sync()

    activities = [torch.profiler.ProfilerActivity.CPU]
    if kind == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with warnings.catch_warnings():
        # torch 2.11 warns that events are cleared after each cycle: we run one cycle
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle")
        with torch.profiler.profile(activities=activities, with_stack=with_stack,
                                    record_shapes=False) as prof:
            # only fn's errors are renamed: the profiler's own (reading its events on the
            # way out, see _profile_with_stacks) pass unchanged
            try:  # fn is called directly (no wrapper), so the stacks start at fn's own frames
                for _ in range(reps):
                    with torch.profiler.record_function(label):
                        fn(*args, **kwargs)
                sync()
            except Exception as err:
                raise RuntimeError(f"profile: {fn_name} raised {type(err).__name__} while "
                                   f"being profiled: {err}") from err
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))
    events = json.loads(trace_path.read_text())["traceEvents"]
    return prof, kind, events


def profile(fn: Callable, *args, name: str, show: bool = True, row_limit: int = 15,
            reps: int = 3, warmup: int = 2, device: str | None = None, **kwargs) -> Profile:
    """Profile ``fn(*args, **kwargs)``; see the module docstring for what is measured.

    ``name`` names the files (``var/stacks_<name>.txt``, ``var/figures/flame_<name>.svg``,
    ``var/traces/<name>.json``). ``device`` ('cpu' or 'cuda') is inferred from the first tensor
    argument, else the default device. With ``show`` the summary, table and flame graph are
    displayed (inline in Jupyter).
    """
    slug = _check_name(name)
    trace_path = env.var_dir("traces") / f"{slug}.json"
    prof, kind, events, table = _profile_with_stacks(
        fn, args, kwargs, label=slug, reps=reps, warmup=warmup, device=device,
        trace_path=trace_path, row_limit=row_limit)
    calls = parse(events, slug, kind)
    kernels = {k: _per_call(n, reps) for k, n in calls.counts.items()}
    kernel_ms = {k: calls.times_us[k] / reps / 1e3 for k in calls.counts}
    wall_ms = calls.wall_us / reps / 1e3

    stacks_path = env.var_dir() / f"stacks_{slug}.txt"
    cpu_stacks_path = None
    if kind == "cuda":
        write_folded(stacks_path, calls.device_stacks)
        cpu_stacks_path = env.var_dir() / f"stacks_{slug}_cpu.txt"
        write_folded(cpu_stacks_path, calls.cpu_stacks)
        metric = "device time (µs)"
    else:
        write_folded(stacks_path, calls.cpu_stacks)
        metric = "self CPU time (µs)"
    flame_path = env.var_dir("figures") / f"flame_{slug}.svg"
    flame_title = f"{slug}: {metric}, {reps} calls"
    flame_path.write_text(flamegraph_svg(
        calls.device_stacks if kind == "cuda" else calls.cpu_stacks, title=flame_title))

    result = Profile(name=slug, device=kind, reps=reps, table=table, kernels=kernels,
                     kernel_ms=kernel_ms, wall_ms=wall_ms, stacks_path=stacks_path,
                     flamegraph_path=flame_path, trace_path=trace_path,
                     cpu_stacks_path=cpu_stacks_path, metric=metric)
    if show:
        result.show()
    return result


# CPU-only torch 2.13.0 raises UnicodeDecodeError while reading the events of a profile with
# Python stacks, in about 1 of 30 profiles (never with 2.14.1, never without with_stack; COURSE.md,
# "Known traps"). A student's cell must still finish: try again, then profile without stacks.
STACK_ATTEMPTS = 3


def _profile_with_stacks(fn: Callable, args: tuple, kwargs: dict, *, row_limit: int,
                         **run_options):
    """:func:`_run` with Python stacks and the table read from its events; after
    ``STACK_ATTEMPTS`` profiles that torch could not read, one without stacks, said in a line.
    Returns (prof, kind, events, table)."""
    for _ in range(STACK_ATTEMPTS):
        try:
            prof, kind, events = _run(fn, args, kwargs, with_stack=True, **run_options)
            return prof, kind, events, _table(prof, kind, row_limit)
        except UnicodeDecodeError:
            continue  # the profiler's bug, not fn's: fn's own errors come as RuntimeError
    print(f"profile: torch {torch.__version__} failed {STACK_ATTEMPTS} times to read the Python "
          "stacks of its profile (UnicodeDecodeError, a known bug of torch 2.13): profiled "
          "without stacks, so the flame graph shows ops, not Python lines")
    prof, kind, events = _run(fn, args, kwargs, with_stack=False, **run_options)
    return prof, kind, events, _table(prof, kind, row_limit)


def count_kernels(fn: Callable, *args, device: str | None = None, **kwargs) -> dict[str, int]:
    """Kernels one call of ``fn(*args, **kwargs)`` launches: ``{name: count}``.

    On a GPU: CUDA kernels; on the CPU: ATen ops with a CPU kernel (see the module docstring).
    ``fn`` is called once first (warm-up: compilation and one-off set-up launch kernels too).
    """
    with tempfile.TemporaryDirectory() as tmp:
        _, kind, events = _run(fn, args, kwargs, label="count_kernels", reps=1, warmup=1,
                               device=device, with_stack=False,
                               trace_path=Path(tmp) / "trace.json")
    return dict(parse(events, "count_kernels", kind).counts)


def _per_call(total: int, reps: int) -> float:
    return total // reps if total % reps == 0 else round(total / reps, 2)


# Python frames recorded by with_stack=True: "file.py(12): fn", "<string>(6): <module>",
# "<built-in method ...>". Some torch versions (2.13) list them in key_averages(), where the
# profiler's own start-up frames then crowd out the ops; the stacks and the trace keep them.
_PYTHON_FRAME = re.compile(r"^(<built-in .*>|.*\(\d+\): .*)$")


def _table(prof, kind: str, row_limit: int) -> str:
    averages = prof.key_averages()
    averages[:] = [e for e in averages if not _PYTHON_FRAME.match(e.key)]
    keys = ["device_time_total", "cuda_time_total"] if kind == "cuda" else ["cpu_time_total"]
    for key in keys:  # torch renamed cuda_time to device_time; keep both working
        try:
            return averages.table(sort_by=key, row_limit=row_limit, max_name_column_width=70)
        except (AttributeError, KeyError):
            continue
    return averages.table(row_limit=row_limit, max_name_column_width=70)

