"""Imports go one way: course -> exercises -> kernels -> course_utils (see course/__init__.py).

A module may import its own package and any package below it, never one above. Read from the
syntax tree, so an import inside a function counts, and so does a module name handed to
``importlib.import_module`` as a string."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["course_utils", "kernels", "exercises", "course"]  # bottom to top
IMPORTERS = {"import_module", "__import__", "find_spec", "run_module"}


def _top(name: str) -> str:
    return name.split(".")[0]


def imported_packages(source: str) -> set[str]:
    """Top-level names this module imports: import statements, and string constants passed to
    importlib-style calls or shaped like dotted module paths of a course package."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(_top(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(_top(node.module))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in IMPORTERS and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                found.add(_top(node.args[0].value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts = node.value.split(".")
            # "kernels.gelu.bench" in a table of module names is an import waiting to happen
            if len(parts) > 1 and parts[0] in LAYERS and all(p.isidentifier() for p in parts):
                found.add(parts[0])
    return found


def violations(package: str) -> list[str]:
    above = set(LAYERS[LAYERS.index(package) + 1:])
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in sorted(imported_packages(path.read_text()) & above):
            bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


@pytest.mark.parametrize("package", LAYERS[:-1])
def test_no_package_imports_a_layer_above_it(package):
    assert violations(package) == []


def test_the_checker_sees_every_way_to_import():
    for source in ("import kernels", "from kernels.gelu import bench", "import kernels.add as a",
                   "def f():\n    from kernels import OPS",
                   "import importlib\nimportlib.import_module('kernels.gelu.bench')",
                   "MODULES = ('kernels.matmul.bench',)"):
        assert "kernels" in imported_packages(source), source
    # a path below the kernels folder and prose are not imports
    for source in ("root = ROOT / 'kernels'", "x = 'the kernels. all of them'",
                   "from . import kernels"):
        assert "kernels" not in imported_packages(source), source


def test_no_notebook_or_recording_uses_the_old_layout():
    # a branch written before the move: `python -m course.migrate_imports` fixes it
    from course import migrate_imports

    for path in [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "docs" / "recordings").glob(
            "*.json"), ROOT / "Makefile"]:
        text = path.read_text()
        assert migrate_imports.rewrite(text) == text, f"{path.name}: run course.migrate_imports"


def test_the_migration_rewrites_old_imports():
    from course import migrate_imports

    old = ("from course_utils import exercises\nfrom course_utils.exercises import cuda_gelu\n"
           "python -m course_utils bench\nsee course_utils/exercises/solutions/\n"
           "from course_utils import env\n")
    assert migrate_imports.rewrite(old) == ("import exercises\nfrom exercises import cuda_gelu\n"
                                            "python -m course bench\nsee exercises/solutions/\n"
                                            "from course_utils import env\n")
