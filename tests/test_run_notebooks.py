"""course_utils.run_notebooks on tiny notebooks written for the test (a real kernel runs them)."""

import json
import re

import nbformat
import pytest

from course_utils import run_notebooks


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def lax(monkeypatch):
    # the kernel inherits the environment: a skipped cell must skip, even under make test-gpu
    monkeypatch.setenv("COURSE_STRICT", "0")


def test_a_good_notebook_runs_and_reports_its_skipped_cell(tmp_path, lax):
    path = _notebook(tmp_path / "01_ok.ipynb", "%load_ext course_utils", "x = 6 * 7\nprint(x)",
                     "%%requires sm_999\nprint('never')", "assert x == 42")
    outcome = run_notebooks.execute(path, timeout=120, out_dir=tmp_path / "out")
    assert outcome.status == "ok", outcome.error
    assert (outcome.cells_run, outcome.cells) == (4, 4)
    assert len(outcome.skipped) == 1
    assert outcome.skipped[0].startswith("sm_999: ")
    executed = nbformat.read(str(outcome.executed_path), as_version=4)
    assert "42" in executed.cells[1].outputs[0]["text"]
    row = run_notebooks.summary_rows([outcome])[0]
    assert row["status"] == "ok" and row["skipped"] == 1 and "sm_999" in row["why skipped / error"]


def test_a_failing_notebook_is_reported_and_fails_main(tmp_path, lax, capsys):
    _notebook(tmp_path / "02_bad.ipynb", "y = 1", "raise ValueError('boom in a cell')", "z = 2")
    _notebook(tmp_path / "03_fine.ipynb", "pass")
    rc = run_notebooks.main(["--folder", str(tmp_path), "--out", str(tmp_path / "out"),
                             "--timeout", "120"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "ValueError: boom in a cell" in out
    assert "03_fine.ipynb" in out and "ok" in out
    bad = nbformat.read(str(tmp_path / "out" / "02_bad.ipynb"), as_version=4)
    assert bad.cells[2].get("execution_count") is None  # execution stopped at the error


def test_a_failing_requires_cell_reports_its_own_error_and_which_cell(tmp_path, lax):
    # "triton" is met on every machine the course runs on (the interpreter on a CPU); the
    # summary must name the body's error, not only the magic's "traceback above"
    path = _notebook(tmp_path / "04_req.ipynb", "%load_ext course_utils", "x = 1",
                     "%%requires triton\nimport math\nmath.sqrt(-1)")
    outcome = run_notebooks.execute(path, timeout=120, out_dir=tmp_path / "out")
    assert outcome.status == "failed"
    assert outcome.error.startswith("ValueError: math domain error (code cell 3: 'import math')")


def test_selectors_pick_notebooks(tmp_path):
    for name in ("01_a.ipynb", "02_b.ipynb", "03_c.ipynb"):
        _notebook(tmp_path / name, "pass")
    picked = run_notebooks.find_notebooks(["02", "03_c"], tmp_path)
    assert [p.name for p in picked] == ["02_b.ipynb", "03_c.ipynb"]
    assert len(run_notebooks.find_notebooks([], tmp_path)) == 3
    assert run_notebooks.main(["--folder", str(tmp_path), "nothing-matches"]) == 2


BUILD_CELL = """
import json, os
from course_utils import env
assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(env.ROOT)
with open(os.environ["COURSE_BUILD_LOG"], "a") as log:  # as two cuda_ext builds would
    log.write(json.dumps({"name": "a", "seconds": 1.5, "compiled": True}) + "\\n")
    log.write(json.dumps({"name": "b", "seconds": 0.25, "compiled": False}) + "\\n")
"""


def test_the_kernel_imports_from_the_checkout_and_builds_are_summed(tmp_path, lax):
    path = _notebook(tmp_path / "04_builds.ipynb", BUILD_CELL)
    outcome = run_notebooks.execute(path, timeout=120, out_dir=tmp_path / "out")
    assert outcome.status == "ok", outcome.error
    assert (outcome.build_seconds, outcome.builds_compiled) == (1.75, 1)
    assert run_notebooks.summary_rows([outcome])[0]["of which builds s"] == "1.8 (1 compiled)"


def test_the_slowest_cells_are_timed_and_printed(tmp_path, lax, capsys):
    _notebook(tmp_path / "05_slow.ipynb", "import time", "time.sleep(0.6)  # the slow one",
              "x = 1", "time.sleep(0.3)")
    assert run_notebooks.main(["--folder", str(tmp_path), "--out", str(tmp_path / "out"),
                               "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("05_slow.ipynb:"))
    cells = line.split(": ", 1)[1].split("; ")
    assert len(cells) == 3
    assert cells[0].startswith("cell 1 ") and cells[0].endswith("time.sleep(0.6)  # the slow one")
    assert cells[1].startswith("cell 3 ")
    assert 0.6 <= float(cells[0].split()[2]) < 5
    times = json.loads((tmp_path / "out" / "cell-times.json").read_text())
    (notebook,) = times["notebooks"]
    assert notebook["notebook"] == "05_slow.ipynb" and notebook["status"] == "ok"
    assert [c["cell"] for c in notebook["cells"]] == [0, 1, 2, 3]
    assert 0.6 <= notebook["cells"][1]["seconds"] < 5 and times["environment"]


def test_a_cold_build_cell_is_reported_apart_and_the_lecture_verdict_printed(tmp_path, lax,
                                                                            capsys, monkeypatch):
    path = _notebook(tmp_path / "04_cold.ipynb", "import time", "time.sleep(0.8)  # cold build",
                     "time.sleep(1.05)  # over", "x = 1")
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[1].metadata["tags"] = [run_notebooks.COLD_BUILD_TAG]
    nbformat.write(nb, str(path))
    monkeypatch.setattr(run_notebooks, "LECTURE_SECONDS", 1)  # the rest (> 1.05 s) is over it
    assert run_notebooks.main(["--folder", str(tmp_path), "--out", str(tmp_path / "out"),
                               "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    outcome = run_notebooks.execute(path, timeout=120, out_dir=tmp_path / "out2")
    assert 0.8 <= outcome.cold_build_seconds < 0.8 + 2
    assert outcome.lecture_seconds == outcome.seconds - outcome.cold_build_seconds
    row = run_notebooks.summary_rows([outcome])[0]
    assert row["cold-build cells s"] == round(outcome.cold_build_seconds, 1)
    assert re.search(r"cell 1 \d+\.\d s \[cold-build\]: time\.sleep\(0\.8\)", out), out
    verdict = next(ln for ln in out.splitlines() if ln.startswith("lecture mode"))
    assert verdict.startswith("lecture mode (every notebook under 1 s apart from its cold-build "
                              "cells): not kept: 04_cold.ipynb ")
    # a notebook over the minute lists its cells of a second or more, to show where it went
    listed = out.split("04_cold.ipynb is over: its cells of 1 s or more, in order:\n")[1]
    assert re.match(r"  cell 2 1\.\d s: time\.sleep\(1\.05\)  # over\n(?!  cell)", listed), out


def test_an_error_outside_the_cells_says_which_cell_ran_and_what_the_kernel_said(tmp_path,
                                                                               monkeypatch):
    # what nbclient raised on an H100 for notebook 07: a bare AssertionError, no cell error
    from nbclient import NotebookClient

    def broken(self, stderr=None, **_):
        self.on_cell_execute(cell=self.nb.cells[1], cell_index=1)
        stderr.write("Segmentation fault in libsomething\n")
        stderr.flush()
        raise AssertionError()

    monkeypatch.setattr(NotebookClient, "execute", broken)
    path = _notebook(tmp_path / "05_dies.ipynb", "a = 1", "b = 2", "c = 3")
    outcome = run_notebooks.execute(path, timeout=60, out_dir=tmp_path / "out")
    assert outcome.status == "failed"
    assert outcome.error.startswith("AssertionError: AssertionError (cell 1;")
    assert "stderr ends: Segmentation fault in libsomething" in outcome.error


def test_the_course_cells_that_rebuild_on_purpose_carry_the_tag():
    # lesson 06's compile-time table builds load_inline in a fresh folder every run
    tagged = {}
    for path in run_notebooks.find_notebooks([]):
        for cell in nbformat.read(str(path), as_version=4).cells:
            if cell.cell_type == "code" and "compile_times(" in cell.source:
                tagged[path.name] = run_notebooks.COLD_BUILD_TAG in cell.metadata.get("tags", [])
    assert tagged == {"06_nvrtc.ipynb": True}


def test_the_suite_runs_without_xdist():
    """`pytest -p no:xdist` (or a machine without pytest-xdist) collects the suite: the
    conftest's scheduler hook is optional (it stopped a run on the two-GPU box with
    "unknown hook 'pytest_xdist_make_scheduler'")."""
    import subprocess
    import sys

    from course_utils import env

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "--collect-only", "-q", "tests/test_timing.py"],
                          capture_output=True, text=True, cwd=env.ROOT, timeout=300,
                          env=env.child_environment())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr
