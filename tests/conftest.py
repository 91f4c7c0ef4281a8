"""Shared test set-up: GPU tests skip without a GPU, and fail instead under COURSE_STRICT=1;
cells and tests that skipped for a missing optional extra are listed at the end of the run."""

import os
import re
from pathlib import Path

import pytest

from course_utils import env, requirements, shared_gpu


def pytest_configure(config):
    # The controller picks the log; xdist workers and the notebook kernels they start inherit
    # the variable, and requirements.requires appends a line there for each optional-extra skip.
    if requirements.OPTIONAL_SKIP_LOG not in os.environ:
        log = env.var_dir("pytest") / f"optional-skips-{os.getpid()}.log"
        log.unlink(missing_ok=True)
        os.environ[requirements.OPTIONAL_SKIP_LOG] = str(log)
        config._course_optional_log = log


# Files whose tests are independent and slow on a GPU (a child process, compute-sanitizer,
# Nsight Compute, a build per kernel): under `--dist loadfile` (the Makefile's) each of their
# parametrised cases goes to a worker of its own, where a whole file would queue for minutes
# in one; every other file stays whole in one worker (a notebook's cells share one kernel).
SPREAD = ("tests/test_exercises.py", "tests/test_supports_edges.py")
# ...except the cases of an exercise whose check keeps rank processes between its checks (four
# gloo processes that each import torch: most of a check's time): those stay together in one
# worker, one after another, so that every case after the first finds the ranks started
POOLED = re.compile(r"\[(distributed\.(?:halves|fsdp_backward))\b")


# (optional: `pytest -p no:xdist`, or a machine without pytest-xdist, has no such hook, and a
# plain hook would stop the run with "unknown hook")
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class CaseByCaseWhereSlow(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in SPREAD or "[" not in nodeid:
                return path
            pooled = POOLED.search(nodeid)
            return f"{path}::{pooled[1]}" if pooled else nodeid

    return CaseByCaseWhereSlow(config, log)


def pytest_collection_modifyitems(config, items):
    if env.HAS_CUDA:
        # a test of two ranks on one GPU's machine skips, strict or not (fewer GPUs than
        # ranks is the normal GPU box); with no GPU at all it is a GPU test like the others
        if reasons := requirements.unmet("gpus2"):
            for item in items:
                if "gpus2" in item.keywords:
                    item.add_marker(pytest.mark.skip(reason="; ".join(reasons)))
        return
    reason = f"needs a CUDA GPU: {'; '.join(requirements.unmet('cuda'))}"
    for item in items:
        if "gpu" in item.keywords or "gpus2" in item.keywords:
            if env.STRICT:
                item.add_marker(pytest.mark.xfail(reason=reason + " (COURSE_STRICT=1)",
                                                  run=False, strict=True))
            else:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _share_the_gpu():
    """Under COURSE_SHARED_GPU=1 (make test-gpu) each test gives the allocator's cache back."""
    yield
    if shared_gpu.SHARED:
        shared_gpu.give_back_cached_memory()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    log: Path | None = getattr(config, "_course_optional_log", None)
    if log is None or not log.exists():
        return
    lines = sorted(set(log.read_text().splitlines()))
    if lines:
        terminalreporter.section("optional extras not installed (skipped, allowed)")
        for line in lines:
            terminalreporter.write_line(line)
    log.unlink(missing_ok=True)
