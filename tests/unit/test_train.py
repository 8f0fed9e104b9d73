"""``cast train``: a model trained by the command is the file its stage reads, and has learnt what it was shown."""

from __future__ import annotations

import json
from pathlib import Path

from test_summarize_learnt import selection

from cast.cli import main as cast_main
from cast.core.records import to_dict
from cast.core.registry import build_stage
from cast.infra.resources import Resources

BORN = "She was born in Warsaw in 1867."


def test_a_sentence_scorer_trained_on_answers_prefers_what_the_responses_say(tmp_path: Path, capsys) -> None:
    questions = ["When was Marie Curie born?", "Where was she born?", "What year was Curie born in?"]
    topics = tmp_path / "topics.json"
    topics.write_text(
        json.dumps(
            {
                "topic_id": "t",
                "turns": [{"utterance": q, "response": f"Marie Curie: {BORN}"} for q in questions],
            }
        )
    )
    answers = tmp_path / "run.answers.jsonl"
    chosen = to_dict(selection())
    answer = {"text": "Marie Curie was a physicist.", "source_ids": ["p1"], "generator": "topk_trim"}
    answers.write_text(
        "".join(
            json.dumps({"qid": f"t_{n}", "query": q, "selection": chosen, "answer": answer}) + "\n"
            for n, q in enumerate(questions, start=1)
        )
    )
    model = tmp_path / "scorer.json"
    argv = ["train", "sentence-scorer", "--answers", str(answers), "--topics", str(topics)]
    assert cast_main([*argv, "--trees", "20", "--model", str(model)]) == 0
    assert f"model written to {model}" in capsys.readouterr().out
    summarizer = build_stage(
        "summarizer",
        {"name": "learnt_extractive", "model": str(model), "words": 7, "fill": False},
        Resources({}),
    )
    # The trained scorer puts the sentence the responses hold first (the answer then gives it after the sentence
    # its "She" refers to).
    candidates = summarizer.candidates(selection())
    scores = summarizer.relevance("Tell me about Marie Curie.", selection(), candidates)
    assert max(zip(scores, (c.text for c in candidates), strict=True))[1] == BORN


def test_a_missing_input_is_one_line_naming_it(tmp_path: Path, capsys) -> None:
    argv = ["train", "sentence-scorer", "--answers", str(tmp_path / "none.jsonl"), "--topics", str(tmp_path)]
    assert cast_main(argv) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"cast train: error: --answers {tmp_path / 'none.jsonl'}: no such file or folder"
    )
