"""bench/answers.py's study helpers on hand-computed examples: leave-one-topic-out choice and candidate AUC."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from bench_scripts import load_bench_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def answers_bench():
    return load_bench_script("answers")


def scores(rouge, meteor):
    return {"ROUGE-L": np.array(rouge, dtype=float), "METEOR": np.array(meteor, dtype=float)}


def test_leave_one_topic_out_scores_each_topic_with_the_row_best_elsewhere(answers_bench):
    topics = ["a", "a", "b", "b"]
    per_turn = {
        "o": scores([9, 9, 9, 9], [9, 9, 9, 9]),  # never chosen: it is the baseline
        "x": scores([10, 10, 0, 0], [10, 10, 0, 0]),  # best on a, worst on b
        "y": scores([2, 2, 4, 4], [2, 2, 4, 4]),  # best on b
    }
    result = answers_bench.leave_one_topic_out(per_turn, topics)
    # Held out a: on b, y (4) beats x (0); held out b: on a, x (10) beats y (2).
    assert result["a"] == "y" and result["b"] == "x"
    assert result["per_turn"]["ROUGE-L"].tolist() == [2, 2, 0, 0]


def test_candidate_auc_counts_relevant_above_other_and_ties_half(answers_bench):
    def selection(*scores):
        return SimpleNamespace(
            explanation={"candidates": [{"id": f"p{i}", "entity": s} for i, s in enumerate(scores)]}
        )

    selections = {
        "t1": selection(0.9, 0.5, 0.9),  # p0 relevant: beats p1, ties p2 -> 0.75
        "t2": selection(0.1, 0.2),  # p0 relevant: loses -> 0
        "t3": selection(0.3, 0.4),  # all judged non-relevant: left out
        "t4": selection(0.3),  # not judged: left out
    }
    qrels = {"t1": {"p0": 2}, "t2": {"p0": 1, "p1": 0}, "t3": {"p0": 0, "p1": 0}}
    assert answers_bench.candidate_auc(selections, qrels, "entity", min_grade=1) == pytest.approx(0.375)
