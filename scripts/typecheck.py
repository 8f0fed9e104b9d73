"""mypy over the package as it is installed: ``cast``, with the folders pyproject.toml's package-dir maps into it
(``index/`` as ``cast.index``). mypy has no such mapping of its own (it names a module after its folders), so the
sources are copied into the installed layout under ``build/typecheck/`` (modification times kept, for mypy's
incremental cache) and its messages name each file where it is in the repository.

Usage: ``.venv/bin/python scripts/typecheck.py [MYPY ARGUMENTS]`` (``make lint`` runs it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGE = REPO / "build" / "typecheck"


def main(argv: list[str]) -> int:
    mapped = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    folders = {"cast": "cast", **{package.replace(".", "/"): folder for package, folder in mapped.items()}}
    shutil.rmtree(STAGE / "cast", ignore_errors=True)
    for installed, folder in folders.items():
        shutil.copytree(
            REPO / folder,
            STAGE / installed,
            ignore=lambda _, names: [n for n in names if not n.endswith((".py", ".pyi")) and "." in n],
            dirs_exist_ok=True,
        )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), *argv],
        cwd=STAGE,
        capture_output=True,
        text=True,
    )
    # The longest installed path first: cast/entity/ before cast/.
    for installed in sorted(folders, key=len, reverse=True):
        result.stdout = result.stdout.replace(f"{installed}/", f"\0{folders[installed]}/")
    sys.stdout.write(result.stdout.replace("\0", ""))
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
