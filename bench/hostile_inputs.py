"""Whole inputs without end: how long each command takes to refuse one, and its peak memory.

Each case runs ``cast`` in a process of its own and waits for it (``os.wait4``: wall-clock time and the process's
peak resident memory); a case still running after ``--timeout`` seconds is killed and reported as a hang. Cases: a
device (``/dev/zero``) as topics, as an iKAT run to validate and as a config; a FIFO as topics (nothing ever
writes to it); 1 GiB without a line end piped into ``cast answer``; a sparse 1 GiB run file of one line; a
topics file one byte over its size limit; a YAML anchor bomb.

    .venv/bin/python bench/hostile_inputs.py [--timeout 60]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CAST = [sys.executable, "-m", "cast.cli"]


def measure(argv: list[str], timeout: float, stdin_bytes: int = 0) -> tuple[str, float, float, str]:
    """(exit status or "hang", seconds, peak MB, last line of stderr) of ``cast argv``; ``stdin_bytes`` zero
    bytes (no line end) are piped to it, in 1 MiB writes, until it stops reading."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [*CAST, *argv],
        stdin=subprocess.PIPE if stdin_bytes else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if stdin_bytes:

        def feed() -> None:
            assert process.stdin is not None
            try:
                for _ in range(stdin_bytes >> 20):
                    process.stdin.write(b"\0" * (1 << 20))
                process.stdin.close()
            except (BrokenPipeError, ValueError):
                pass

        threading.Thread(target=feed, daemon=True).start()
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    _, status, usage = os.wait4(process.pid, 0)
    timer.cancel()
    seconds = time.perf_counter() - started
    assert process.stderr is not None
    lines = [line for line in process.stderr.read().decode("utf-8", "replace").splitlines() if line.strip()]
    code = "hang" if seconds >= timeout else str(os.waitstatus_to_exitcode(status))
    return code, seconds, usage.ru_maxrss / 1024, (lines[-1] if lines else "")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds after which a case is a hang")
    args = parser.parse_args()
    from cast.textfiles import TOPICS_BYTES

    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        os.mkfifo(here / "fifo.json")
        with (here / "one-line.run").open("wb") as f:
            f.truncate(1 << 30)  # sparse: 1 GiB of zeros, no line end
        with (here / "big-topics.json").open("wb") as f:
            f.truncate(TOPICS_BYTES + 1)
        levels = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
        levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 10)]
        (here / "qrels").write_text("1_1 0 p1 1\n")
        (here / "bomb.yaml").write_text("\n".join(levels) + "\n")
        topics = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "core" / "conversations.json"
        out = str(here / "out")
        cases = [
            ("cast run --topics /dev/zero", ["run", "--topics", "/dev/zero", "--output", out], 0),
            ("cast run --topics FIFO", ["run", "--topics", str(here / "fifo.json"), "--output", out], 0),
            ("cast validate --format ikat2023 /dev/zero", ["validate", "--format", "ikat2023", "/dev/zero"], 0),
            ("cast validate --format ikat2025 /dev/zero", ["validate", "--format", "ikat2025", "/dev/zero"], 0),
            ("cast run --config /dev/zero", ["run", "--config", "/dev/zero", "--topics", str(topics), "--output", out], 0),
            ("cast answer, 1 GiB piped without a line end", ["answer", "--index", str(here / "none")], 1 << 30),
            ("cast eval retrieval --run (1 GiB, one line)", ["eval", "retrieval", "--run", str(here / "one-line.run"), "--qrels", str(here / "qrels")], 0),
            ("cast run --topics (limit + 1 byte)", ["run", "--topics", str(here / "big-topics.json"), "--output", out], 0),
            ("cast run --config (YAML anchor bomb)", ["run", "--config", str(here / "bomb.yaml"), "--topics", str(topics), "--output", out], 0),
        ]  # fmt: skip
        print("| case | exit | seconds | peak MB | message |\n| --- | ---: | ---: | ---: | --- |")
        for name, argv, stdin_bytes in cases:
            code, seconds, peak, line = measure(argv, args.timeout, stdin_bytes)
            print(f"| {name} | {code} | {seconds:.2f} | {peak:.0f} | {line.replace(folder, 'TMP')[:110]} |")


if __name__ == "__main__":
    main()
