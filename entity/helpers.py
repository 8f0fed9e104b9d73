"""Helper processes that link part of a batch, so a turn's passages use every core (spaCy holds the GIL).

A linker keeps a :class:`HelperProcesses` and calls :meth:`HelperProcesses.share` on large batches: this process
links one share of the texts while each helper links another. A helper is a fresh interpreter (``python -m
entity.helpers``: never a fork, as the parent may run a JVM, and never a re-run of the caller's script) started on
the first shared batch. It builds its own copy of the linker from a :class:`Rebuild` (its class, settings and the
method answering requests), then answers pickled argument tuples over its pipes until its input closes (its
parent stopped or died). A helper that dies is replaced by linking in the parent, with a warning.
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

# Fewer texts than this are linked in this process: a helper would cost more than it saves (a query, a few passages).
SHARE_FROM = 4


@dataclass(frozen=True)
class Rebuild:
    """How a helper builds its own copy of a linker: ``"module:Class"``, the settings it is built with (in one
    process), and the name of the method that answers requests."""

    linker: str
    settings: dict[str, Any] = field(default_factory=dict)
    method: str = "link"

    def build(self) -> Callable[..., Any]:
        module, name = self.linker.split(":")
        linker = getattr(importlib.import_module(module), name)(**self.settings, processes=1)
        return getattr(linker, self.method)


def share_by_length(lengths: Sequence[int], parts: int) -> list[list[int]]:
    """The item numbers of each of at most ``parts`` shares of about equal total length, lightest share first
    (longest item first to the lightest share so far).

    >>> share_by_length([10, 10, 10, 40], 2)
    [[0, 1, 2], [3]]
    """
    shares: list[list[int]] = [[] for _ in range(parts)]
    totals = [0] * parts
    for number in sorted(range(len(lengths)), key=lambda n: -lengths[n]):
        lightest = totals.index(min(totals))
        shares[lightest].append(number)
        totals[lightest] += lengths[number]
    order = sorted(range(parts), key=lambda share: totals[share])
    return [sorted(shares[share]) for share in order if shares[share]]


class HelperProcesses:
    """The helpers of one linker (``processes - 1`` of them), started on the first shared batch."""

    def __init__(self, rebuild: Rebuild, processes: int):
        self.rebuild = rebuild
        self.processes = processes
        self._helpers: list[Helper] = []
        # Stopped with their owner: a helper would otherwise wait until this process ends.
        weakref.finalize(self, _stop, self._helpers)

    def share(
        self, items: Sequence[Any], lengths: Sequence[int], here: Callable[[list[Any]], list[Any]], *args: Any
    ) -> list[Any]:
        """``here(items)``'s answers, computed in shares by :func:`share_by_length` when the batch is large enough:
        this process answers the lightest share (it also cleans, caches and decides) while the helpers answer
        the others with their rebuilt method ``(share, *args)``."""
        if len(items) < SHARE_FROM or self.processes == 1:
            return here(list(items))
        mine, *others = share_by_length(lengths, self.processes)
        helpers = self._started()
        sent = [
            helper.send(([items[n] for n in share], *args))
            for helper, share in zip(helpers, others, strict=False)
        ]
        answers: dict[int, Any] = dict(zip(mine, here([items[n] for n in mine]), strict=True))
        for helper, share, ok in zip(helpers, others, sent, strict=False):
            answer = helper.receive() if ok else None
            if answer is None:
                warnings.warn(
                    "a linking helper process died; linking in this process from now on", stacklevel=2
                )
                self.close()
                self.processes = 1
                answer = here([items[n] for n in share])
            answers.update(zip(share, answer, strict=True))
        return [answers[n] for n in range(len(items))]

    def start(self) -> None:
        """Start the helpers now rather than on the first shared batch (each builds its linker meanwhile)."""
        self._started()

    def _started(self) -> list[Helper]:
        while len(self._helpers) < self.processes - 1:
            self._helpers.append(Helper.start(self.rebuild))
        return self._helpers

    def close(self) -> None:
        _stop(self._helpers)


def _stop(helpers: list[Helper]) -> None:
    for helper in helpers:
        helper.stop()
    helpers.clear()


class Helper:
    """The parent's end of one helper process."""

    def __init__(self, process: subprocess.Popen):
        assert process.stdin is not None and process.stdout is not None, "started without pipes"
        self.process = process
        self.requests: IO[bytes] = process.stdin
        self.answers: IO[bytes] = process.stdout

    @classmethod
    def start(cls, rebuild: Rebuild) -> Helper:
        process = subprocess.Popen(
            [sys.executable, "-m", "entity.helpers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        helper = cls(process)
        helper.send(rebuild)
        return helper

    def send(self, value: Any) -> bool:
        """Hands the helper a request; False when it is gone."""
        try:
            pickle.dump(value, self.requests)
            self.requests.flush()
        except OSError:  # a broken pipe: the helper died
            return False
        return True

    def receive(self) -> Any:
        """The answer to the last request; None when the helper died (a helper's own error is raised here)."""
        try:
            answer = pickle.load(self.answers)
        except (EOFError, OSError, pickle.UnpicklingError):
            return None
        if isinstance(answer, str):
            raise RuntimeError(f"linking helper process: {answer}")
        return answer

    def stop(self) -> None:
        """Closes its input (it exits after the request in hand), or kills it if that takes over 10 s."""
        try:
            self.requests.close()
        except OSError:  # already dead: its end of the pipe is gone
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.answers.close()


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answers requests until ``requests`` ends: a :class:`Rebuild` first, then argument tuples."""
    work = pickle.load(requests).build()
    while True:
        try:
            args = pickle.load(requests)
        except EOFError:
            return
        try:
            answer: Any = work(*args)
        except Exception as e:  # noqa: BLE001 (the parent raises it, with its text)
            answer = f"{type(e).__name__}: {e}"
        pickle.dump(answer, answers)
        answers.flush()


if __name__ == "__main__":
    # Answers go to a private copy of stdout: anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, answers)
