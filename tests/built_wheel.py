"""The toolkit's wheel, built from a copy of what a build reads (not runs, caches or the venv), without network."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = (
    "cast",
    "entity",
    "index",
    "summarize",
    "configs",
    "pyproject.toml",
    "setup.py",
    "README.md",
    "CHANGELOG.md",
    "MANIFEST.in",
)


def build_wheel(folder: Path) -> Path:
    """Build the wheel into ``folder/dist`` and return its path."""
    source = folder / "source"
    _copy_sources(source)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + ["-w", str(folder / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (folder / "dist").glob("cast_toolkit-*.whl")
    return wheel


def build_distributions(folder: Path) -> list[Path]:
    """The sdist and the wheel, built by ``python -m build`` (from the sdist, as an index's users get it) into
    ``folder/dist`` from a copy of the sources, without network (the set-up's setuptools, no isolation)."""
    source = folder / "source"
    _copy_sources(source)
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(folder / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    return sorted((folder / "dist").glob("cast_toolkit-*"))


def _copy_sources(source: Path) -> None:
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
