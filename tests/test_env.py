"""course_utils.env: requirements with reasons, device description, environment stamp."""

import os
import re

import pytest
import torch

from course_utils import env, requirements


def test_default_device_matches_torch():
    assert env.HAS_CUDA == torch.cuda.is_available()
    assert env.DEFAULT_DEVICE == ("cuda" if env.HAS_CUDA else "cpu")


def test_triton_runs_in_its_interpreter_without_a_gpu():
    if not env.HAS_CUDA:
        assert os.environ.get("TRITON_INTERPRET") == "1"
        assert env.TRITON_INTERPRET


def test_cuda_requirement_has_a_reason_exactly_when_there_is_no_gpu():
    reasons = requirements.unmet("cuda")
    if env.HAS_CUDA:
        assert reasons == []
    else:
        assert len(reasons) == 1 and reasons[0].startswith("no CUDA GPU")


def test_arch_requirements_compare_compute_capability():
    assert requirements.unmet("sm_999")  # no GPU has that, on any machine
    if env.HAS_CUDA:
        assert requirements.unmet(env.device_info().arch) == []
        arch = env.device_info().arch
        assert requirements.unmet("sm_999") == [f"needs sm_999+; this GPU is {arch}"]
    # case and underscore do not matter
    assert requirements.unmet("SM90") == requirements.unmet("sm_90")


def test_unknown_requirement_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        requirements.unmet("cuda", "gpux")
    message = str(err.value)
    assert "'gpux'" in message
    for known in ("cuda", "nvcc", "nvrtc", "triton-gpu", "sm_XY"):
        assert known in message


def test_requires_prints_one_line_and_returns_false(monkeypatch, capsys):
    monkeypatch.setitem(requirements.REQUIREMENTS, "never", lambda: "the test says no")
    monkeypatch.setitem(requirements.REQUIREMENTS, "always", lambda: None)
    monkeypatch.setattr(env, "STRICT", False)
    assert requirements.requires("always") is True
    assert capsys.readouterr().out == ""
    assert requirements.requires("always", "never") is False
    assert capsys.readouterr().out == ("skipped this cell: needs always never: "
                                       "the test says no\n")


def test_strict_mode_makes_an_unmet_requirement_an_error(monkeypatch):
    monkeypatch.setitem(requirements.REQUIREMENTS, "never", lambda: "the test says no")
    monkeypatch.setattr(env, "STRICT", True)
    with pytest.raises(requirements.RequirementError, match="the test says no.*COURSE_STRICT=1"):
        requirements.requires("never")


def test_device_slug():
    assert env.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert env.device_slug("NVIDIA GeForce RTX 4090") == "nvidia-geforce-rtx-4090"
    assert env.device_slug() == env.device_slug(env.device_info().name)


def test_datasheet_peaks_pick_the_right_variant():
    assert env.peaks_for("NVIDIA H100 80GB HBM3")["bfloat16"] == 989
    assert env.peaks_for("NVIDIA H100 PCIe")["bfloat16"] == 756  # not the SXM figure
    assert env.peaks_for("NVIDIA H200")["bandwidth_gbs"] == 4800
    assert env.peaks_for("Some Future GPU") == {}
    info = env.DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda", capability=(9, 0),
                          peaks=env.peaks_for("NVIDIA H100 80GB HBM3"))
    assert info.arch == "sm_90"
    assert info.peak_tflops(torch.bfloat16) == 989
    assert info.peak_tflops("float8_e4m3fn") == 1979
    assert info.peak_tflops(torch.float64) is None


def test_device_info_describes_this_machine():
    info = env.device_info()
    assert info.kind == env.DEFAULT_DEVICE
    assert info.name
    if info.kind == "cpu":
        assert info.arch is None and str(info).startswith("CPU: ")
    else:
        assert info.sms > 0 and info.memory_gb > 0 and info.arch.startswith("sm_")


def test_environment_stamp(monkeypatch):
    stamp = env.environment()
    assert {"device", "driver", "cuda", "torch", "triton", "python", "git", "date"} <= set(stamp)
    assert stamp["torch"] == torch.__version__
    line = env.environment_line()
    assert stamp["device"] in line and f"torch {torch.__version__}" in line
    monkeypatch.setenv("COURSE_GIT_REVISION", "abc1234")
    assert env.git_revision() == "abc1234"


def test_var_dir_is_created_under_var():
    path = env.var_dir("test_env_scratch")
    assert path.is_dir() and path.parent == env.VAR
    path.rmdir()


def test_nvcc_needs_a_cuda_build_of_torch(monkeypatch):
    # nvcc alone is not enough: torch's extension builder needs a CUDA build of torch
    monkeypatch.setattr(env, "nvcc_version", lambda: "13.0")
    monkeypatch.setattr(env.torch.version, "cuda", None)
    assert "CPU-only build" in requirements.unmet("nvcc")[0]
    monkeypatch.setattr(env.torch.version, "cuda", "13.0")
    assert requirements.unmet("nvcc") == []
    monkeypatch.setattr(env, "nvcc_version", lambda: None)
    assert "nvcc not found" in requirements.unmet("nvcc")[0]


def test_a_child_python_imports_the_course_from_this_checkout(monkeypatch):
    import os

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    child = env.child_environment(EXTRA="1")
    assert child["PYTHONPATH"].split(os.pathsep) == [str(env.ROOT), "/elsewhere"]
    assert child["EXTRA"] == "1" and child["PATH"] == os.environ["PATH"]
    monkeypatch.delenv("PYTHONPATH")
    assert env.child_environment()["PYTHONPATH"] == str(env.ROOT)


# -- optional extras: skip with their line even under COURSE_STRICT=1, and are logged ------------

@pytest.fixture
def optional_log(monkeypatch, tmp_path):
    log = tmp_path / "optional.log"
    monkeypatch.setenv(requirements.OPTIONAL_SKIP_LOG, str(log))
    monkeypatch.setitem(requirements.REQUIREMENTS, "always", lambda: None)
    monkeypatch.setitem(requirements.REQUIREMENTS, "never", lambda: "the test says no")
    monkeypatch.setattr(env, "STRICT", True)
    return log


def test_strict_mode_lets_a_missing_optional_extra_skip(monkeypatch, capsys, optional_log):
    monkeypatch.setitem(requirements.REQUIREMENTS, "cute-dsl", lambda: "CuTe DSL is not installed")
    assert requirements.requires("always", "cute-dsl") is False
    line = "skipped this cell: needs always cute-dsl: CuTe DSL is not installed (an optional extra)"
    assert capsys.readouterr().out == line + "\n"
    assert optional_log.read_text() == line + "\n"


def test_strict_mode_with_the_extra_installed_runs_the_cell(monkeypatch, capsys, optional_log):
    monkeypatch.setitem(requirements.REQUIREMENTS, "cute-dsl", lambda: None)
    assert requirements.requires("always", "cute-dsl") is True
    assert capsys.readouterr().out == "" and not optional_log.exists()


def test_strict_mode_still_fails_on_a_required_one_beside_an_extra(monkeypatch, optional_log):
    monkeypatch.setitem(requirements.REQUIREMENTS, "cute-dsl", lambda: "CuTe DSL is not installed")
    with pytest.raises(requirements.RequirementError, match="the test says no.*COURSE_STRICT=1"):
        requirements.requires("never", "cute-dsl")
    assert not optional_log.exists()


def test_optional_extras_are_split_from_the_requirements():
    def packages(name):
        lines = (env.ROOT / name).read_text().splitlines()
        return {re.split(r"[<>=\[ ]", ln.strip())[0] for ln in lines
                if ln.strip() and not ln.startswith(("#", "-"))}

    assert set(requirements.OPTIONAL.values()) <= packages("requirements-optional.txt")
    assert not set(requirements.OPTIONAL.values()) & packages("requirements.txt")
    assert all(requirements.is_requirement(name) for name in requirements.OPTIONAL)


def test_the_test_summary_lists_optional_skips(tmp_path):
    import conftest

    log = tmp_path / "optional.log"
    log.write_text("skipped this cell: needs cuda cute-dsl: x (an optional extra)\n" * 2)
    shown = []

    class Reporter:
        def section(self, title):
            shown.append(f"== {title}")

        def write_line(self, line):
            shown.append(line)

    class Config:
        _course_optional_log = log

    conftest.pytest_terminal_summary(Reporter(), 0, Config())
    assert shown == ["== optional extras not installed (skipped, allowed)",
                     "skipped this cell: needs cuda cute-dsl: x (an optional extra)"]
