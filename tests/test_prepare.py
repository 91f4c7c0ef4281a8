"""Lecture mode: make prepare fills the NVRTC cache (the extension builds are tested elsewhere)."""

import re
import threading

import pytest

from course import prepare
from course_utils import env, nvrtc, requirements


@pytest.mark.skipif(bool(requirements.unmet("nvrtc", "libcu++")), reason="needs NVRTC and libcu++")
def test_nvrtc_step_fills_the_cache(tmp_path):
    with nvrtc.use_cache_dir(tmp_path):
        nvrtc.clear_memory_cache()
        path = nvrtc.kernel_sources()[0]
        summary = prepare._nvrtc([path])  # one file: every file takes a minute on a CI box
        nvrtc.clear_memory_cache()  # as in the notebook's fresh kernel
        name, defines = nvrtc.examples(path)[0]
        again = nvrtc.compile(path, name, defines=defines, arch=env.device_info().arch,
                              verbose=False)
    assert summary.endswith(f"cached for {env.device_info().arch or nvrtc.DEFAULT_ARCH}")
    assert int(summary.split()[0]) == 2 * len(nvrtc.examples(path))  # cubin and PTX each
    assert again.cache == "disk hit"


def test_a_step_that_cannot_run_says_why(monkeypatch, capsys):
    monkeypatch.setattr(prepare, "_extensions", lambda: [])
    monkeypatch.setitem(requirements.REQUIREMENTS, "nvrtc", lambda: "no NVRTC in this test")
    monkeypatch.setitem(requirements.REQUIREMENTS, "cuda", lambda: "no GPU in this test")
    assert prepare.main([]) == 0
    out = capsys.readouterr().out
    assert "NVRTC kernels" in out and "skipped: no NVRTC in this test" in out
    assert "skipped: no GPU in this test" in out


def _only_these_builds(monkeypatch, steps):
    """prepare.main with ``steps`` as its extension builds and every other step skipped."""
    monkeypatch.setattr(prepare, "_extensions", lambda: steps)
    monkeypatch.setitem(requirements.REQUIREMENTS, "nvcc", lambda: None)
    monkeypatch.setitem(requirements.REQUIREMENTS, "cxx", lambda: None)
    monkeypatch.setitem(requirements.REQUIREMENTS, "nvrtc", lambda: "not in this test")
    monkeypatch.setitem(requirements.REQUIREMENTS, "cuda", lambda: "not in this test")


def test_the_builds_run_side_by_side_and_each_reports(monkeypatch, capsys):
    # two builds that can only finish together: run one after the other, the barrier breaks
    both = threading.Barrier(2, timeout=10)
    _only_these_builds(monkeypatch, [("first", both.wait), ("second", both.wait)])
    assert prepare.main([]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^first +\d+\.\d s  ready$", out, re.M), out
    assert re.search(r"^second +\d+\.\d s  ready$", out, re.M), out


def test_a_failed_build_is_reported_and_fails_the_command(monkeypatch, capsys):
    def broken():
        raise RuntimeError("nvcc said no")

    _only_these_builds(monkeypatch, [("broken", broken), ("fine", lambda: "built")])
    assert prepare.main([]) == 1
    out = capsys.readouterr().out
    assert "broken                           FAILED after" in out
    assert "RuntimeError: nvcc said no" in out and re.search(r"^fine +\d+\.\d s  built$", out, re.M)
