"""The collection knowledge base, built from the fixture collection's links: hand-computed values, and
agreement with the link graph."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from test_entity_relatedness import uri

from cast.entity.builders.collection_entities import build_entity_resources
from cast.entity.relatedness import (
    CollectionKnowledgeBase,
    LinkGraphKnowledgeBase,
    sorted_intersection_size,
)

# --- the collection as knowledge base -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def collection_entities(tmp_path_factory, fixtures: Path) -> Path:
    return build_entity_resources(
        None,
        [fixtures / "entity" / "collection.jsonl"],
        output=tmp_path_factory.mktemp("kb") / "x.entities",
        progress=False,
    )


def test_collection_knowledge_base_hand_computed(collection_entities: Path):
    kb = CollectionKnowledgeBase(str(collection_entities))
    assert kb.total == 20  # passages
    # Sun: passages 0, 1, 3, 4 (its own), 5; Solar System: 0, 3 (its own), 4
    assert kb.arrays.inlinks(uri("Sun")).tolist() == [0, 1, 3, 4, 5]
    assert kb.arrays.inlinks(uri("Solar System")).tolist() == [0, 3, 4]
    expected = 1 - (math.log(5) - math.log(3)) / (math.log(20) - math.log(3))
    assert kb.relatedness(uri("Sun"), uri("Solar System")) == pytest.approx(expected)
    assert kb.relatedness(uri("Sun"), uri("Zürich")) == 0.0


def test_collection_and_link_graph_agree_on_the_same_inlinks(collection_entities: Path, tmp_path: Path):
    collection = CollectionKnowledgeBase(str(collection_entities))
    arrays = collection.arrays
    graph = tmp_path / "passages.tsv"
    graph.write_text(
        "".join(f"passage{p}\t{e}\n" for e in arrays.index for p in arrays.inlinks(e).tolist()),
        encoding="utf-8",
    )
    link_graph = LinkGraphKnowledgeBase(str(graph), total=collection.total)
    entities = sorted(arrays.index)
    assert np.allclose(
        collection.relatedness_matrix(entities, entities), link_graph.relatedness_matrix(entities, entities)
    )


def test_batched_intersections_match_pairwise_ones(collection_entities: Path):
    kb = CollectionKnowledgeBase(str(collection_entities))
    entities = sorted(kb.arrays.index)
    pairs = [(a, b) for a in entities for b in entities if a < b]
    assert len(pairs) >= 8  # the sparse-matrix path
    expected = [sorted_intersection_size(kb.arrays.inlinks(a), kb.arrays.inlinks(b)) for a, b in pairs]
    assert kb.intersection_sizes(pairs) == expected
    assert sum(expected) > 0
