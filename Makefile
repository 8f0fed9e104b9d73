# Quickstart targets (see README.md). Set-up is idempotent: it re-runs only when pyproject.toml or the
# set-up scripts change.
VENV ?= .venv

.PHONY: setup demo test lint

setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/bin/cast demo

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(VENV)/bin/python -m pytest -q
