"""The package's import structure, read from the sources: no two modules import each other (directly or round a
loop, type-checking imports included), and first-party modules are imported at module level, where a reader
sees what a module depends on (third-party libraries may load lazily: torch, the JVM, spaCy, Ray...)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cast"


def modules() -> dict[str, ast.Module]:
    """Every module of the ``cast`` package by dotted name (``cast.index``, ``cast.entity`` and ``cast.summarize``
    included: links to the repository's index/, entity/ and summarize/)."""
    found = {}
    for folder, _, files in os.walk(PACKAGE, followlinks=True):
        for name in files:
            if name.endswith(".py"):
                path = Path(folder) / name
                parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
                dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                found[dotted] = ast.parse(path.read_text(), str(path))
    return found


def imports(module: ast.Module, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in it (a package's ``__init__`` counts for the
    modules in it)."""
    targets = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets.add(node.module)
            targets.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {target for target in targets if target in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other():
    parsed = modules()
    known = set(parsed)
    graph = {}
    for name, module in parsed.items():
        parents = {".".join(name.split(".")[:end]) for end in range(1, name.count(".") + 1)}
        graph[name] = (imports(module, known) | (parents & known)) - {name}
    assert cycles(graph) == []


def test_first_party_modules_are_imported_at_module_level():
    lazy = []
    for name, module in modules().items():
        for function in ast.walk(module):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cast":
                        lazy.append(f"{name}.{function.name}: from {node.module}")
                    elif isinstance(node, ast.Import) and any(
                        a.name.split(".")[0] == "cast" for a in node.names
                    ):
                        lazy.append(f"{name}.{function.name}: import")
    assert lazy == []
