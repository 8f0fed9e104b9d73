#!/usr/bin/env bash
# Write constraints.txt, the lock: every package of a working environment at its exact version. scripts/setup.sh
# installs within it, so that `make demo` and `make test` install what was tested. After changing a range in
# pyproject.toml: `pip install -e '.[dev]'` in the venv (or a fresh `make setup` with the old lock removed), run
# `make test`, then this script, and commit both files.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
python_version=$("$VENV/bin/python" -c 'import platform; print(platform.python_version())')
{
  echo "# The tested set of packages (scripts/lock.sh wrote it from a working environment: Python $python_version,"
  echo "# $(uname -sm)); scripts/setup.sh installs within it. pyproject.toml declares the ranges a user's environment may"
  echo "# satisfy otherwise. Local version labels are dropped (torch's +cpu): setup.sh installs the CPU build first."
  "$VENV/bin/python" -m pip --disable-pip-version-check freeze --exclude-editable --exclude cast-toolkit \
    | grep -v '^#' | sed -E 's/^([^=]+==[^+]+)\+.*/\1/' | LC_ALL=C sort -f
} > constraints.txt.tmp
mv constraints.txt.tmp constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)"
