"""`cast answer` through the real command line, on the fixture index with the baseline stages."""

import subprocess
import sys

from fast_pipeline import FAST, cli_sets

BASELINE = cli_sets("rewriter.name=raw", *FAST)


def cast(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "cast.cli", "answer", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_interactive_session_answers_each_line_and_starts_over(core_index):
    proc = cast(
        "--index",
        str(core_index),
        *BASELINE,
        stdin="Which river flows through Glasgow?\n\n/new\ntreaty on climate change\n/quit\nignored\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert "The River Clyde flows through the city of Glasgow" in proc.stdout
    assert "[p4] River Clyde" in proc.stdout
    assert "[p6] Paris Agreement" in proc.stdout
    assert "empty utterance" in proc.stderr
    assert "(new conversation)" in proc.stderr
    assert "ignored" not in proc.stdout


def test_one_utterance_with_history_as_json(core_index):
    import json

    proc = cast(
        "--index",
        str(core_index),
        *BASELINE,
        "--json",
        "--history",
        "Tell me about Glasgow.",
        "--",
        "Which river flows through the city?",
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["qid"] == "user_2"
    assert record["query"] == "Which river flows through the city?"
    assert record["answer"]["source_ids"][0] == "p4"
