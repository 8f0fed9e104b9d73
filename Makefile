# Quickstart targets (see README.md). Set-up is idempotent: it re-runs only when pyproject.toml, setup.py or the
# set-up scripts change.
VENV ?= .venv

.PHONY: setup demo test test-unit test-quick lint

setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/bin/cast demo

# The docs build is strict (mkdocs.yml): a broken link or anchor in docs/ fails it.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/python scripts/typecheck.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The tests are in three tiers, by folder: tests/unit (pure code: no JVM, models, spaCy, processes or servers; its
# conftest refuses them), tests/integration (real components: the fixture indexes, tiny models, spaCy, the explorer,
# stub services, ../shared/data) and tests/system (whole commands as processes, the wheel, the Ray cluster).

# Everything, every tier and the slow tests: CI runs this target (.ci/run). The unit tier runs alone, where its guard
# sees every import; the Ray tests run in a pytest process of their own: Ray's driver and the JVM crash in one process.
# Each step says how long it took (.ci/timed.sh), so that a slower suite is seen when it is made.
test: setup
	.ci/timed.sh lint $(MAKE) --no-print-directory lint
	.ci/timed.sh unit $(VENV)/bin/python -m pytest -q tests/unit
	.ci/timed.sh integration+system $(VENV)/bin/python -m pytest -q -m "not unit and not ray"
	.ci/timed.sh ray $(VENV)/bin/python -m pytest -q -m ray

# While editing: the unit tier, in seconds.
test-unit: setup
	$(VENV)/bin/python -m pytest -q tests/unit

# Before a commit: lint, the unit and integration tiers and the packages' doctests, without the slow tests.
test-quick: setup lint
	$(VENV)/bin/python -m pytest -q tests/unit
	$(VENV)/bin/python -m pytest -q -m "not slow" tests/integration cast
