"""What a researcher meets on a first day with `cast run`, `cast answer` and `cast eval`: each mistake gives one
error line that says what to fix, before any slow work, and no output that looks complete when it is not."""

from __future__ import annotations

import io
import json
import sys

import pytest
from fast_pipeline import FAST, cli_sets

from cast.cli import main
from cast.errors import CastError, DataFormatError, ModelUnavailableError
from cast.formats.outputs import RunOutputs, resume_conflict
from cast.formats.runfile import read_run
from cast.formats.topics import read_qrels

BASELINE = cli_sets("rewriter.name=manual", *FAST)


def cast(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- file-system errors ----------------------------------------------------------------------------------------


def test_an_unwritable_output_file_is_one_line_and_verbose_shows_the_traceback(capsys, fixtures, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    args = [
        "eval",
        "retrieval",
        "--run",
        fixtures / "eval" / "a.run",
        "--qrels",
        fixtures / "eval" / "toy.qrels",
    ]

    code, _, err = cast(capsys, *args, "--csv", a_file / "table.csv")
    assert code == 1
    assert one_error_line(err) == f"cast eval: error: {a_file} is a file, so it cannot be used as a folder"

    code, _, err = cast(capsys, "-v", *args, "--csv", a_file / "table.csv")
    assert code == 1 and "Traceback" in err


def test_a_reader_that_goes_away_stops_the_command_quietly(monkeypatch, fixtures, tmp_path):
    sink = (tmp_path / "sink").open("w")

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            return sink.fileno()

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    code = main(
        [
            "eval",
            "retrieval",
            "--run",
            str(fixtures / "eval" / "a.run"),
            "--qrels",
            str(fixtures / "eval" / "toy.qrels"),
        ]
    )
    sink.close()
    assert code == 141


# --- cast run outputs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "runs/", "."])
def test_output_prefix_that_names_a_folder_is_refused(tmp_path, monkeypatch, prefix):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    with pytest.raises(CastError, match="prefix of the output files: give e.g."):
        RunOutputs(prefix, "t")
    assert list(tmp_path.iterdir()) == [tmp_path / "runs"]  # nothing written beside it


def test_output_prefix_under_a_file_is_refused_before_any_work(tmp_path):
    (tmp_path / "topics.json").write_text("[]")
    with pytest.raises(CastError, match=r"topics\.json is a file, not a folder; choose another --output"):
        RunOutputs(tmp_path / "topics.json" / "eg", "t")


def test_a_run_tag_with_a_space_is_refused_before_the_run_not_after(tmp_path):
    with pytest.raises(CastError, match="without whitespace, got 'my tag': choose another"):
        RunOutputs(tmp_path / "r", "my tag")


def test_a_run_line_cut_short_by_a_kill_does_not_block_resuming(tmp_path):
    outputs = RunOutputs(tmp_path / "r", "t")
    outputs.run_partial.write_text("1_1 Q0 d1 1 2.000000 t\n1_1 Q0 d2 2 1.000000 t\n1_2 Q0 d1 1 2.0")
    outputs.answers_partial.write_text(json.dumps({"qid": "1_1", "utterance": "a"}) + "\n")
    assert list(outputs.completed()) == ["1_1"]
    assert read_run(outputs.run_partial) == {"1_1": {"d1": 2.0, "d2": 1.0}}


def test_resume_conflict_names_what_differs():
    config = {"selector": {"name": "o", "n": 3}, "summarizer": {"name": "topk_trim", "words": 50}}
    done = {"1_1": {"qid": "1_1", "utterance": "a?", "config": json.loads(json.dumps(config))}}
    assert resume_conflict(done, {"1_1": "a?", "1_2": "b?"}, config) is None
    assert resume_conflict({}, {"1_1": "a?"}, config) is None

    changed = {**config, "summarizer": {"name": "topk_trim", "words": 70}}
    assert resume_conflict(done, {"1_1": "a?"}, changed) == (
        "it answered turn 1_1 with other settings (summarizer.words: 50 -> 70)"
    )
    assert (
        resume_conflict(done, {"2_1": "a?"}, config) == "it answered turn 1_1, which is not in these topics"
    )
    assert resume_conflict(done, {"1_1": "b?"}, config) == "turn 1_1 had another utterance"


# --- cast answer -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--history", "Tell me about Glasgow.", "Which river?"], "put `--` before it"),
        (["   "], "UTTERANCE is empty"),
        (["--history", "a", " ", "--", "b"], "--history utterance 2 is empty"),
    ],
)
def test_answer_arguments_are_checked_before_the_models_load(capsys, tmp_path, argv, message):
    # The index does not exist: the check must come first, or that would be the error.
    code, _, err = cast(capsys, "answer", "--index", tmp_path / "no-index", *argv)
    assert code == 1
    assert message in one_error_line(err)


# --- cast eval -------------------------------------------------------------------------------------------------


def test_rel_below_one_is_an_argument_error(capsys, fixtures):
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "retrieval", "--run", str(fixtures / "eval" / "a.run"), "--qrels", "q", "--rel", "0"])
    assert exit_.value.code == 2
    assert "argument --rel: 0 counts unjudged (grade 0) passages as relevant" in capsys.readouterr().err


def test_a_run_of_other_topics_than_the_qrels_is_an_error_not_zeros(capsys, fixtures, tmp_path):
    other = tmp_path / "other.run"
    other.write_text("31_1 Q0 d1 1 2.0 t\n")
    code, out, err = cast(
        capsys, "eval", "retrieval", "--run", other, "--qrels", fixtures / "eval" / "toy.qrels"
    )
    assert code == 1 and out == ""
    assert "no turn of" in one_error_line(err) and "run turns e.g. 31_1, judged turns e.g. q1" in err


def test_answers_of_other_turns_than_the_references_are_an_error(capsys, fixtures, tmp_path):
    topics = tmp_path / "mine.json"
    topics.write_text(json.dumps({"topic_id": "x", "turns": [{"utterance": "a?", "response": "An answer."}]}))
    answers = fixtures / "eval" / "o.answers.jsonl"
    code, _, err = cast(capsys, "eval", "answers", "--answers", answers, "--topics", topics)
    assert code == 1
    assert "has a reference in the written responses of mine.json" in one_error_line(err)


def test_report_writes_nothing_when_an_input_is_wrong(capsys, fixtures, tmp_path):
    out = tmp_path / "report"
    code, _, err = cast(
        capsys,
        "eval", "report", "--answers", fixtures / "eval" / "o.answers.jsonl", "--topics", fixtures / "eval" / "topics.json",
        "--calibration", fixtures / "eval" / "topics.json", "--out", out,
    )  # fmt: skip
    assert code == 1 and "missing column(s) min_length, words" in one_error_line(err)
    assert not out.exists()

    code, _, err = cast(
        capsys, "eval", "report", "--runs", fixtures / "eval" / "a.run", "--qrels", fixtures / "eval" / "toy.qrels",
        "--out", fixtures / "eval" / "a.run",
    )  # fmt: skip
    assert code == 1 and "is a file; give a folder for the report" in one_error_line(err)


def test_empty_qrels_are_an_error(tmp_path):
    (tmp_path / "empty.qrel").write_text("\n")
    with pytest.raises(DataFormatError, match="the qrels file is empty"):
        read_qrels(tmp_path / "empty.qrel")


def test_a_huge_wrong_line_is_quoted_short(tmp_path):
    path = tmp_path / "eg.answers.jsonl"
    path.write_text(json.dumps({"qid": "1_1", "text": "word " * 5000}) + "\n")
    with pytest.raises(DataFormatError) as caught:
        read_run(path)
    assert len(str(caught.value)) < 300 and "more characters" in str(caught.value)


def test_a_missing_model_folder_is_not_told_to_download(tmp_path):
    message = str(ModelUnavailableError(str(tmp_path / "bart"), "there is no folder", "summarizer.model"))
    assert "huggingface-cli" not in message and "--set summarizer.model=/path/to/model" in message
    assert "huggingface-cli download facebook/bart-large-cnn" in str(
        ModelUnavailableError("facebook/bart-large-cnn", "not in the cache")
    )
