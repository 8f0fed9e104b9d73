"""The term selection rewriter end to end on a fixture index with a hand-written model (a stump on one
feature)."""

from __future__ import annotations

import math

import pytest
from test_rewrite_terms import stump_model
from tiny_index import tiny_index

from cast.core.records import PastTurn, Turn
from cast.core.registry import build_stage
from cast.errors import EmptyUtteranceError
from cast.infra.resources import Resources

FIXTURE_PASSAGES = [
    "radboud university nijmegen",
    "dutch city",
    "university cost",
    "tuition cost city",
    *[f"filler {n}" for n in range(6)],
]


@pytest.fixture(scope="module")
def fixture_index(tmp_path_factory):
    return tiny_index(tmp_path_factory.mktemp("terms-index"), FIXTURE_PASSAGES)


def test_the_rewriter_adds_what_the_model_chooses_as_the_conversation_wrote_it(fixture_index, tmp_path):
    resources = Resources({"index": str(fixture_index), "stemmer": "krovetz", "cache_dir": None})
    model = stump_model(tmp_path / "capitals.json", "capitalised")
    rewriter = build_stage("rewriter", {"name": "term_selection", "model": model}, resources)
    first = Turn(qid="1_1", topic_id="1", turn_id="1", utterance="Tell me about Radboud university",
                 response="It is in Nijmegen, a Dutch city.")  # fmt: skip
    second = Turn(qid="1_2", topic_id="1", turn_id="2", utterance="What does it cost?")

    alone = rewriter.rewrite([], first)
    assert alone.query == "Tell me about Radboud university" and alone.inputs["candidates"] == 0

    rewrite = rewriter.rewrite([PastTurn(turn=first, query=first.utterance)], second)
    # Written with a capital inside a sentence: Radboud, Nijmegen, Dutch (not "university", "city").
    assert rewrite.query == "Dutch Nijmegen Radboud What does it cost?"
    assert rewrite.question == "What does it cost?"
    assert [a["word"] for a in rewrite.inputs["added_terms"]] == ["Dutch", "Nijmegen", "Radboud"]
    assert rewrite.inputs["added_terms"][0]["probability"] == pytest.approx(1 / (1 + math.exp(-4)), abs=1e-4)
    assert rewrite.inputs["candidates"] == 5

    fewer = build_stage("rewriter", {"name": "term_selection", "model": model, "max_terms": 1}, resources)
    assert (
        fewer.rewrite([PastTurn(turn=first, query=first.utterance)], second).query
        == "Dutch What does it cost?"
    )
    assert rewriter.describe()["model_version"] == "stump"
    assert rewriter.describe()["resolved_importance"] == "english"  # ten passages: a small collection

    with pytest.raises(EmptyUtteranceError, match="1_2"):
        rewriter.rewrite([], Turn(qid="1_2", topic_id="1", turn_id="2", utterance="  "))
