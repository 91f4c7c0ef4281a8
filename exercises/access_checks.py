"""The property a CUDA exercise teaches, from Nsight Compute's counters: coalescing (global
sectors per sector of data), bank conflicts (shared-memory wavefronts per instruction) and the
accesses threads really make (16-byte or 4-byte). On a GPU the answer's kernel is profiled in a
child under ``ncu`` (:func:`access_counters`); where ncu cannot measure here, a line says so,
and under COURSE_STRICT=1 that is "cannot check here" (:func:`unmeasured`). Without a GPU the
same counters come from the CPU runner, which sees every address of every warp
(:mod:`course_utils.cuda_on_cpu`).
"""

from __future__ import annotations

import importlib
import subprocess
from collections.abc import Callable
from pathlib import Path

from course_utils import env
from exercises import CannotCheck, Report
from exercises.kernel_checks import child_source_file

# the profiling call of each exercise whose property Nsight Compute measures: "module:function
# (source) -> a callable launching the answer's kernel on the profiled cases"
PROFILES = {
    "cuda_gelu.silu": "exercises.cuda_gelu:silu_profile",
    "cuda_gelu.transpose": "exercises.cuda_gelu_kernels:transpose_profile",
    "cuda_gelu.warp_sum": "exercises.cuda_gelu_kernels:warp_sum_profile",
    "first_kernels.flip_rows": "exercises.first_kernels:flip_profile",
}
# --------------------------------------------------------------------------------------------
# On a GPU: the property the lesson teaches, from Nsight Compute's counters
# --------------------------------------------------------------------------------------------

# per launch: global sectors and requests (coalescing), shared-memory wavefronts per
# instruction (bank conflicts: 1 wavefront for a conflict-free 4-byte access, 32 for 32-way)
ACCESS_METRICS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
)
# thread-level global loads and stores, from Nsight Compute's source page
# (:mod:`course_utils.ncu_source`): the hardware counters count a warp's access once, whatever
# its lanes did
THREAD_METRICS = ("threads: Global Load", "threads: Global Store")


def profile_setup(id: str, path: str):
    """Runs under ncu (:func:`course_utils.ncu.profile`'s child): the call that launches the
    answer in file ``path`` on exercise ``id``'s profiled cases (:data:`PROFILES`)."""
    module, function = PROFILES[id].split(":")
    return getattr(importlib.import_module(module), function)(Path(path).read_text())


def access_counters(id: str, source: str, kernel: str, timeout: float = 600) -> list[dict] | str:
    """Nsight Compute's counters (:data:`ACCESS_METRICS`, and :data:`THREAD_METRICS` where its
    source page could be read) of each launch of ``kernel`` in exercise ``id``'s profiling
    call, in launch order; or a string saying why they could not be read (no ncu, no
    permission for the counters)."""
    from course_utils import ncu, ncu_source

    if not env.HAS_CUDA:  # the CPU runner counts what ncu would (the same metric names)
        from exercises.kernel_checks import cpu_launches

        cpu_launches(kernel)  # forget earlier launches
        profile_setup(id, str(child_source_file(id, source)))()
        return cpu_launches(kernel)
    if reason := ncu.unavailable_reason():
        return reason
    call, path = f"{__name__}:profile_setup", str(child_source_file(id, source))
    try:
        found = ncu.profile(call, id, path, sections=(), metrics=ACCESS_METRICS, label=id,
                            timeout=timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        return f"Nsight Compute could not profile it: {_first_error(err)}"
    launches = [k.metrics for k in found.kernels if kernel in k.name]
    try:
        counted = [c for c in ncu_source.memory_accesses(call, id, path, timeout=timeout)
                   if kernel in str(c["kernel"])]
    except (RuntimeError, ValueError, subprocess.TimeoutExpired):
        counted = []  # the verdicts say what they could not check without them
    if len(counted) == len(launches):
        for launch, threads in zip(launches, counted, strict=True):
            launch.update({m: float(threads.get(m.removeprefix("threads: "), 0.0))
                           for m in THREAD_METRICS})
    return launches


def _first_error(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    line = next((ln for ln in lines if "ERR_NVGPUCTRPERM" in ln or "==ERROR==" in ln),
                lines[-1] if lines else "ncu failed")
    return line[:300]


def per_use(launch: dict, op: str, nbytes: int) -> float | None:
    """Global ``op`` ("ld" or "st") sectors the launch moved per 32-byte sector of data it had
    to move (``nbytes``): 1 when every byte fetched is used (coalesced), up to 8 when each
    4-byte access of a warp costs a sector of its own (strided). None where not measured."""
    sectors = launch.get(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum")
    if not isinstance(sectors, float) or not sectors or nbytes <= 0:
        return None  # none counted for a launch that must move bytes: not measured, not ideal
    return sectors / (nbytes / 32)


def wavefronts(launch: dict, op: str) -> float | None:
    """Shared-memory wavefronts per ``op`` ("ld" or "st") instruction of the launch: 1 without
    bank conflicts (4-byte accesses), k for a k-way conflict. None where not measured."""
    waves = launch.get(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum")
    count = launch.get(f"smsp__sass_inst_executed_op_shared_{op}.sum")
    if not isinstance(waves, float) or not isinstance(count, float) or not count:
        return None
    return waves / count


UNMEASURED = "not verified on this GPU: "  # how a line about a measurement not made starts


def unmeasured(report: Report, what: str, why: str) -> None:
    """``what`` could not be measured on this GPU: a report line saying so (the check may still
    pass on the values), and under COURSE_STRICT=1 CannotCheck (a GPU run must not pass by
    skipping a measurement)."""
    line = f"{UNMEASURED}{what} ({why})"
    if env.STRICT:
        raise CannotCheck(line + "; COURSE_STRICT=1 needs it measured")
    report.line(line)


def expect_access(id: str, source: str, kernel: str, report: Report, what: str,
                  verdict: Callable[[list[dict]], list[str]]) -> None:
    """Profile exercise ``id``'s answer under Nsight Compute and let ``verdict`` (launches ->
    report lines, a Mismatch where the property fails, a line starting with
    :data:`UNMEASURED` for a counter this ncu did not give) judge it; where ncu cannot measure
    here, :func:`unmeasured`."""
    found = access_counters(id, source, kernel)
    if isinstance(found, str):
        unmeasured(report, what, found)
        return
    if not found:
        unmeasured(report, what, f"Nsight Compute profiled no launch of {kernel}")
        return
    for line in verdict(found):
        if line.startswith(UNMEASURED):
            unmeasured(report, line[len(UNMEASURED):], "a counter missing")
        else:
            report.line(line)
