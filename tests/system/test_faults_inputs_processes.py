"""A FIFO as the topics file, in a `cast run` process of its own: refused, not waited on."""

from __future__ import annotations

import os
import subprocess
import sys

from test_cli_audit import one_error_line


def test_a_fifo_as_topics_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "topics.json"
    os.mkfifo(fifo)
    done = subprocess.run(  # a process of its own: a regression would wait for a writer for ever
        [sys.executable, "-m", "cast.cli", "run", "--topics", str(fifo), "--output", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"{fifo}: is a FIFO (named pipe), not a file" in one_error_line(done.stderr)
