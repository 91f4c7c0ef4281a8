"""The %%requires cell magic, run by a real IPython shell in-process."""

import pytest
from IPython.core.interactiveshell import InteractiveShell

from course_utils import env, requirements


@pytest.fixture
def shell(monkeypatch):
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext course_utils")
    monkeypatch.setitem(requirements.REQUIREMENTS, "always", lambda: None)
    monkeypatch.setitem(requirements.REQUIREMENTS, "never", lambda: "the test says no")
    monkeypatch.setattr(env, "STRICT", False)
    ip.user_ns.pop("ran", None)
    return ip


def test_met_requirement_runs_the_cell(shell):
    result = shell.run_cell("%%requires always\nran = 6 * 7")
    assert result.success
    assert shell.user_ns["ran"] == 42


def test_a_trailing_semicolon_hides_the_last_value_as_in_a_plain_cell(shell, capsys):
    shell.run_cell("%%requires always\n6 * 7;")
    shell.run_cell("%%requires always\n6 * 9")
    out = capsys.readouterr().out
    assert "42" not in out and "54" in out


def test_unmet_requirement_prints_one_line_and_skips(shell, capsys):
    result = shell.run_cell("%%requires always never\nran = True")
    assert result.success  # the notebook goes on
    assert "ran" not in shell.user_ns
    out = capsys.readouterr().out
    assert out == "skipped this cell: needs always never: the test says no\n"


def test_real_requirements_agree_with_env(shell, capsys):
    shell.run_cell("%%requires cuda\nran = True")
    assert ("ran" in shell.user_ns) == env.HAS_CUDA
    if not env.HAS_CUDA:
        assert capsys.readouterr().out.startswith("skipped this cell: needs cuda: no CUDA GPU")


def test_strict_mode_turns_a_skip_into_an_error(shell, monkeypatch):
    monkeypatch.setattr(env, "STRICT", True)
    result = shell.run_cell("%%requires never\nran = True")
    assert not result.success
    assert isinstance(result.error_in_exec, requirements.RequirementError)
    assert "COURSE_STRICT=1" in str(result.error_in_exec)
    assert "ran" not in shell.user_ns


def test_unknown_requirement_names_the_known_ones(shell):
    result = shell.run_cell("%%requires cdua\nran = True")
    assert not result.success
    message = str(result.error_in_exec)
    assert "unknown requirement 'cdua'" in message and "cuda" in message and "sm_XY" in message


def test_no_requirement_is_an_error(shell):
    result = shell.run_cell("%%requires\nran = True")
    assert not result.success
    assert "at least one requirement" in str(result.error_in_exec)


def test_a_failing_cell_under_requires_fails(shell):
    result = shell.run_cell("%%requires always\nraise KeyError('inside the cell')")
    assert not result.success
    error = result.error_in_exec
    assert isinstance(error, RuntimeError) and "failed" in str(error)
    assert isinstance(error.__cause__, KeyError)


@pytest.mark.parametrize("installed", [True, False], ids=["extra-installed", "extra-missing"])
def test_strict_mode_and_an_optional_extra(shell, monkeypatch, capsys, tmp_path, installed):
    # a GPU box without the CuTe DSL is the normal case: the cell skips, the notebook goes on
    monkeypatch.setattr(env, "STRICT", True)
    monkeypatch.setenv(requirements.OPTIONAL_SKIP_LOG, str(tmp_path / "optional.log"))
    monkeypatch.setitem(requirements.REQUIREMENTS, "cute-dsl",
                        lambda: None if installed else "CuTe DSL is not installed")
    result = shell.run_cell("%%requires always cute-dsl\nran = True")
    assert result.success
    assert ("ran" in shell.user_ns) == installed
    out = capsys.readouterr().out
    assert out.endswith("(an optional extra)\n") != installed


def test_a_shared_gpu_gets_the_cache_back_after_every_cell(monkeypatch):
    """COURSE_SHARED_GPU=1 (make test-gpu): the extension hooks every cell's end."""
    from course_utils import magic, shared_gpu

    calls = []
    monkeypatch.setattr(shared_gpu, "SHARED", True)
    monkeypatch.setattr(shared_gpu, "give_back_cached_memory", lambda *a: calls.append(a))
    ip = InteractiveShell.instance()
    magic.register(ip)
    try:
        ip.run_cell("x = 1")
        assert calls, "no cell-end hook under COURSE_SHARED_GPU=1"
    finally:
        ip.events.unregister("post_run_cell", shared_gpu.give_back_cached_memory)


def test_giving_the_cache_back_leaves_a_process_without_cuda_alone():
    import torch

    from course_utils import shared_gpu

    was = torch.cuda.is_initialized()
    shared_gpu.give_back_cached_memory()
    assert torch.cuda.is_initialized() == was, "giving the cache back made a CUDA context"
