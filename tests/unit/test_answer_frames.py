"""Answer files from an answerer's frame: TREC RAG 2024 and iKAT 2025 lines as the run-file writers make them, the
references a result frame's rankings (or the passages read), and nothing written where the format's rules fail."""

from __future__ import annotations

import pandas as pd
import pytest

from cast.core.records import (
    Answer,
    AnswerSentence,
    Passage,
    PTKBSelection,
    PTKBStatement,
    ScoredPassage,
    Selection,
)
from cast.errors import CastError
from cast.formats.answer_frames import write_answer_file
from cast.formats.ikat_runs import read_ikat_run, validate_ikat_run
from cast.formats.rag_runs import read_rag24_run, validate_rag24_run

CLUEWEB = ["clueweb22-en0034-09-03452:1", "clueweb22-en0034-09-03452:2", "clueweb22-en0001-00-00001:7"]


def _answers(ids: list[str]) -> pd.DataFrame:
    """An answerer's frame of two turns: the first answer cites its sentences' passages, the second none."""
    selection = Selection(
        passages=tuple(
            ScoredPassage(Passage(i, f"text {i}"), score) for i, score in zip(ids, (0.9, 0.4), strict=False)
        ),
        method="eg",
    )
    cited = Answer(
        "Glasgow is in Scotland. It lies on the Clyde.",
        (ids[0], ids[1]),
        "entity_extractive",
        sentences=(
            AnswerSentence("Glasgow is in Scotland.", ids[0]),
            AnswerSentence("It lies on the Clyde.", ids[1]),
        ),
    )
    plain = Answer("COP26 was held there.", (ids[0],), "seq2seq")
    return pd.DataFrame(
        [
            {
                "qid": "1_1",
                "query": "glasgow",
                "query_0": "Tell me about Glasgow.",
                "answer": cited,
                "selection": selection,
            },
            {
                "qid": "1_2",
                "query": "cop26 glasgow",
                "query_0": "What was held there?",
                "answer": plain,
                "selection": selection,
            },
        ]
    )


def test_rag24_lines_cite_the_result_frames_ranking(tmp_path):
    results = pd.DataFrame(
        [
            ("1_1", CLUEWEB[2], 3.0),
            ("1_1", CLUEWEB[1], 2.0),
            ("1_1", CLUEWEB[0], 1.0),
            ("1_2", CLUEWEB[0], 5.0),
        ],
        columns=["qid", "docno", "score"],
    )
    path = tmp_path / "eg.trec-rag24.jsonl"
    assert write_answer_file(_answers(CLUEWEB), path, "trec-rag24", run_id="eg", results=results) == []
    first, second = read_rag24_run(path)
    assert (
        validate_rag24_run(
            [first, second], {"1_1": "Tell me about Glasgow.", "1_2": "What was held there?"}, any_ids=True
        )
        == []
    )
    assert first["references"] == [CLUEWEB[2], CLUEWEB[1], CLUEWEB[0]]  # the ranking, by score
    assert first["answer"] == [
        {"text": "Glasgow is in Scotland.", "citations": [2]},
        {"text": "It lies on the Clyde.", "citations": [1]},
    ]
    assert second["topic"] == "What was held there?" and second["answer"][0]["citations"] == [0]


def test_without_results_the_references_are_the_passages_read(tmp_path):
    path = tmp_path / "eg.ikat2025.jsonl"
    assert write_answer_file(_answers(CLUEWEB), path, "ikat2025", run_id="eg", team_id="us") == []
    lines = read_ikat_run(path, "ikat2025")
    assert validate_ikat_run(lines, "ikat2025", ["1_1", "1_2"]) == []
    assert lines[0]["references"] == {CLUEWEB[0]: 0.9, CLUEWEB[1]: 0.4}
    assert lines[0]["responses"][0]["citations"] == {CLUEWEB[0]: 0.9, CLUEWEB[1]: 0.4}
    assert lines[0]["metadata"] == {"team_id": "us", "run_id": "eg", "run_type": "automatic"}


def test_ikat_lines_carry_the_ptkb_statements_chosen_for_each_turn(tmp_path):
    vegetarian, glasgow = PTKBStatement("3", "I am vegetarian."), PTKBStatement("12", "I live in Glasgow.")
    chosen = PTKBSelection((glasgow, vegetarian), {"3": 0.5, "12": 2.0, "7": -1.0}, "bm25")
    answers = _answers(CLUEWEB).assign(ptkb_selection=[chosen, None])  # the second turn: none chosen
    path = tmp_path / "eg.ikat2025.jsonl"
    assert write_answer_file(answers, path, "ikat2025", run_id="eg") == []
    lines = read_ikat_run(path, "ikat2025")
    assert validate_ikat_run(lines, "ikat2025", ["1_1", "1_2"]) == []
    assert [line["responses"][0]["ptkb_provenance"] for line in lines] == [[12, 3], []]  # best first, as ids


def test_a_file_that_breaks_the_rules_is_not_written(tmp_path):
    path = tmp_path / "eg.ikat2025.jsonl"
    path.write_text("an earlier file\n")
    problems = write_answer_file(_answers(["p1", "p2"]), path, "ikat2025", run_id="eg")
    assert problems and "ClueWeb22" in problems[0] and not path.exists()
    with pytest.raises(CastError, match="unknown answer file format 'trec-rag25'"):
        write_answer_file(_answers(CLUEWEB), path, "trec-rag25", run_id="eg")
    with pytest.raises(CastError, match="lacks the column"):
        write_answer_file(pd.DataFrame({"qid": ["1"]}), path, "trec-rag24", run_id="eg")
