"""The package's import structure, read from the sources: no two modules import each other (directly or round a
loop, type-checking imports included), no module imports one of a layer above its own (:data:`LAYERS`), and
first-party modules are imported at module level, where a reader sees what a module depends on (third-party
libraries may load lazily: torch, the JVM, spaCy, Ray...)."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import os
import site
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The repository's folders that are packages of cast (pyproject.toml's package-dir: index/ is cast.index).
MAPPED = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
PACKAGES = {"cast": REPO / "cast", **{package: REPO / folder for package, folder in MAPPED.items()}}

# The layers, lowest first (docs/design.md draws them): a module may import its own layer's modules and those of
# the layers below, never one above. A module is in the layer of the longest prefix naming it; the package's
# root (``cast``, its version) names itself alone.
LAYERS = (
    # The ground: errors, and the readers of the project's own small files (an index's build record).
    ("cast", "cast.errors", "cast.formats.textfiles", "cast.index.record"),
    # The turn core: records, settings, stage contracts, the registry, the composition of a pipeline.
    ("cast.core",),
    # What the stages stand on: file formats, the JVM, caches, models, chat clients, the resources that start them.
    ("cast.infra", "cast.formats"),
    ("cast.index",),
    # The stages.
    ("cast.rank", "cast.rewrite", "cast.entity", "cast.summarize"),
    # Conversations walked through a pipeline, and their evaluation.
    ("cast.conversation", "cast.evaluate"),
    # What runs pipelines for a purpose: sweeps, the explorer, PyTerrier, training, test helpers, the benchmarks.
    ("cast.sweep", "cast.explore", "cast.pyterrier", "cast.train", "cast.testing", "cast.benchmark"),
    ("cast.commands", "cast.cli"),
)


def modules() -> dict[str, ast.Module]:
    """Every module of the ``cast`` package by dotted name (``cast.index``, ``cast.entity`` and ``cast.summarize``
    included: the repository's index/, entity/ and summarize/)."""
    found = {}
    for package, root in PACKAGES.items():
        for folder, _, files in os.walk(root):
            for name in files:
                if name.endswith(".py"):
                    path = Path(folder) / name
                    parts = (*package.split("."), *path.relative_to(root).with_suffix("").parts)
                    dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                    found[dotted] = ast.parse(path.read_text(), str(path))
    return found


def test_the_mapped_folders_are_imported_as_packages_of_cast():
    for package, root in PACKAGES.items():
        assert Path(importlib.import_module(package).__file__).parent == root, package
        assert package == "cast" or not (REPO / package.replace(".", "/")).exists(), (
            f"{package}: a second folder"
        )


def test_the_mapped_folders_have_no_names_of_their_own():
    # One module, one name: a folder importable both as ``entity`` and as ``cast.entity`` loads each module twice
    # (two classes, isinstance checks that fail). No path the installation adds (site-packages and what its .pth
    # files add after it; before it stand the current directory and pytest's own) finds them, and no module
    # loaded so far did.
    for module in sorted(modules()):
        if module.startswith(tuple(MAPPED)):
            importlib.import_module(module)
    installed = sys.path[min(sys.path.index(path) for path in site.getsitepackages() if path in sys.path) :]
    for name in MAPPED.values():
        assert importlib.machinery.PathFinder.find_spec(name, installed) is None, name
        assert not any(loaded.partition(".")[0] == name for loaded in sys.modules), name


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


def layer(module: str) -> int:
    """The number of ``module``'s layer in :data:`LAYERS` (0: the ground)."""
    named = [
        (len(prefix), number)
        for number, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or (prefix != "cast" and module.startswith(f"{prefix}."))
    ]
    assert named, f"{module}: in no layer (add it to LAYERS)"
    return max(named)[1]


def test_every_module_is_in_a_layer():
    for module in modules():
        layer(module)


def test_no_module_imports_from_a_layer_above_its_own():
    parsed = modules()
    known = set(parsed)
    upward = [
        f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})"
        for name, module in sorted(parsed.items())
        for target in sorted(imports(module, known))
        if layer(target) > layer(name)
    ]
    assert upward == []


def test_the_layer_test_sees_an_import_running_up():
    # A function-level import counts as much as a module-level one.
    module = ast.parse("def f():\n    from cast.sweep import Sweep\n")
    assert imports(module, set(modules())) == {"cast.sweep"}
    assert layer("cast.sweep") > layer("cast.core.pipeline")


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
