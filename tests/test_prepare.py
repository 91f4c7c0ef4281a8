"""Lecture mode: make prepare fills the NVRTC cache (the extension builds are tested elsewhere)."""

import pytest

from course import prepare
from course_utils import env, nvrtc


@pytest.mark.skipif(bool(env.unmet("nvrtc", "libcu++")), reason="needs NVRTC and libcu++")
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
    monkeypatch.setitem(env.REQUIREMENTS, "nvrtc", lambda: "no NVRTC in this test")
    monkeypatch.setitem(env.REQUIREMENTS, "cuda", lambda: "no GPU in this test")
    assert prepare.main([]) == 0
    out = capsys.readouterr().out
    assert "NVRTC kernels" in out and "skipped: no NVRTC in this test" in out
    assert "skipped: no GPU in this test" in out
