"""PTKB statement selection on hand-made statements, its use in the rewrite, and the PTKB ranking measures."""

from __future__ import annotations

import pytest

from cast.core.records import Conversation, PastTurn, PTKBStatement, Rewrite, Turn
from cast.core.registry import build_stage
from cast.errors import ConfigError
from cast.evaluate.ptkb import evaluate_ptkb, ptkb_qrels, ptkb_rankings
from cast.infra.resources import Resources
from cast.rewrite.ptkb import bm25_scores

STATEMENTS = (
    PTKBStatement("1", "I live in the Netherlands."),
    PTKBStatement("2", "I'm allergic to peanuts."),
    PTKBStatement("3", "I'm vegetarian."),
    PTKBStatement("4", "I like Indian food."),
)
TURN = Turn(qid="1-1_2", topic_id="1-1", turn_id="2", utterance="Which dishes with peanuts should I avoid?")
EARLIER = Turn(qid="1-1_1", topic_id="1-1", turn_id="1", utterance="Suggest an Indian recipe for dinner.")
HISTORY = [PastTurn(turn=EARLIER, query=EARLIER.utterance)]


def stage(tmp_path, **section):
    return build_stage("ptkb", section, Resources({"cache_dir": str(tmp_path), "device": "cpu"}))


def test_bm25_by_hand():
    # "peanuts" is in 1 of 2 statements: idf = ln(1 + 1.5 / 1.5) = ln 2; tf 1 in a 5-word statement (i, m,
    # allergic, to, peanuts) of average length 4: ln 2 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 5 / 4)).
    scores = bm25_scores("peanuts?", ["I'm allergic to peanuts.", "I live here."])
    assert scores[0] == pytest.approx(0.693147 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 5 / 4)), rel=1e-5)
    assert scores[1] == 0.0


def test_bm25_chooses_the_statements_sharing_words_best_first(tmp_path):
    selection = stage(tmp_path, name="bm25", k=2, threshold=0.3).select(STATEMENTS, HISTORY, TURN)
    assert [s.id for s in selection.statements] == ["2"]  # only it shares a word with the utterance
    assert set(selection.scores) == {"1", "2", "3", "4"}
    assert selection.method == "bm25"


def test_the_context_brings_in_statements_about_the_conversation(tmp_path):
    alone = stage(tmp_path, name="bm25", k=2, threshold=0.3).select(STATEMENTS, HISTORY, TURN)
    with_context = stage(tmp_path, name="bm25", k=2, threshold=0.3, context_weight=0.5).select(
        STATEMENTS, HISTORY, TURN
    )
    assert "4" not in [s.id for s in alone.statements]
    assert [s.id for s in with_context.statements] == ["4", "2"]  # "Indian" was said at turn 1


def test_none_and_all(tmp_path):
    assert stage(tmp_path, name="none").select(STATEMENTS, HISTORY, TURN).statements == ()
    chosen = stage(tmp_path, name="all").select(STATEMENTS, HISTORY, TURN)
    assert chosen.statements == STATEMENTS
    assert chosen.scores == {"1": 1.0, "2": 1.0, "3": 1.0, "4": 1.0}


def test_statements_are_appended_to_the_query_but_not_to_the_question(tmp_path):
    selector = stage(tmp_path, name="bm25", k=1)
    chosen = selector.select(STATEMENTS, HISTORY, TURN)
    rewrite = selector.personalise(Rewrite(query="peanut dishes to avoid", method="hqe"), chosen)
    assert rewrite.query == "peanut dishes to avoid I'm allergic to peanuts."
    assert rewrite.answer_question == "peanut dishes to avoid"
    assert rewrite.inputs == {"ptkb": ["2"], "rewritten_query": "peanut dishes to avoid"}
    answering = stage(tmp_path, name="bm25", k=1, rewrite="none", answer=True)
    rewrite = answering.personalise(Rewrite(query="peanut dishes", method="raw"), chosen)
    assert (rewrite.query, rewrite.answer_question) == (
        "peanut dishes",
        "I'm allergic to peanuts. peanut dishes",
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"name": "bm25", "kk": 3}, "ptkb bm25: unknown setting.*kk.*allowed: .*context_weight"),
        ({"name": "bm25", "k": "three"}, "ptkb.k must be int"),
        ({"name": "all", "rewrite": "prepend"}, "ptkb.rewrite must be one of append, context, none"),
        ({"name": "cross_encoder"}, "ptkb cross_encoder needs `model`"),
    ],
)
def test_bad_settings_are_one_line_config_errors(tmp_path, section, message):
    with pytest.raises(ConfigError, match=message):
        stage(tmp_path, **section)


def test_ptkb_measures_by_hand():
    conversation = Conversation(
        "9-1",
        turns=(
            Turn("9-1_1", "9-1", "1", "a", ptkb_relevant=("2", "3")),
            Turn("9-1_2", "9-1", "2", "b"),  # no relevant statement: not judged
        ),
        ptkb=STATEMENTS,
    )
    qrels = ptkb_qrels([conversation])
    assert qrels == {"9-1_1": {"1": 0, "2": 1, "3": 1, "4": 0}}
    records = [
        {"qid": "9-1_1", "ptkb_provenance": {"scores": {"1": 0.9, "2": 0.8, "3": 0.1, "4": 0.5}}},
        {"qid": "9-1_2", "ptkb_provenance": {"scores": {"1": 0.9}}},
    ]
    row = evaluate_ptkb(ptkb_rankings(records), qrels).loc["9-1_1"]
    # Top 3: 1 (not), 2 (relevant), 4 (not). DCG = 1/log2(3); ideal = 1 + 1/log2(3).
    assert row["nDCG@3"] == pytest.approx((1 / 1.5849625) / (1 + 1 / 1.5849625), rel=1e-5)
    assert row["P@3"] == pytest.approx(1 / 3)
    assert row["R@3"] == pytest.approx(0.5)


def test_a_judged_turn_without_a_ranking_scores_zero():
    per_turn = evaluate_ptkb({}, {"9-1_1": {"1": 1, "2": 0}})
    assert per_turn.loc["9-1_1"].tolist() == [0.0, 0.0, 0.0]


def test_a_selection_survives_the_answers_file_round_trip(tmp_path):
    from cast.core.records import PTKBSelection, from_dict, to_dict

    selection = stage(tmp_path, name="bm25", k=2).select(STATEMENTS, HISTORY, TURN)
    assert from_dict(PTKBSelection, to_dict(selection)) == selection
    turn = Turn("9-1_1", "9-1", "1", "a", ptkb_relevant=("2", "3"))
    assert from_dict(Turn, to_dict(turn)) == turn


def test_as_context_the_statements_are_the_rewriters_latest_earlier_turn(tmp_path):
    from cast.rewrite.t5 import build_input

    selector = stage(tmp_path, name="bm25", k=1, rewrite="context")
    chosen = selector.select(STATEMENTS, HISTORY, TURN)
    history = selector.rewriter_history(HISTORY, TURN, chosen)
    assert [past.turn.utterance for past in history] == [EARLIER.utterance, "I'm allergic to peanuts."]
    model_input = build_input(history, TURN.utterance, "paper")
    assert model_input.history.endswith("[TURN] I'm allergic to peanuts.")
    rewrite = selector.personalise(Rewrite(query="q", method="t5"), chosen)
    assert rewrite.query == "q"  # not appended as well
    appending = stage(tmp_path, name="bm25", k=1)
    assert appending.rewriter_history(HISTORY, TURN, chosen) == HISTORY
