"""Re-ranking without a model: reordering, interpolation with the first stage, the fusion settings, passage
texts, the cross-encoder's missing model."""

from __future__ import annotations

import pytest

from cast.core.records import Passage, ScoredPassage
from cast.core.registry import build_stage
from cast.errors import ConfigError
from cast.infra.resources import Resources
from cast.infra.text import passage_text
from cast.rank.rerank import rank_head, reorder


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def resources() -> Resources:
    return Resources({"device": "cpu", "cache_dir": None})


def ranking(texts: list[str]) -> list[ScoredPassage]:
    return [
        ScoredPassage(
            Passage(id=f"p{i}", text=t), score=-float(i), first_stage_score=-float(i), first_stage_rank=i + 1
        )
        for i, t in enumerate(texts)
    ]


def test_reorder_sorts_by_new_score_and_keeps_first_stage_order_on_ties():
    head = ranking(["a", "b", "c"])
    ranked = reorder(head, [0.2, 0.9, 0.2])
    assert [p.id for p in ranked] == ["p1", "p0", "p2"]
    assert ranked[0].score == 0.9 and ranked[0].first_stage_rank == 2 and ranked[0].first_stage_score == -1.0


def test_rank_head_interpolates_with_the_first_stage_when_asked():
    head = ranking(["a", "b", "c"])  # first-stage scores 0, -1, -2
    model_scores = [0.0, 1.0, 0.9]
    assert [p.id for p in rank_head(head, model_scores)] == ["p1", "p2", "p0"]
    # min-max: first stage [1, .5, 0], model [0, 1, .9]; at weight .5: [.5, .75, .45]
    fused = rank_head(head, model_scores, first_stage_weight=0.5, normalisation="minmax")
    assert [p.id for p in fused] == ["p1", "p0", "p2"]
    assert [p.score for p in fused] == pytest.approx([0.75, 0.5, 0.45])
    assert fused[0].first_stage_score == -1.0


@pytest.mark.parametrize(
    "setting, message",
    [({"first_stage_weight": 1.5}, "first_stage_weight"), ({"normalisation": "rank"}, "normalisation")],
)
def test_fusion_settings_are_checked(setting, message):
    with pytest.raises(ConfigError, match=message):
        build_stage("reranker", {"name": "biencoder", **setting}, resources())


def test_passage_text_prefixes_the_title():
    assert passage_text(Passage("x", "Text.", "Title"), with_title=True) == "Title. Text."
    assert passage_text(Passage("x", "Title of it.", "Title"), with_title=True) == "Title of it."
    assert passage_text(Passage("x", "Text.", "Title"), with_title=False) == "Text."


def test_cross_encoder_needs_a_model():
    with pytest.raises(ConfigError, match="needs `model`"):
        build_stage("reranker", {"name": "cross_encoder"}, resources())
