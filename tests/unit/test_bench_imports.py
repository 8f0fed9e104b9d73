"""The benchmark scripts are clients of the installed package: none puts a folder on ``sys.path`` or imports
another script through ``bench``; what they share is in :mod:`cast.benchmark`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((REPO / "bench").glob("*.py"))


def path_tricks(source: str) -> list[str]:
    """Where ``source`` reads or changes ``sys.path`` or imports ``bench``, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and getattr(node.value, "id", None) == "sys"
        ):
            found.append(f"{node.lineno}: sys.path")
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "bench"
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
            found.append(f"{node.lineno}: from {node.module}")
    return found


def test_path_tricks_are_found() -> None:
    source = "import sys\nsys.path.insert(0, 'x')\nfrom bench.common import run\nimport bench.pooled\n"
    assert sorted(path_tricks(source)) == ["2: sys.path", "3: from bench.common", "4: import bench.pooled"]
    assert path_tricks("from cast.benchmark.scripts import run\n# sys.path stays as it is\n") == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_a_benchmark_script_uses_no_path_tricks(script: Path) -> None:
    assert path_tricks(script.read_text()) == []


def test_the_scripts_are_all_there_is_in_bench() -> None:
    # A module beside them would be imported only through the scripts' folder on sys.path: it belongs in the package.
    assert len(SCRIPTS) > 20
    assert not (REPO / "bench" / "__init__.py").exists()
