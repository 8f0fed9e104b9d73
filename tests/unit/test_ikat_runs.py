"""iKAT run files: each year's writer and validator round trip, the organisers' sample runs, broken runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.cli import main as cast_main
from cast.formats.ikat_runs import (
    MAX_RESPONSE_WORDS_2025,
    ikat_run_path,
    read_ikat_run,
    validate_ikat_run,
    write_ikat_run,
)
from cast.formats.runfile import write_run

P1, P2, P3 = (f"clueweb22-en0034-09-0345{n}:1" for n in (1, 2, 3))


def _outputs(
    tmp_path: Path, answer: str = "Delft, Eindhoven and Amsterdam rank highest."
) -> tuple[Path, Path]:
    """A finished ``cast run``'s two files for two turns."""
    run_path, answers_path = tmp_path / "x.run", tmp_path / "x.answers.jsonl"
    write_run(run_path, {"1-1_1": [(P1, 3.0), (P2, 2.0), (P3, 1.0)], "1-1_2": [(P3, 5.0), (P1, 4.0)]}, "x")
    ptkb = {"statements": [{"id": "5", "text": "I study computer science."}], "scores": {"5": 0.7, "2": 0.1}}
    records = [
        {
            "qid": "1-1_1",
            "answer": {"text": answer, "source_ids": [P2], "generator": "g"},
            "selection": {
                "passages": [{"passage": {"id": P2, "text": "Delft ...", "title": None}, "score": 2.0}]
            },
            "ptkb_provenance": {**ptkb, "method": "biencoder"},
        },
        {"qid": "1-1_2", "answer": {"text": "Yes.", "source_ids": [P3, P1], "generator": "g"}},
    ]
    answers_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return run_path, answers_path


@pytest.mark.parametrize("fmt", ["ikat2023", "ikat2024", "ikat2025"])
def test_what_the_writer_writes_the_validator_accepts(tmp_path, fmt):
    path = ikat_run_path(tmp_path / "x", fmt)
    problems = write_ikat_run(path, *_outputs(tmp_path), fmt, "cast-x")
    assert problems == []
    assert validate_ikat_run(read_ikat_run(path, fmt), fmt, ["1-1_1", "1-1_2"]) == []
    assert cast_main(["validate", "--format", fmt, str(path)]) == 0


def test_2023_and_2024_carry_the_ranking_used_flags_and_ptkb(tmp_path):
    outputs = _outputs(tmp_path)
    write_ikat_run(tmp_path / "a.json", *outputs, "ikat2023", "cast-x")
    write_ikat_run(tmp_path / "b.json", *outputs, "ikat2024", "cast-x", run_type="manual")
    run_2023 = json.loads((tmp_path / "a.json").read_text())
    response = run_2023["turns"][0]["responses"][0]
    assert [(p["id"], p["used"]) for p in response["passage_provenance"]] == [
        (P1, False),
        (P2, True),
        (P3, False),
    ]
    assert response["passage_provenance"][1]["text"] == "Delft ..."
    assert response["ptkb_provenance"] == [{"id": "5", "text": "I study computer science.", "score": 0.7}]
    run_2024 = json.loads((tmp_path / "b.json").read_text())
    assert (run_2024["run_type"], run_2024["eval_response"]) == ("manual", True)
    assert run_2024["turns"][0]["responses"][0]["ptkb_provenance"] == [5]
    assert run_2024["turns"][1]["responses"][0]["ptkb_provenance"] == []


def test_2025_lines_cite_their_references_within_250_words(tmp_path):
    long_answer = " ".join(["word"] * 300)
    write_ikat_run(tmp_path / "c.jsonl", *_outputs(tmp_path, long_answer), "ikat2025", "cast-x", team_id="t")
    first, second = read_ikat_run(tmp_path / "c.jsonl", "ikat2025")
    assert first["metadata"] == {"team_id": "t", "run_id": "cast-x", "run_type": "automatic"}
    assert first["turn_id"] == "1-1_1"
    assert first["references"] == {P1: 3.0, P2: 2.0, P3: 1.0}
    assert len(first["responses"][0]["text"].split()) == MAX_RESPONSE_WORDS_2025
    assert first["responses"][0]["citations"] == {P2: 2.0}
    assert second["responses"][0]["citations"] == {P3: 5.0, P1: 4.0}


@pytest.mark.parametrize(
    ("name", "fmt"), [("sample_run_2023.json", "ikat2023"), ("sample_run_2024.json", "ikat2024")]
)
def test_the_organisers_sample_runs_are_valid(fixtures, name, fmt):
    assert validate_ikat_run(read_ikat_run(fixtures / "ikat" / name, fmt), fmt) == []


def _sample_2024(fixtures) -> dict:
    return read_ikat_run(fixtures / "ikat" / "sample_run_2024.json", "ikat2024")


@pytest.mark.parametrize(
    ("breaks", "problem"),
    [
        (lambda run: run.update(run_type="semi-automatic"), "'run_type' is 'semi-automatic'"),
        (lambda run: run["turns"][0].update(turn_id="0-1"), "is not '<topic>_<turn number>'"),
        (lambda run: run["turns"][0]["responses"][0].update(citations={}), "unknown fields ['citations']"),
        (
            lambda run: run["turns"][0]["responses"][0]["passage_provenance"][2].update(score=9.0),
            "scores must not increase",
        ),
        (
            lambda run: run["turns"][1]["responses"][0]["passage_provenance"][0].update(used=False),
            "no passage is",
        ),
        (
            lambda run: run["turns"][1]["responses"][0]["passage_provenance"][0].update(id="WIKI13_1-1"),
            "ClueWeb22",
        ),
        (lambda run: run["turns"][1]["responses"][0].update(ptkb_provenance=["twelve"]), "statement ids"),
        (lambda run: run["turns"].append(run["turns"][0]), "more than once: ['0_1']"),
    ],
)
def test_the_validator_names_what_is_wrong(fixtures, breaks, problem):
    run = _sample_2024(fixtures)
    breaks(run)
    problems = validate_ikat_run(run, "ikat2024")
    assert any(problem in p for p in problems), problems


def test_2025_rules(tmp_path):
    write_ikat_run(tmp_path / "c.jsonl", *_outputs(tmp_path), "ikat2025", "cast-x")
    first, second = read_ikat_run(tmp_path / "c.jsonl", "ikat2025")
    first["responses"][0]["text"] = " ".join(["word"] * 251)
    second["responses"][0]["citations"] = {"clueweb22-en0000-00-00000:9": 1.0}
    del second["metadata"]["team_id"]
    problems = validate_ikat_run([first, second], "ikat2025", ["1-1_1", "1-1_2", "1-1_3"])
    assert "line 1 (turn 1-1_1): the responses have 251 words, more than 250" in problems
    assert any("citations not among the references" in p for p in problems)
    assert any("'metadata' lacks ['team_id']" in p for p in problems)
    assert "1 turns of the topics are missing, e.g. ['1-1_3']" in problems


def test_cast_validate_reports_problems_and_fails(tmp_path, fixtures, capsys):
    run = _sample_2024(fixtures)
    run["run_name"] = ""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    assert cast_main(["validate", "--format", "ikat2024", str(path)]) == 1
    assert "'run_name' is missing or empty" in capsys.readouterr().out
    path.write_text("{", encoding="utf-8")
    assert cast_main(["validate", "--format", "ikat2024", str(path)]) == 1
    assert "not valid JSON" in capsys.readouterr().err
