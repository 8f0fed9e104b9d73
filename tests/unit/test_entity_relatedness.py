"""Milne-Witten (eq. 5) and the local knowledge bases, on hand-made graphs with hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cast.entity.link.linkers import entity_uri
from cast.entity.relatedness import (
    CollectionKnowledgeBase,
    InLinkArrays,
    LinkGraphKnowledgeBase,
    milne_witten,
    sorted_intersection_size,
)
from cast.errors import CastError, DataFormatError


def uri(name: str) -> str:
    return entity_uri(name)


# --- the formula ---------------------------------------------------------------------------------------------


def test_milne_witten_hand_computed():
    # |A|=4, |B|=2, |A∩B|=1, |D|=16: 1 - (log 4 - log 1) / (log 16 - log 2) = 1 - 2/3
    assert milne_witten(4, 2, 1, 16) == pytest.approx(1 / 3)
    # identical sets: 1 - (log 3 - log 3) / ... = 1
    assert milne_witten(3, 3, 3, 7) == pytest.approx(1.0)
    # symmetric in a and b
    assert milne_witten(2, 4, 1, 16) == milne_witten(4, 2, 1, 16)


def test_milne_witten_zero_without_intersection_and_clipped():
    assert milne_witten(5, 3, 0, 100) == 0.0
    assert milne_witten(0, 3, 0, 100) == 0.0
    # |A|=100, |B|=2, |A∩B|=1 in |D|=101: 1 - log 100 / (log 101 - log 2) < 0, clipped to 0
    assert milne_witten(100, 2, 1, 101) == 0.0


def test_milne_witten_degenerate_denominator():
    # min(|A|,|B|) = |D|: the formula's denominator is 0
    assert milne_witten(4, 4, 4, 4) == 1.0


def test_milne_witten_rejects_impossible_sizes():
    with pytest.raises(ValueError):
        milne_witten(2, 3, 5, 10)


def test_sorted_intersection_size():
    a = np.array([1, 3, 5, 9], dtype=np.int32)
    b = np.array([0, 3, 4, 9, 12], dtype=np.int32)
    assert sorted_intersection_size(a, b) == 2
    assert sorted_intersection_size(b, a) == 2
    assert sorted_intersection_size(a[:0], b) == 0
    assert sorted_intersection_size(np.array([13]), b) == 0  # beyond the last element


def test_inlink_arrays_from_pairs_sorts_and_deduplicates():
    arrays = InLinkArrays.from_pairs(["x", "y", "z"], np.array([1, 0, 1, 1]), np.array([7, 2, 3, 7]))
    assert arrays.inlinks("x").tolist() == [2]
    assert arrays.inlinks("y").tolist() == [3, 7]
    assert arrays.inlinks("z").tolist() == []
    assert arrays.size("unknown") == 0


# --- link graph: in-links C={A,B,F}, D={A,B,G}, E={B,G}; |D| = 7 entities -----------------------------------

C_D = 1 - (math.log(3) - math.log(2)) / (math.log(7) - math.log(3))  # 0.52146
C_E = 1 - (math.log(3) - math.log(1)) / (math.log(7) - math.log(2))  # 0.12305
D_E = 1 - (math.log(3) - math.log(2)) / (math.log(7) - math.log(2))  # 0.67634


def test_hand_computed_values():
    assert (round(C_D, 5), round(C_E, 5), round(D_E, 5)) == (0.52146, 0.12305, 0.67634)


def test_link_graph_knowledge_base(fixtures: Path):
    kb = LinkGraphKnowledgeBase(str(fixtures / "entity" / "links.tsv"))
    assert kb.total == 7
    c, d, e, a = uri("C"), uri("D"), uri("E"), uri("A")
    matrix = kb.relatedness_matrix([c, d, e], [c, d, e, a])
    expected = [[1, C_D, C_E, 0], [C_D, 1, D_E, 0], [C_E, D_E, 1, 0]]
    assert np.allclose(matrix, expected)
    assert kb.relatedness(d, c) == pytest.approx(C_D)
    assert kb.relatedness(uri("Nowhere"), uri("Nowhere")) == 1.0  # the same entity, even if unknown
    assert kb.relatedness(uri("Nowhere"), c) == 0.0


def test_link_graph_accepts_full_ids_and_curies(tmp_path: Path):
    graph = tmp_path / "g.tsv"
    graph.write_text(
        "http://dbpedia.org/resource/A\tdbr:C\nB\tC\nA\thttp://dbpedia.org/resource/D\nB\tD\nC#\tD\n"
    )
    kb = LinkGraphKnowledgeBase(str(graph), total=10)
    # C has in-links {A, B}, D has {A, B, C#}: 1 - (log 3 - log 2) / (log 10 - log 2)
    expected = 1 - (math.log(3) - math.log(2)) / (math.log(10) - math.log(2))
    assert kb.relatedness(uri("C"), uri("D")) == pytest.approx(expected)
    assert kb.arrays.size(uri("C")) == 2 and kb.arrays.size(uri("D")) == 3


def test_link_graph_bad_input(tmp_path: Path):
    with pytest.raises(CastError, match="no link-graph file"):
        LinkGraphKnowledgeBase(str(tmp_path / "missing.tsv"))
    bad = tmp_path / "bad.tsv"
    bad.write_text("# a comment\nA\tB\nC#\tB\nC\n")
    with pytest.raises(DataFormatError, match="bad.tsv:4"):
        LinkGraphKnowledgeBase(str(bad))


def test_relatedness_is_memoised_across_calls(fixtures: Path):
    kb = LinkGraphKnowledgeBase(str(fixtures / "entity" / "links.tsv"))
    asked = []
    original = kb.intersection_sizes
    kb.intersection_sizes = lambda pairs: asked.append(list(pairs)) or original(pairs)
    kb.relatedness_matrix([uri("C")], [uri("D"), uri("E")])
    kb.relatedness_matrix([uri("D"), uri("E")], [uri("C")])  # the same pairs, reversed
    assert len(asked) == 1 and len(asked[0]) == 2


def test_collection_knowledge_base_says_how_to_build(tmp_path: Path):
    with pytest.raises(CastError, match="cast entity dictionary"):
        CollectionKnowledgeBase(str(tmp_path / "none.entities"))
