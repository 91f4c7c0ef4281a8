"""Shared test set-up: GPU tests skip without a GPU, and fail instead under COURSE_STRICT=1;
cells and tests that skipped for a missing optional extra are listed at the end of the run."""

import os
from pathlib import Path

import pytest

from course_utils import env


def pytest_configure(config):
    # The controller picks the log; xdist workers and the notebook kernels they start inherit
    # the variable, and env.requires appends a line there for each optional-extra skip.
    if env.OPTIONAL_SKIP_LOG not in os.environ:
        log = env.var_dir("pytest") / f"optional-skips-{os.getpid()}.log"
        log.unlink(missing_ok=True)
        os.environ[env.OPTIONAL_SKIP_LOG] = str(log)
        config._course_optional_log = log


def pytest_collection_modifyitems(config, items):
    if env.HAS_CUDA:
        return
    reason = f"needs a CUDA GPU: {'; '.join(env.unmet('cuda'))}"
    for item in items:
        if "gpu" in item.keywords:
            if env.STRICT:
                item.add_marker(pytest.mark.xfail(reason=reason + " (COURSE_STRICT=1)",
                                                  run=False, strict=True))
            else:
                item.add_marker(pytest.mark.skip(reason=reason))


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
