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
    "MANIFEST.in",
)


def build_wheel(folder: Path) -> Path:
    """Build the wheel into ``folder/dist`` and return its path."""
    source = folder / "source"
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + ["-w", str(folder / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (folder / "dist").glob("cast_toolkit-*.whl")
    return wheel
