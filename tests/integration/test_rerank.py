"""Re-rankers: eq. 3 on hand-computed logits, a tiny random BERT cross-encoder through the real tokenizer/batching
code, the missing-model message, and the bundled all-MiniLM-L6-v2 bi-encoder on an obvious case."""

from __future__ import annotations

import math

import pytest
import tiny_models
from test_rerank_scores import (
    offline,  # noqa: F401  (fixtures)
    ranking,
    resources,
)

from cast.core.records import Passage, ScoredPassage
from cast.core.registry import build_stage
from cast.errors import ConfigError, ModelUnavailableError
from cast.rank.rerank import relevance_probability


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory):
    return tiny_models.bert_classifier(tmp_path_factory.mktemp("tiny-bert"))


TEXTS = [
    "the garage door opener stopped working",
    "throat cancer symptoms",
    "how much does it cost to repair a garage door",
    "lung cancer treatment",
    "what is smoking",
]


def test_relevance_probability_is_the_softmax_of_the_relevant_class():
    import torch

    logits = torch.tensor([[0.0, math.log(3.0)], [math.log(3.0), 0.0]])
    assert relevance_probability(logits).tolist() == pytest.approx([0.75, 0.25])
    assert relevance_probability(logits, relevant_label=0).tolist() == pytest.approx([0.25, 0.75])
    assert relevance_probability(torch.tensor([[0.0], [math.log(3.0)]])).tolist() == pytest.approx(
        [0.5, 0.75]
    )


def test_cross_encoder_scores_the_head_in_batches_with_the_real_model(tiny_bert):
    import torch

    reranker = build_stage(
        "reranker",
        {"name": "cross_encoder", "model": str(tiny_bert), "depth": 4, "batch_size": 3},
        resources(),
    )
    query = "what are the symptoms of throat cancer?"
    ranked = reranker.rerank(query, ranking(TEXTS))
    assert len(ranked) == 4 and {p.id for p in ranked} == {"p0", "p1", "p2", "p3"}
    assert [p.score for p in ranked] == sorted((p.score for p in ranked), reverse=True)

    # Each pair scored alone (no padding) gives the same probabilities as the padded batches.
    for scored in ranked:
        encoded = reranker.tokenizer(query, scored.passage.text, return_tensors="pt")
        with torch.inference_mode():
            logits = reranker.model(**encoded).logits
        assert scored.score == pytest.approx(torch.softmax(logits, -1)[0, 1].item(), abs=1e-5)
        assert scored.first_stage_score == -float(scored.first_stage_rank - 1)

    batched = reranker.rerank_batch([(query, ranking(TEXTS)), ("garage door", ranking(TEXTS[:2]))])
    assert [p.id for p in batched[0]] == [p.id for p in ranked] and len(batched[1]) == 2


def test_monobert_scores_the_passage_text_alone_as_pygaggle(tiny_bert):
    import torch

    section = {"name": "monobert", "model": str(tiny_bert), "depth": 2}
    monobert = build_stage("reranker", section, resources())
    passages = [
        ScoredPassage(Passage(f"p{i}", text, "Throat cancer"), 1.0) for i, text in enumerate(TEXTS[:2])
    ]
    ranked = monobert.rerank("what is throat cancer?", passages)
    for scored in ranked:
        encoded = monobert.tokenizer("what is throat cancer?", scored.passage.text, return_tensors="pt")
        with torch.inference_mode():
            logits = monobert.model(**encoded).logits
        assert scored.score == pytest.approx(torch.softmax(logits, -1)[0, 1].item(), abs=1e-5)
    assert monobert.describe()["with_title"] is False
    titled = build_stage("reranker", {**section, "with_title": True}, resources())
    with_titles = {p.id: p.score for p in titled.rerank("what is throat cancer?", passages)}
    assert titled.with_title and with_titles != {p.id: p.score for p in ranked}


def test_monobert_without_the_checkpoint_fails_at_construction_with_instructions():
    with pytest.raises(ModelUnavailableError) as error:
        build_stage("reranker", {"name": "monobert"}, resources())
    message = str(error.value)
    assert "castorini/monobert-large-msmarco" in message and "download" in message
    assert "--set reranker.model=" in message


def test_biencoder_puts_the_obviously_relevant_passage_first_and_caches_embeddings():
    shared = resources()
    reranker = build_stage("reranker", {"name": "biencoder", "depth": 5}, shared)
    ranked = reranker.rerank("What are the symptoms of throat cancer?", ranking(TEXTS))
    assert ranked[0].id == "p1"
    assert all(-1.0 <= p.score <= 1.0 for p in ranked)
    cached = shared.cache.get_many(
        "biencoder-embedding",
        [{"model": "all-MiniLM-L6-v2", "max_seq_length": 256, "text": t} for t in TEXTS],
    )
    assert all(v is not None for v in cached)
    again = reranker.rerank("What are the symptoms of throat cancer?", ranking(TEXTS))
    assert [p.score for p in again] == pytest.approx([p.score for p in ranked], abs=1e-6)


def test_biencoder_adds_the_question_to_a_keyword_query():
    import numpy as np

    shared = resources()
    plain = build_stage("reranker", {"name": "biencoder", "depth": 5}, shared)
    mixed = build_stage("reranker", {"name": "biencoder", "depth": 5, "question_weight": 0.5}, shared)
    query, question = "garage door cost repair What are its symptoms?", "What are its symptoms?"
    ranked = mixed.rerank_batch([(query, ranking(TEXTS))], questions=[question])[0]

    vector = mixed.embed([query])[0] + 0.5 * mixed.embed([question])[0]
    expected = mixed.embed(TEXTS) @ (vector / np.linalg.norm(vector))
    assert {p.id: p.score for p in ranked} == pytest.approx(
        dict(zip([f"p{i}" for i in range(5)], expected, strict=True)), abs=1e-5
    )
    assert [p.score for p in ranked] != pytest.approx([p.score for p in plain.rerank(query, ranking(TEXTS))])
    # Without questions, or where the question is the query itself, the query's embedding is used alone.
    alone = [p.score for p in plain.rerank(query, ranking(TEXTS))]
    assert [p.score for p in mixed.rerank(query, ranking(TEXTS))] == pytest.approx(alone, abs=1e-6)
    same = mixed.rerank_batch([(query, ranking(TEXTS))], questions=[query])[0]
    assert [p.score for p in same] == pytest.approx(alone, abs=1e-6)


def test_device_and_dtype_choice():
    import torch

    from cast.infra.models import resolve_device, resolve_dtype

    assert resolve_device("cpu") == "cpu" and resolve_device("cuda:1") == "cuda:1"
    assert resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(ConfigError, match="unknown device"):
        resolve_device("gpu")
    assert resolve_dtype("auto", "cpu") is torch.float32
    assert resolve_dtype("auto", "cuda") is torch.float16
    assert resolve_dtype("auto", "cuda", gpu_default="bfloat16") is torch.bfloat16
    assert resolve_dtype("bfloat16", "cpu") is torch.bfloat16
    with pytest.raises(ConfigError, match="unknown dtype"):
        resolve_dtype("half", "cpu")


def test_special_token_wrap_of_a_bert_tokenizer(tiny_bert):
    from cast.infra.models import load_tokenizer, special_token_wrap

    tokenizer = load_tokenizer(str(tiny_bert))
    assert special_token_wrap(tokenizer) == ([tokenizer.cls_token_id], [tokenizer.sep_token_id])


def test_every_setting_that_changes_scores_is_in_describe(tiny_bert):
    """describe() is what a resumed run is compared with: two settings must not resume into one file."""
    shared = resources()
    biencoder = {"name": "biencoder", "embeddings": "none"}
    described = [
        build_stage("reranker", {**biencoder, **change}, shared).describe()
        for change in ({}, {"with_title": False}, {"max_seq_length": 128})
    ]
    assert described[0] != described[1] and described[0] != described[2]
    assert {"backend", "quantize"} <= set(described[0]["encoder"])
    cross = {"name": "cross_encoder", "model": str(tiny_bert)}
    plain = build_stage("reranker", cross, shared).describe()
    for change in ({"relevant_label": 0}, {"tokenizer": str(tiny_bert)}, {"with_title": False}):
        assert build_stage("reranker", {**cross, **change}, shared).describe() != plain
