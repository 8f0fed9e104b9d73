"""The extractive summarizer's dense relevance on the bundled sentence encoder."""

from __future__ import annotations

from test_summarize_extractive import content_stage, selection

from cast.core.registry import build_stage
from cast.infra.resources import Resources


def test_dense_relevance_finds_the_answer_in_other_words(one_torch_thread, tmp_path):
    # No content word of the query is in either sentence: overlap cannot tell them apart, the embeddings can.
    passage = "Paris has many museums and parks. The iron landmark rises 330 metres above the ground."
    query = "How tall is the Eiffel Tower?"
    resources = Resources({"device": "cpu", "cache_dir": str(tmp_path)})
    dense = build_stage(
        "summarizer",
        {
            "name": "entity_extractive",
            "relevance": "dense",
            "words": 10,
            "fill": False,
            "position_weight": 0.0,
        },
        resources,
    )
    answer = dense.summarize(query, selection(passage))
    assert [s.text for s in answer.sentences] == ["The iron landmark rises 330 metres above the ground."]
    assert answer.settings["relevance"] == "dense"
    assert content_stage(words=10).summarize(query, selection(passage)).sentences[0].text.startswith("Paris")

    # The bi-encoder re-ranker asking for the same model gets the one already loaded, and the sentence
    # embeddings went to the shared cache.
    reranker = build_stage("reranker", {"name": "biencoder", "embeddings": "none"}, resources)
    assert reranker.encoder is dense.encoder
    key = {"model": "all-MiniLM-L6-v2", "max_seq_length": 256, "text": query}
    assert resources.cache.get_many("biencoder-embedding", [key]) != [None]
