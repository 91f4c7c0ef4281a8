"""The code a cell's function takes to another process: its text, the helpers and constants it
names, and the imports the cell wrote (``import x``, ``from x import y as z``) or, for a name
imported in another cell, an import rebuilt from the object (:func:`shipped_source`). The
distributed exercises send a student's function to gloo ranks this way.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import types

import torch


def _code_names(code) -> set[str]:
    """Every global or attribute name ``code`` and the functions nested in it (comprehensions
    included: Python 3.11 compiles them to code objects of their own) name."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _cell_imports(fn) -> dict[str, str]:
    """``{name: the import statement that binds it}`` in the file or notebook cell that
    defined ``fn`` (``import x``, ``import x.y as z``, ``from x import y``, ``... as z``)."""
    lines = linecache.getlines(fn.__code__.co_filename, fn.__globals__)
    code = "".join("\n" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = f"import {a.name}" + (
                    f" as {a.asname}" if a.asname else "")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    found[a.asname or a.name] = f"from {node.module} import {a.name}" + (
                        f" as {a.asname}" if a.asname else "")
    return found


def _import_of(value, name: str) -> str | None:
    """An import statement that binds ``name`` to ``value`` (imported in another cell): from
    the shortest package path of its module that holds it, or None."""
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        return None
    parts = module.split(".")
    for attr in dict.fromkeys((getattr(value, "__name__", None),
                               getattr(value, "__qualname__", None))):
        if not isinstance(attr, str) or not attr.isidentifier():
            continue
        for i in range(1, len(parts) + 1):
            if getattr(sys.modules.get(".".join(parts[:i])), attr, None) is value:
                return (f"from {'.'.join(parts[:i])} import {attr}"
                        + (f" as {name}" if name != attr else ""))
    return None


def _literal(value) -> bool:
    try:
        return type(value) is type(ast.literal_eval(repr(value))) and \
            ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def shipped_source(fn) -> str:
    """The text a rank runs for the answer ``fn``: ``fn`` and the functions of its cell it
    calls, after what they name from elsewhere: each name's import as the cell wrote it
    (``import x``, ``import x as y``, ``from x import y``, ``from x import y as z``; where
    the import was in another cell, one made from the object), and the constants they read."""
    lines, functions = ["import torch"], {}

    def visit(f, entry: bool = False) -> None:
        if f.__name__ in functions:
            return
        try:
            functions[f.__name__] = textwrap.dedent(inspect.getsource(f))
        except (OSError, TypeError):
            if entry:
                raise
            return  # (a name that only an attribute shares, say: the rank does without it)
        imports = _cell_imports(f)
        for name in sorted(_code_names(f.__code__)):
            if name not in f.__globals__:
                continue  # an attribute's name, or a builtin
            value = f.__globals__[name]
            if isinstance(value, types.FunctionType) and value.__module__ == f.__module__ \
                    and name not in imports:
                visit(value)
            elif name in imports:
                lines.append(imports[name])
            elif isinstance(value, types.ModuleType):
                lines.append(f"import {value.__name__}"
                             + ("" if value.__name__ == name else f" as {name}"))
            elif _literal(value):
                lines.append(f"{name} = {value!r}")
            elif isinstance(value, torch.dtype):
                lines.append(f"{name} = {value}")
            elif (statement := _import_of(value, name)) is not None:
                lines.append(statement)

    visit(fn, entry=True)
    return "\n".join(dict.fromkeys(lines)) + "\n\n\n" + "\n\n\n".join(functions.values())
