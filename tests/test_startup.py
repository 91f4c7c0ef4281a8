"""course.startup: the stages of a notebook's first cell, timed in a fresh child Python."""

import ast
import json
import subprocess
import sys

import pytest

from course import startup
from course_utils import env


def test_every_stage_is_timed_in_order_after_python_itself():
    rows = startup.measure()
    assert [r["stage"] for r in rows] == ["python itself"] + [s for s, _ in startup.STAGES]
    assert all(r["seconds"] >= 0 and r["error"] == "" for r in rows), rows
    text = startup.table(rows)
    assert text.startswith("a fresh Python before a notebook's first line: ")
    assert "import kernels" in text and "error" not in text  # no error column when none failed


def test_a_failing_stage_says_why_and_the_others_still_run():
    rows = startup.measure((("broken", "import no_such_module_here"), ("fine", "x = 1")))
    by_stage = {r["stage"]: r for r in rows}
    assert by_stage["broken"]["error"].startswith("ModuleNotFoundError: ")
    assert by_stage["fine"]["error"] == ""
    assert "error" in startup.table(rows)


def test_a_child_that_dies_is_an_error_naming_its_last_words():
    with pytest.raises(RuntimeError, match=r"start-up child failed \(exit 3\)"):
        startup.measure((("dies", "import os; os._exit(3)"),))


def test_main_says_why_it_could_not_time_and_returns_1(monkeypatch, capsys):
    def fails():
        raise RuntimeError("the start-up child failed (exit 3): boom")

    monkeypatch.setattr(startup, "measure", fails)
    assert startup.main([]) == 1
    assert capsys.readouterr().out.startswith("startup: could not time a fresh Python: ")


def test_no_first_cell_imports_torch_compile_machinery():
    # dynamo and inductor take seconds to import on a GPU box (01 and 02 paid them in their first
    # cell through course_utils.profiling); a notebook that compiles pays them when it compiles
    imports = {}
    for path in sorted((env.ROOT / "notebooks").glob("*.ipynb")):
        cell = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        code = "\n".join(ln for ln in "".join(cell["source"]).splitlines()
                         if not ln.startswith("%"))
        imports[path.name] = "\n".join(ast.unparse(node) for node in ast.parse(code).body
                                       if isinstance(node, ast.Import | ast.ImportFrom))
    child = ("import json, sys\nheavy = {}\n"
             "for name, code in json.loads(sys.argv[1]).items():\n"
             "    exec(code, {})\n"
             "    heavy[name] = [m for m in ('torch._dynamo', 'torch._inductor') "
             "if m in sys.modules]\n"
             "print(json.dumps(heavy))")
    done = subprocess.run([sys.executable, "-c", child, json.dumps(imports)], capture_output=True,
                          text=True, cwd=env.ROOT / "notebooks", timeout=300,
                          env=env.child_environment())
    assert done.returncode == 0, done.stderr[-2000:]
    heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(heavy) >= 7 and not any(heavy.values()), heavy
