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


# --------------------------------------------------------------------------------------------
# Import circles: module A imports B (at module level or inside a function) and B, through any
# chain, imports A. Each works only through the order in which Python runs the two files, and
# hides which of the two is the lower layer: there are none, and the test keeps it so.
# --------------------------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """``{module: the course modules it imports}``, function-level imports included."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    edges.update(filter(None, [known(full if full in modules else base)]))
        edges.discard(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    """No module reaches itself through imports, function-level ones included: a package's
    definitions live in a submodule its providers import (``kernels.attention.problem``), and
    a child process's entry point in a module of its own (``exercises.isolated_child``)."""
    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    found = [sorted(c) for c in circles(import_graph())]
    assert not found, f"import circles (function-level imports count): {found}"


def test_the_circle_finder_finds_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]


# --------------------------------------------------------------------------------------------
# A leading underscore says "this module's own": another module that imports such a name leans
# on what its owner may change. The ones left, to be made public or moved (may only shrink):
# --------------------------------------------------------------------------------------------

KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def private_imports() -> set[tuple[str, str]]:
    """(file, module) where a course package's file imports an underscore name of another."""
    found = set()
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and \
                        _top(node.module) in LAYERS and any(
                            a.name.startswith("_") and not a.name.startswith("__")
                            for a in node.names):
                    found.add((str(path.relative_to(ROOT)), node.module))
    return found


def test_no_new_import_of_another_modules_private_names():
    found = private_imports()
    assert not found - KNOWN_PRIVATE_IMPORTS, sorted(found - KNOWN_PRIVATE_IMPORTS)
    assert not KNOWN_PRIVATE_IMPORTS - found, ("made public: take them off "
                                               f"KNOWN_PRIVATE_IMPORTS: "
                                               f"{sorted(KNOWN_PRIVATE_IMPORTS - found)}")
