"""TREC RAG 2024 answer files: the writer's lines, the validator's rules (the track's checker's), `cast validate`, and
`cast run --format trec-rag24` end to end: tests/integration/test_rag_runs_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cast.cli import main as cast_main
from cast.core.records import Answer, AnswerSentence
from cast.formats.rag_runs import (
    MAX_WORDS,
    rag24_entry,
    rag24_run_path,
    read_rag24_run,
    validate_rag24_run,
    write_rag24_run,
)
from cast.formats.runfile import write_run

SEGMENTS = [f"msmarco_v2.1_doc_51_766815931#{n}_16068{n:05d}" for n in range(30)]
TOPICS = {"31_1": "What is throat cancer?", "31_2": "Is it treatable?"}


def _outputs(tmp_path: Path) -> tuple[Path, Path]:
    """A finished ``cast run``'s two files for two turns: one answer attributed sentence by sentence (its second
    sentence citing a passage ranked 25th), one without attribution (a seq2seq generator's)."""
    run_path, answers_path = tmp_path / "x.run", tmp_path / "x.answers.jsonl"
    write_run(
        run_path,
        {
            "31_1": [(s, 30.0 - n) for n, s in enumerate(SEGMENTS)],
            "31_2": [(SEGMENTS[3], 2.0), (SEGMENTS[4], 1.0)],
        },
        "x",
    )
    records = [
        {
            "qid": "31_1",
            "utterance": TOPICS["31_1"],
            "answer": {
                "text": "Throat cancer is cancer of the throat. It starts in the pharynx.",
                "source_ids": [SEGMENTS[1], SEGMENTS[24]],
                "generator": "entity_extractive",
                "sentences": [
                    {"text": "Throat cancer is cancer of the throat.", "passage_id": SEGMENTS[1]},
                    {"text": "It starts in the pharynx.", "passage_id": SEGMENTS[24]},
                ],
            },
        },
        {
            "qid": "31_2",
            "utterance": TOPICS["31_2"],
            "answer": {
                "text": "Yes. Most are.",
                "source_ids": [SEGMENTS[4], SEGMENTS[3]],
                "generator": "seq2seq",
            },
        },
    ]
    answers_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return run_path, answers_path


def test_each_turn_is_a_line_whose_sentences_cite_positions_in_its_ranking(tmp_path):
    path = rag24_run_path(tmp_path / "x")
    assert path.name == "x.trec-rag24.jsonl"
    assert write_rag24_run(path, *_outputs(tmp_path), "cast-offline") == []
    first, second = read_rag24_run(path)
    # The first 20 of the ranking, the cited 25th in place of the 20th.
    assert first["references"] == SEGMENTS[:19] + [SEGMENTS[24]]
    assert first["answer"] == [
        {"text": "Throat cancer is cancer of the throat.", "citations": [1]},
        {"text": "It starts in the pharynx.", "citations": [19]},
    ]
    assert (first["run_id"], first["topic_id"], first["topic"]) == ("cast-offline", "31_1", TOPICS["31_1"])
    assert first["response_length"] == 12
    # No attribution: each sentence cites the passages the answer was written from.
    assert second["references"] == [SEGMENTS[3], SEGMENTS[4]]
    assert second["answer"] == [
        {"text": "Yes.", "citations": [1, 0]},
        {"text": "Most are.", "citations": [1, 0]},
    ]
    assert validate_rag24_run([first, second], TOPICS) == []
    assert cast_main(["validate", "--format", "trec-rag24", str(path)]) == 0


def test_the_track_topics_file_is_read_as_id_tab_text(tmp_path, capsys):
    path = rag24_run_path(tmp_path / "x")
    write_rag24_run(path, *_outputs(tmp_path), "cast-offline")
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"{qid}\t{text}\n" for qid, text in TOPICS.items()) + "31_3\tAnd then?\n")
    assert cast_main(["validate", "--format", "trec-rag24", str(path), "--topics", str(topics)]) == 1
    assert "1 topic ids of the topics are missing, e.g. ['31_3']" in capsys.readouterr().out


def test_an_answer_over_400_words_loses_sentences_from_its_end_and_an_abstention_cites_nothing():
    sentence = "word " * 150
    long = Answer(
        "",
        (SEGMENTS[0],),
        "g",
        sentences=tuple(AnswerSentence(sentence.strip(), SEGMENTS[0]) for _ in range(3)),
    )
    entry = rag24_entry("31_1", "q", {SEGMENTS[0]: 1.0}, long, "r")
    assert len(entry["answer"]) == 2 and entry["response_length"] == 300 <= MAX_WORDS
    none = Answer("No answer was found.", (SEGMENTS[0],), "g", no_answer_reason="nothing selected")
    entry = rag24_entry("31_1", "q", {SEGMENTS[0]: 1.0}, none, "r")
    assert entry["answer"] == [{"text": "No answer was found.", "citations": []}]


def _valid() -> dict:
    return {
        "run_id": "r",
        "topic_id": "31_1",
        "topic": TOPICS["31_1"],
        "references": SEGMENTS[:3],
        "response_length": 3,
        "answer": [{"text": "It is cancer.", "citations": [0, 2]}],
    }


@pytest.mark.parametrize(
    ("breaks", "problem"),
    [
        ({"answer": None}, "lacks answer"),
        ({"extra": 1}, "unknown fields extra"),
        ({"references": SEGMENTS[:21]}, "21 references, more than 20"),
        ({"references": [SEGMENTS[0]] * 3}, "more than once"),
        ({"references": ["MARCO_D59865-7", *SEGMENTS[:2]]}, "not MS MARCO v2.1 segment ids"),
        ({"references": []}, "'references' is empty"),
        ({"answer": [{"text": "It is cancer.", "citations": [3]}]}, "citation 3 is not a position in the 3"),
        ({"answer": [{"text": "It is cancer.", "citations": [1, 1]}]}, "cited twice"),
        (
            {"answer": [{"text": "It is cancer.", "citations": ["0"]}]},
            "'citations' must be a list of positions",
        ),
        ({"answer": []}, "'answer' must be a non-empty list"),
        ({"response_length": 4}, "'response_length' is 4, but the answer has 3 words"),
        ({"topic": "What is it?"}, "'topic' is not the topic's text"),
        (
            {"answer": [{"text": "w " * 401, "citations": []}], "response_length": 401},
            "401 words, more than 400",
        ),
    ],
)
def test_the_validator_names_what_is_wrong(breaks, problem):
    entry = _valid()
    for key, value in breaks.items():
        if value is None:
            del entry[key]
        else:
            entry[key] = value
    assert validate_rag24_run([_valid()], {"31_1": TOPICS["31_1"]}) == []
    found = validate_rag24_run([entry], {"31_1": TOPICS["31_1"]})
    assert any(problem in p for p in found), found


def test_the_run_as_a_whole():
    second = {**_valid(), "run_id": "other"}
    problems = validate_rag24_run([_valid(), second], TOPICS)
    assert any("2 run ids" in p for p in problems)
    assert any("answered more than once: ['31_1']" in p for p in problems)
    assert any("1 topic ids of the topics are missing, e.g. ['31_2']" in p for p in problems)
    assert validate_rag24_run([]) == ["the file has no lines"]


def test_any_ids_accepts_other_collections():
    entry = {**_valid(), "references": ["p1", "p2", "p3"]}
    assert validate_rag24_run([entry]) != []
    assert validate_rag24_run([entry], any_ids=True) == []
