"""Integration: the evaluation on the real CAsT 2022 dev files (skipped where ../shared/data is absent)."""

from __future__ import annotations

import json

import pytest

from cast.evaluate.answers import TextScorer, evaluate_answers, response_references
from cast.evaluate.retrieval import evaluate_run
from cast.evaluate.wordnet import nltk_data_dir
from cast.formats.answers import read_answers
from cast.formats.topics import load_topics, read_qrels

pytestmark = pytest.mark.integration
TOPICS = "cast/2022-dev/2022_evaluation_topics_flattened_duplicated_v1.0.json"
QRELS = "cast/2022-dev/cast2022.provenance.qrel"


def test_ideal_run_scores_one_and_counts_unjudged_turns(shared_data):
    qrels = read_qrels(shared_data / QRELS)
    qids = {t.qid for c in load_topics(shared_data / TOPICS) for t in c.turns}
    # The ideal run: every turn's judged passages ranked by grade.
    run = {qid: {docid: float(grade) for docid, grade in qrels.get(qid, {"none": 0}).items()} for qid in qids}
    evaluation = evaluate_run(run, qrels)
    assert len(evaluation.per_turn) == 68  # turns with a passage graded 1+
    assert evaluation.per_turn["nDCG@3"].min() == pytest.approx(1.0)
    assert evaluation.per_turn["R@100"].min() == pytest.approx(1.0)
    assert len(evaluation.unjudged_run_turns) == 108 - 68


@pytest.mark.skipif(
    not (nltk_data_dir() / "corpora" / "wordnet").is_dir(), reason="run scripts/setup_wordnet.sh"
)
def test_written_responses_score_full_marks_against_themselves(shared_data, tmp_path):
    conversations = load_topics(shared_data / TOPICS)
    references = dict(list(response_references(conversations).items())[:10])  # unanswered turns would score 0
    path = tmp_path / "responses.answers.jsonl"
    with path.open("w") as f:
        for qid, (text,) in references.items():
            f.write(json.dumps({"qid": qid, "answer": {"text": text, "source_ids": []}}) + "\n")
    evaluation = evaluate_answers(
        read_answers(path), references, scorer=TextScorer(), references_name="responses"
    )
    means = evaluation.mean()
    assert means["ROUGE-L"] == pytest.approx(100.0)
    assert means["BLEU-4"] == pytest.approx(100.0)
    assert means["METEOR"] > 99.0  # METEOR's fragmentation penalty never quite reaches 0
