# Quickstart targets (see README.md). Set-up is idempotent: it re-runs only when pyproject.toml, setup.py or the
# set-up scripts change.
VENV ?= .venv

.PHONY: setup demo test test-quick lint

setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/bin/cast demo

# The docs build is strict (mkdocs.yml): a broken link or anchor in docs/ fails it.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Everything, slow and integration tests included: CI runs this target (.ci/run). The Ray tests run in a pytest
# process of their own: Ray's driver and the JVM in one process crash.
test: setup lint
	$(VENV)/bin/python -m pytest -q -m "not ray"
	$(VENV)/bin/python -m pytest -q -m ray

# While editing: without the slow tests (test_demo, the sample retrieval, compiled decoding).
test-quick: setup lint
	$(VENV)/bin/python -m pytest -q -m "not slow and not ray"
	$(VENV)/bin/python -m pytest -q -m "ray and not slow"
