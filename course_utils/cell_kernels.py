"""Which kernel sources a notebook cell runs, so that its recording goes stale with them.

A recording (:mod:`course_utils.recordings`) shows what a ``%%requires`` cell printed on a GPU.
It is out of date when the cell's source changed, and also when a kernel the cell runs changed
while the cell stayed the same (a faster step, a fixed bug): the recording then shows numbers
the course no longer produces. This module finds, by reading the code (no import, no GPU),
the files under ``kernels/`` that a cell depends on; a recording stores their hashes, and is
stale when one of them changes.

How a cell's kernels are found:

1. The cell's **names**: modules it imports, and the names it uses that an earlier cell of the
   notebook imported (``from kernels.attention import naive`` in cell 1, ``naive.attention``
   in cell 7).
2. Each module's **imports**, followed through the course's own packages (``kernels``,
   ``exercises``, ``course_utils``), at module level and inside functions. A package's
   ``__init__`` imports all its children to register them; a cell that uses one of them does
   not run the others, so a name taken from a package is followed to the child that defines it,
   and the ``__init__`` itself counts only as its own file.
3. The **CUDA files** a module names (``Path(__file__).with_name("attention.cu")``,
   ``"kernels/histogram/histogram.cu"``) and what those ``#include "..."``.

Only files under ``kernels/`` are hashed: a change to a plot or a helper does not change what a
kernel measured. The answer is an over-approximation where Python is dynamic (a registry looked
up by name pulls in the whole package of the op named) and never misses a file a cell imports.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernels", "exercises", "course_utils")  # the course's own code, followed
HASHED = "kernels"  # what is hashed: the kernels, not the helpers around them
CUDA_FILE = re.compile(r"""["']([\w./-]+\.(?:cu|cuh|h|cpp|ptx))["']""")
WHOLE = "+"  # before a package's __init__: the package with all its children
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

Reader = Callable[[str], "str | None"]  # repo-relative path -> its text (None: no such file)


def _read_here(relative: str) -> str | None:
    path = ROOT / relative
    return path.read_text(errors="replace") if path.is_file() else None


def _module_file(module: str, read: Reader) -> str | None:
    """``kernels.attention.naive`` -> ``kernels/attention/naive.py`` (or its ``__init__``)."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if read(candidate) is not None:
            return candidate
    return None


def _package_of(path: str) -> str:
    """The dotted package a file's relative imports start from."""
    parts = path[:-3].split("/")
    return ".".join(parts[:-1])


def _absolute(node: ast.ImportFrom, path: str) -> str:
    if not node.level:
        return node.module or ""
    package = _package_of(path).split(".")
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


class Graph:
    """The course's modules as read from one revision (the working tree, or a commit)."""

    def __init__(self, read: Reader = _read_here):
        self.read = read

    @functools.cache  # noqa: B019 (one Graph per revision, kept for its lifetime)
    def _tree(self, path: str) -> ast.Module | None:
        text = self.read(path)
        try:
            return ast.parse(text) if text is not None else None
        except SyntaxError:
            return None

    def _bound_in_init(self, init: str, name: str) -> list[str]:
        """The module(s) an ``__init__`` takes ``name`` from (empty: defined there)."""
        tree = self._tree(init)
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return [_absolute(node, init)]
        return []

    def resolve(self, module: str, name: str | None = None) -> list[str]:
        """Files that ``from module import name`` (or ``import module``) brings into use. A
        package imported whole (``import kernels``) is marked ``+`` (all its children count);
        a name taken from a package leads to the child that defines it."""
        path = _module_file(module, self.read)
        if path is None:
            return []
        if not path.endswith("__init__.py"):
            return [path]
        if name is None:
            return [WHOLE + path]
        child = _module_file(f"{module}.{name}", self.read)
        if child is not None:  # a submodule
            return [child]
        sources = self._bound_in_init(path, name)
        return [path, *(f for src in sources for f in self.resolve(*src.rsplit(".", 1)))]

    def _imports_of(self, path: str) -> list[str]:
        tree = self._tree(path)
        found: list[str] = []
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found += self.resolve(alias.name)
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node, path)
                for alias in node.names:
                    found += self.resolve(module, alias.name)
        return found

    def _cuda_files(self, path: str) -> list[str]:
        if path.startswith("course_utils/"):
            return []  # the helpers name .cu files in their examples, and run none
        text, here, found = self.read(path) or "", Path(path).parent, []
        for literal in CUDA_FILE.findall(text):
            for candidate in (literal, os.path.normpath(here / literal)):
                if self.read(candidate) is not None:
                    found.append(candidate)
                    break
        return found

    def closure(self, start: Iterable[str]) -> set[str]:
        """Every course file reachable from ``start`` (modules and the CUDA files they name)."""
        seen: set[str] = set()
        todo = list(start)
        while todo:
            item = todo.pop()
            whole, path = item.startswith(WHOLE), item.removeprefix(WHOLE)
            if item in seen or (not whole and WHOLE + path in seen):
                continue
            seen.add(item)
            if path.endswith("__init__.py"):
                package = path.removesuffix("__init__.py")
                # a package's own children are imported to register them: they count only
                # when the package is used whole or one of them is named
                todo += [f for f in self._imports_of(path)
                         if whole or not f.removeprefix(WHOLE).startswith(package)]
                todo += self._cuda_files(path)
            elif path.endswith(".py"):
                todo += self._imports_of(path) + self._cuda_files(path)
            else:
                here = Path(path).parent
                todo += [os.path.normpath(here / inc) for inc in INCLUDE.findall(
                    self.read(path) or "") if self.read(os.path.normpath(here / inc)) is not None]
        return {item.removeprefix(WHOLE) for item in seen}


def _python(source: str) -> ast.Module | None:
    """A cell's code, its ``%``/``!`` lines (magics) blanked so that it parses."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line
             for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _bindings(tree: ast.Module, graph: Graph) -> dict[str, list[str]]:
    """Names a cell's imports bind -> the files they bring into use."""
    bound: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[(alias.asname or alias.name).split(".")[0]] = graph.resolve(alias.name)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = graph.resolve(node.module or "", alias.name)
    return bound


def kernel_files(sources: list[str], index: int, graph: Graph | None = None) -> set[str]:
    """The kernel files the cell ``sources[index]`` of a notebook (its code cells in order)
    depends on."""
    graph = graph or Graph()
    bound: dict[str, list[str]] = {}
    for source in sources[:index]:
        if (tree := _python(source)) is not None:
            bound.update(_bindings(tree, graph))
    tree = _python(sources[index])
    if tree is None:
        return set()
    mine = _bindings(tree, graph)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    start = [f for files in mine.values() for f in files]
    start += [f for name in used - mine.keys() for f in bound.get(name, [])]
    return {f for f in graph.closure(start) if f.startswith(HASHED + "/")}


CUDA_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _code_only(path: str, text: str) -> str:
    """What a file computes, without its comments, docstrings and layout: editing prose in a
    kernel file leaves its recordings fresh."""
    if path.endswith(".py"):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return text
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body[0] = ast.Pass()  # the docstring
        return ast.dump(tree)
    return " ".join(CUDA_COMMENT.sub(" ", text).split())


def hashes(files: Iterable[str], graph: Graph | None = None) -> dict[str, str]:
    """``{path: hash of its code}`` for the kernel files given (what a recording stores)."""
    graph = graph or Graph()
    return {path: hashlib.sha256(_code_only(path, graph.read(path) or "").encode()
                                 ).hexdigest()[:12] for path in sorted(files)}


def changed(recorded: dict[str, str], graph: Graph | None = None) -> list[str]:
    """The files of a recording's ``{path: hash}`` whose text is not the recorded one now."""
    now = hashes(recorded, graph)
    return [path for path, digest in recorded.items() if now[path] != digest]


def at_revision(revision: str) -> Graph:
    """The course's files as they were at a git revision (``abc1234``, ``abc1234+dirty``: the
    commit a recording names), read with ``git show``."""
    commit = revision.split("+")[0]

    @functools.cache
    def read(relative: str) -> str | None:
        shown = subprocess.run(["git", "show", f"{commit}:{relative}"], cwd=ROOT,
                               capture_output=True, text=True, errors="replace")
        return shown.stdout if shown.returncode == 0 else None

    return Graph(read)
