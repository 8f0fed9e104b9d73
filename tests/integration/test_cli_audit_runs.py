"""What a researcher meets on a first day with `cast run` and `cast answer` on the fixture index: resumed
and restarted runs, typed conversations."""

from __future__ import annotations

import io
import json
import shutil
import sys

import pytest
from test_cli_audit import BASELINE, cast, one_error_line


def test_run_resumes_only_the_same_experiment_and_overwrite_starts_over(
    capsys, core_index, fixtures, tmp_path
):
    topics = fixtures / "core" / "conversations.json"
    common = ["run", "--index", core_index, *BASELINE, "--topics", topics]
    code, _, err = cast(capsys, *common, "--set", "summarizer.words=12", "--output", tmp_path / "full")
    assert code == 0, err

    # An interrupted run of the same settings: its first turn done.
    first = (tmp_path / "full.answers.jsonl").read_text().splitlines()[0]
    first_qid = json.loads(first)["qid"]
    run_lines = [
        x for x in (tmp_path / "full.run").read_text().splitlines(True) if x.startswith(first_qid + " ")
    ]
    (tmp_path / "r.run.partial").write_text("".join(run_lines))
    (tmp_path / "r.answers.jsonl.partial").write_text(first + "\n")
    shutil.copy(tmp_path / "r.run.partial", tmp_path / "saved.run.partial")
    shutil.copy(tmp_path / "r.answers.jsonl.partial", tmp_path / "saved.answers.jsonl.partial")

    code, _, err = cast(capsys, *common, "--set", "summarizer.words=20", "--output", tmp_path / "r")
    assert code == 1
    line = one_error_line(err)
    assert "with other settings (summarizer.words: 12 -> 20)" in line and "--overwrite to start over" in line
    assert not (tmp_path / "r.answers.jsonl").exists()

    code, _, err = cast(
        capsys, *common, "--set", "summarizer.words=20", "--output", tmp_path / "r", "--overwrite"
    )
    assert code == 0, err
    assert "starting over" in err
    records = [json.loads(x) for x in (tmp_path / "r.answers.jsonl").read_text().splitlines()]
    assert {r["config"]["summarizer"]["words"] for r in records} == {20}

    shutil.copy(tmp_path / "saved.run.partial", tmp_path / "s.run.partial")
    shutil.copy(tmp_path / "saved.answers.jsonl.partial", tmp_path / "s.answers.jsonl.partial")
    code, _, err = cast(capsys, *common, "--set", "summarizer.words=12", "--output", tmp_path / "s")
    assert code == 0, err
    assert "resuming: 1 turn(s)" in err
    assert (tmp_path / "s.run").read_text() == (tmp_path / "full.run").read_text()


@pytest.mark.parametrize(
    ("typed", "qids", "said"),
    [
        (
            b"Tell me about Glasgow.\n/new\nWhat is climate change?\n",
            ["user_1", "user2_1"],
            "(new conversation)",
        ),
        # A line that is not UTF-8 is refused alone; it used to end the session.
        (
            b"Tell me about Glasgow.\n\xff caf\xe9?\nWhat is climate change?\n",
            ["user_1", "user_2"],
            "(line 2: not UTF-8 text (byte 0xff at column 1); type it again)",
        ),
    ],
)
def test_each_typed_line_is_a_turn_and_each_new_conversation_gets_the_next_number(
    capsys, monkeypatch, core_index, typed, qids, said
):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(typed), encoding="utf-8"))
    code, out, err = cast(
        capsys, "answer", "--index", core_index, *BASELINE, "--set", "rewriter.name=raw", "--json"
    )
    assert code == 0, err
    assert [json.loads(line)["qid"] for line in out.splitlines()] == qids
    assert said in err
