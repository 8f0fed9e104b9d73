"""Shared fixtures and the tiers. A test's tier is its folder: ``tests/unit`` (pure code, in seconds: no JVM, torch,
spaCy, Ray, server or other process; its conftest refuses them), ``tests/integration`` (real components: the fixture
indexes, tiny random models, spaCy, the explorer, stub services, ../shared/data, skipped with the reason where it is
absent) and ``tests/system`` (whole commands as processes, the wheel, the Ray cluster)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_DATA = REPO.parent / "shared" / "data"


TIERS = ("unit", "integration", "system")
# The tests' home: set for the whole run, before anything reads it, and removed after.
_HOME = pytest.MonkeyPatch()
HOME_KEY = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Every run starts in an empty home of its own (``HOME`` and the XDG folders), as on a fresh machine: no test
    can pass by something a first use left in the tester's home (matplotlib's font cache, the encoder's exports,
    the knowledge base, the cache), nor write there. matplotlib builds its font cache from its own fonts, without
    asking fontconfig for the system's (a process, which the unit tier refuses), so figures are the same
    everywhere."""
    home = Path(tempfile.mkdtemp(prefix="cast-tests-home-"))
    config.stash[HOME_KEY] = home
    for name, path in (
        ("HOME", home),
        ("XDG_CACHE_HOME", home / ".cache"),
        ("XDG_CONFIG_HOME", home / ".config"),
        ("XDG_DATA_HOME", home / ".local" / "share"),
    ):
        _HOME.setenv(name, str(path))
    _HOME.setenv("MPL_IGNORE_SYSTEM_FONTS", "1")


def pytest_unconfigure(config: pytest.Config) -> None:
    _HOME.undo()
    shutil.rmtree(config.stash[HOME_KEY], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test is marked with its tier, the folder it is in under tests/ (``-m unit`` and so on); a test on the Ray
    runtime is a ``ray`` test."""
    tests = Path(__file__).resolve().parent
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(tests) and (tier := path.relative_to(tests).parts[0]) in TIERS:
            item.add_marker(tier)
        if "ray_runtime" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder (``../shared/data``); tests using it are skipped where it is absent."""
    if not (SHARED_DATA / "README.md").is_file():
        pytest.skip(f"no shared data at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from threads, and on a busy machine thread hand-offs dominate their time."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def core_index(tmp_path_factory) -> Path:
    """A Krovetz index of the six-passage fixture corpus ``tests/fixtures/core/corpus.jsonl``."""
    from cast.index.build import build_index

    index_dir = tmp_path_factory.mktemp("core") / "index"
    build_index([FIXTURES / "core" / "corpus.jsonl"], index_dir, threads=1)
    return index_dir


@pytest.fixture(scope="session")
def core_entities(tmp_path_factory) -> Path:
    """The dictionary linker's entity files of the six-passage fixture corpus (for EG pipelines on it)."""
    from cast.entity.builders.collection_entities import build_entity_resources

    return build_entity_resources(
        None,
        [FIXTURES / "core" / "corpus.jsonl"],
        output=tmp_path_factory.mktemp("core-entities") / "entities",
        progress=False,
    )


@pytest.fixture(scope="session")
def ray_runtime():
    """One local Ray runtime (2 CPUs) for every test that scales out, in this process or in a command it runs
    (:func:`ray_address`): its start-up takes seconds."""
    import os

    import ray

    from cast.infra.cluster import RAY_ENVIRONMENT

    for name, value in RAY_ENVIRONMENT.items():  # as cast.infra.cluster.connect does: the JVM runs here too
        os.environ.setdefault(name, value)
    # Its workers import the toolkit from this checkout, as this process does.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 2**20,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def ray_address(ray_runtime) -> str:
    """The address by which a command joins :func:`ray_runtime` (``--ray ADDRESS``) instead of starting its own."""
    return ray_runtime.get_runtime_context().gcs_address
