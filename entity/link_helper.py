"""A helper process of the wikipedia linker: ``python -m entity.link_helper`` links what its parent sends.

The parent (:class:`entity.wikipedia.HelperProcesses`) writes a pickled :class:`entity.wikipedia.LinkingSetup`,
then ``(items, least)`` requests; each answer is the pickled :func:`entity.wikipedia.link_items` result, or an
:class:`Exception`'s text. The helper exits when its input closes (its parent stopped or died).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import IO, Any


class Helper:
    """The parent's end of one helper process."""

    def __init__(self, process: subprocess.Popen):
        assert process.stdin is not None and process.stdout is not None, "started without pipes"
        self.process = process
        self.requests: IO[bytes] = process.stdin
        self.answers: IO[bytes] = process.stdout

    @classmethod
    def start(cls, setup: Any) -> Helper:
        process = subprocess.Popen(
            [sys.executable, "-m", "entity.link_helper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        helper = cls(process)
        helper._write(setup)
        return helper

    def send(self, items: Any, least: float) -> bool:
        """Hands the helper a request; False when it is gone."""
        return self._write((items, least))

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

    def _write(self, value: Any) -> bool:
        try:
            pickle.dump(value, self.requests)
            self.requests.flush()
        except (BrokenPipeError, OSError):
            return False
        return True


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answers requests until ``requests`` ends."""
    from entity.wikipedia import link_items

    finder, model = pickle.load(requests).build()
    while True:
        try:
            items, least = pickle.load(requests)
        except EOFError:
            return
        try:
            answer: Any = link_items(finder, model, items, least)
        except Exception as e:  # noqa: BLE001 (the parent raises it, with its text)
            answer = f"{type(e).__name__}: {e}"
        pickle.dump(answer, answers)
        answers.flush()


if __name__ == "__main__":
    # Answers go to a private copy of stdout: anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, answers)
