"""PTKB statement selection with models: the bundled bi-encoder and a tiny cross-encoder checkpoint."""

from __future__ import annotations

import pytest
import tiny_models
from test_ptkb import STATEMENTS, TURN, stage

from cast.core.records import Turn


def test_biencoder_ranks_by_meaning(tmp_path):
    turn = Turn(
        qid="1-1_3", topic_id="1-1", turn_id="3", utterance="Can you recommend a meat-free diet for me?"
    )
    selection = stage(tmp_path, name="biencoder", k=1).select(STATEMENTS, [], turn)
    assert selection.statements == (STATEMENTS[2],)  # vegetarian; no word in common with the utterance
    assert max(selection.scores.values()) == selection.scores["3"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return tiny_models.bert_classifier(tmp_path_factory.mktemp("tiny-bert-ptkb"))


def test_cross_encoder_scores_every_statement_with_a_local_checkpoint(tmp_path, tiny_bert):
    selection = stage(tmp_path, name="cross_encoder", model=str(tiny_bert), k=2).select(STATEMENTS, [], TURN)
    assert len(selection.statements) == 2
    assert all(0.0 <= score <= 1.0 for score in selection.scores.values())  # probabilities
    ranked = sorted(selection.scores, key=lambda i: -selection.scores[i])
    assert [s.id for s in selection.statements] == ranked[:2]
