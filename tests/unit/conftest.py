"""The unit tier's rule, enforced: a test here, and the import of its module, loads no torch, transformers, JVM,
spaCy, Ray, ONNX Runtime or OpenVINO, starts no process, listens on no socket and reads no ../shared/data. A test
that does fails, saying so, even where the code under test catches the refusal.

The rule holds where the tier runs alone (``make test-unit``, and first in ``make test``): in one run of every
tier, a module the other tiers loaded already is imported again without asking for it."""

from __future__ import annotations

import importlib.abc
import multiprocessing.process
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "jnius",
    "pyserini",
    "spacy",
    "ray",
    "onnxruntime",
    "openvino",
)
RULE = (
    "tests/unit allows no torch, transformers, JVM, spaCy, Ray, ONNX Runtime or OpenVINO, no process, no listening "
    "socket and no ../shared/data: the test belongs in tests/integration (tests/system for a whole command run as a "
    "process)"
)


class _Guard(importlib.abc.MetaPathFinder):
    """While on: refuses the heavy imports, processes and listening sockets, and remembers what it refused."""

    def __init__(self) -> None:
        self.active = False
        self.refused: list[str] = []

    def refuse(self, what: str, error: type[Exception]) -> None:
        self.refused.append(what)
        raise error(f"{what}: {RULE}")

    def find_spec(self, name, path=None, target=None):
        if self.active and name.partition(".")[0] in HEAVY:
            self.refuse(f"imports {name}", ImportError)
        return None  # the other finders find it

    def refusing(self, original, what: str):
        def refusing(*args, **kwargs):
            if self.active:
                self.refuse(what, OSError)
            return original(*args, **kwargs)

        return refusing

    @contextmanager
    def on(self) -> Iterator[list[str]]:
        self.refused = []
        with pytest.MonkeyPatch.context() as patch:
            for owner, attribute, what in (
                (subprocess.Popen, "_execute_child", "starts a process"),
                (os, "fork", "forks"),
                (os, "posix_spawn", "starts a process"),
                (os, "posix_spawnp", "starts a process"),
                (multiprocessing.process.BaseProcess, "start", "starts a process"),
                (socket.socket, "listen", "listens on a socket"),
            ):
                patch.setattr(owner, attribute, self.refusing(getattr(owner, attribute), what))
            self.active = True
            try:
                yield self.refused
            finally:
                self.active = False


GUARD = _Guard()


def pytest_configure() -> None:
    sys.meta_path.insert(0, GUARD)


def pytest_unconfigure() -> None:
    if GUARD in sys.meta_path:
        sys.meta_path.remove(GUARD)


def refused_text(refused: list[str]) -> str:
    return ", ".join(dict.fromkeys(refused))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    with GUARD.on() as refused:
        report = yield
    if refused and isinstance(collector, pytest.Module):
        report.outcome = "failed"
        report.longrepr = f"importing {collector.path.name} {refused_text(refused)}: {RULE}"
    return report


def guarded_phase(where: str):
    """One phase of a test (set-up, call, tear-down) under the guard, failed on anything it refused."""
    with GUARD.on() as refused:
        result = yield
    if refused:
        pytest.fail(f"{where} {refused_text(refused)}: {RULE}", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if "shared_data" in getattr(item, "fixturenames", ()):
        pytest.fail(f"this test reads ../shared/data: {RULE}", pytrace=False)
    return (yield from guarded_phase("this test's set-up"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from guarded_phase("this test"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    return (yield from guarded_phase("this test's tear-down"))
