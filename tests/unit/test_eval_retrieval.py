"""Retrieval measures: hand-computed values, trec_eval-equivalent values, CAsT conventions."""

from __future__ import annotations

import math

import pytest

from cast.evaluate.retrieval import RETRIEVAL_MEASURES, evaluate_run, judged_qrels
from cast.formats.runfile import read_run
from cast.formats.topics import read_qrels

# q1: grades d1=3, d2=0, d3=1, d4=2; run a ranks d2, d1, d3 (d4 not retrieved).
QRELS = {"q1": {"d1": 3, "d2": 0, "d3": 1, "d4": 2}, "q2": {"d5": 1, "d6": 4}, "q4": {"d9": 0}}
RUN_A = {"q1": {"d2": 3.0, "d1": 2.0, "d3": 1.0}, "q2": {"d6": 5.0, "d7": 4.0}, "q3": {"d8": 1.0}}


def test_hand_computed_values_at_rel_1():
    q1 = evaluate_run(RUN_A, QRELS).per_turn.loc["q1"]
    dcg = 0 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert q1["nDCG@3"] == pytest.approx(dcg / ideal)  # 0.50249
    assert q1["MAP"] == pytest.approx((1 / 2 + 2 / 3) / 3)  # relevant d1, d3, d4; hits at ranks 2 and 3
    assert q1["MRR"] == pytest.approx(1 / 2)
    assert q1["R@100"] == pytest.approx(2 / 3)
    assert q1["R@1000"] == pytest.approx(2 / 3)


def test_binary_threshold_applies_to_map_mrr_recall_not_ndcg():
    at1 = evaluate_run(RUN_A, QRELS, rel=1).per_turn.loc["q1"]
    at2 = evaluate_run(RUN_A, QRELS, rel=2).per_turn.loc["q1"]
    assert at2["nDCG@3"] == at1["nDCG@3"]
    assert at2["MAP"] == pytest.approx((1 / 2) / 2)  # relevant d1, d4 only
    assert at2["R@100"] == pytest.approx(1 / 2)
    assert at2["MRR"] == pytest.approx(1 / 2)


@pytest.mark.parametrize("rel", [1, 2])
def test_values_equal_trec_eval_through_pytrec_eval(rel):
    import pytrec_eval

    judged = judged_qrels(QRELS)
    trec_measures = {"ndcg_cut.3,10", "map", "recip_rank", "recall.100,1000"}
    # trec_eval's -l option: the lowest grade that counts as relevant for binary measures.
    binary = pytrec_eval.RelevanceEvaluator(judged, trec_measures, relevance_level=rel).evaluate(RUN_A)
    graded = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.3,10"}).evaluate(RUN_A)
    ours = evaluate_run(RUN_A, QRELS, rel=rel).per_turn
    for qid in ("q1", "q2"):
        assert ours.loc[qid, "nDCG@3"] == pytest.approx(graded[qid]["ndcg_cut_3"])
        assert ours.loc[qid, "nDCG@10"] == pytest.approx(graded[qid]["ndcg_cut_10"])
        assert ours.loc[qid, "MAP"] == pytest.approx(binary[qid]["map"])
        assert ours.loc[qid, "MRR"] == pytest.approx(binary[qid]["recip_rank"])
        assert ours.loc[qid, "R@100"] == pytest.approx(binary[qid]["recall_100"])
        assert ours.loc[qid, "R@1000"] == pytest.approx(binary[qid]["recall_1000"])


def test_unjudged_turns_excluded_and_missing_turns_score_zero():
    evaluation = evaluate_run({"q1": RUN_A["q1"], "q3": {"d8": 1.0}, "q4": {"d9": 1.0}}, QRELS)
    assert list(evaluation.per_turn.index) == ["q1", "q2"]  # q4 has only grade-0 judgements: unjudged
    assert list(evaluation.per_turn.columns) == list(RETRIEVAL_MEASURES)
    assert evaluation.unjudged_run_turns == ["q3", "q4"]
    assert evaluation.missing_turns == ["q2"]
    assert (evaluation.per_turn.loc["q2"] == 0).all()
    notes = " ".join(evaluation.notes())
    assert "2 run turns without judgements excluded" in notes
    assert "1 judged turns missing from the run scored 0" in notes


def test_a_run_without_any_judged_turn_scores_zero():
    evaluation = evaluate_run({"q3": {"d8": 1.0}}, QRELS)
    assert evaluation.per_turn.to_numpy().sum() == 0
    assert evaluation.per_turn.dtypes.eq(float).all()


def test_fixture_files(fixtures):
    evaluation = evaluate_run(
        read_run(fixtures / "eval" / "a.run"), read_qrels(fixtures / "eval" / "toy.qrels")
    )
    assert evaluation.mean()["nDCG@3"] == pytest.approx(0.683124, abs=1e-6)


def test_relevance_threshold_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        evaluate_run(RUN_A, QRELS, rel=0)


def test_measures_chosen_by_name():
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d9": 1.0}}
    qrels = {"q1": {"d2": 2, "d3": 0}}
    evaluation = evaluate_run(run, qrels, names=("MRR", "Judged@10"))
    assert list(evaluation.per_turn.columns) == ["MRR", "Judged@10"]
    # d2 is relevant at rank 2; of the three passages ranked, the qrels judge only d2.
    assert evaluation.per_turn.loc["q1"].tolist() == pytest.approx([0.5, 1 / 3])
    with pytest.raises(ValueError, match="unknown measure 'P@5'"):
        evaluate_run(run, qrels, names=("P@5",))
