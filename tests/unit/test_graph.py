"""The selection formulas (entity/select/graph.py) on small hand-computed examples."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from cast.entity.select import graph

# Query entity a; passage 0 holds {a, b}, passage 1 {b, c}, passage 2 nothing.
ENTITIES = ["a", "b", "c"]
PASSAGES = [["a", "b", "b"], ["b", "c"], []]


def test_turn_entities_query_first_then_first_appearance():
    assert graph.turn_entities(["c", "a", "c"], PASSAGES) == ["c", "a", "b"]
    assert graph.turn_entities([], []) == []


def test_membership_counts_an_entity_once_per_passage():
    expected = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    np.testing.assert_array_equal(graph.membership(ENTITIES, PASSAGES), expected)


def test_map_e_is_gamma_weighted_query_column_then_passages():
    member = graph.membership(ENTITIES, PASSAGES)
    expected = np.array(
        [
            [0.25, 0.75, 0.0, 0.0],
            [0.0, 0.75, 0.75, 0.0],
            [0.0, 0.0, 0.75, 0.0],
        ]
    )
    np.testing.assert_allclose(graph.map_e(np.array([1, 0, 0]), member, 0.25), expected)


def test_graph_e_by_hand():
    member = graph.membership(ENTITIES, PASSAGES)
    mapping = graph.map_e(np.array([1, 0, 0]), member, 0.5)
    # rows: a = [.5, .5, 0, 0], b = [0, .5, .5, 0], c = [0, 0, .5, 0]
    expected = np.array(
        [
            [0.5, 0.25, 0.0],
            [0.25, 0.5, 0.25],
            [0.0, 0.25, 0.25],
        ]
    )
    np.testing.assert_allclose(graph.graph_e(mapping), expected)


def test_gamma_one_links_only_query_entities_and_gamma_zero_only_passages():
    member = graph.membership(["a", "b", "c"], [["a", "c"], ["b"]])
    query = np.array([1, 1, 0])
    only_query = graph.graph_e(graph.map_e(query, member, 1.0))
    assert only_query[0, 1] == 1.0 and only_query[0, 2] == 0.0
    only_passages = graph.graph_e(graph.map_e(query, member, 0.0))
    assert only_passages[0, 1] == 0.0 and only_passages[0, 2] == 1.0


def test_threshold_keeps_weights_at_or_above_tau_and_drops_the_diagonal():
    weights = np.array([[0.5, 0.25, 0.1], [0.25, 0.5, 0.3], [0.1, 0.3, 0.25]])
    expected = np.array([[0.0, 0.25, 0.0], [0.25, 0.0, 0.3], [0.0, 0.3, 0.0]])
    np.testing.assert_allclose(graph.threshold(weights, 0.25), expected)
    np.testing.assert_array_equal(graph.threshold(weights, 0.0) == 0, np.eye(3, dtype=bool))
    assert not graph.threshold(weights, 0.31).any()  # every weight below tau


def test_pagerank_on_a_path_by_hand():
    # a - b - c, alpha = 1/2: a = 1/6 + b/4, b = 1/6 + a (a = c) gives a = 5/18, b = 8/18.
    weights = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float)
    np.testing.assert_allclose(graph.pagerank(weights, 0.5), [5 / 18, 8 / 18, 5 / 18], atol=1e-8)


def test_pagerank_matches_networkx_on_a_weighted_graph_with_an_isolated_node():
    rng = np.random.default_rng(3)
    weights = np.triu(rng.random((6, 6)) * (rng.random((6, 6)) > 0.4), k=1)
    weights[:, 5] = weights[5, :] = 0.0  # entity 5 has no edge
    weights = weights + weights.T
    reference = nx.pagerank(
        nx.from_numpy_array(weights), alpha=0.99, weight="weight", tol=1e-12, max_iter=5000
    )
    ranks = graph.pagerank(weights, 0.99)
    np.testing.assert_allclose(ranks, [reference[i] for i in range(6)], atol=1e-7)
    assert ranks.sum() == pytest.approx(1.0)


def test_pagerank_without_edges_is_uniform_and_empty_graph_is_empty():
    np.testing.assert_allclose(graph.pagerank(np.zeros((4, 4)), 0.99), [0.25] * 4)
    assert graph.pagerank(np.zeros((0, 0)), 0.99).shape == (0,)


def test_passage_scores_sum_and_mean():
    member = graph.membership(ENTITIES, PASSAGES)
    ranks = np.array([5 / 18, 8 / 18, 5 / 18])
    np.testing.assert_allclose(graph.passage_scores(ranks, member), [13 / 18, 13 / 18, 0.0])
    np.testing.assert_allclose(graph.passage_scores(ranks, member, "mean"), [13 / 36, 13 / 36, 0.0])
    with pytest.raises(ValueError, match="aggregate"):
        graph.passage_scores(ranks, member, "max")


def test_entity_relatedness_scores_eq6_by_hand():
    # E_q = {q1, q2}; passage 0 holds {x, y}, passage 1 {q1}, passage 2 nothing.
    entities = ["q1", "q2", "x", "y"]
    relatedness = np.array([[1.0, 0.5], [0.5, 1.0], [0.2, 0.4], [0.6, 0.0]])
    member = graph.membership(entities, [["x", "y"], ["q1"], []])
    # p0 = (.2 + .4 + .6 + 0) / (2 * 2) = .3; p1 = (1 + .5) / (2 * 1) = .75
    np.testing.assert_allclose(graph.entity_relatedness_scores(relatedness, member), [0.3, 0.75, 0.0])
    np.testing.assert_array_equal(graph.entity_relatedness_scores(np.zeros((4, 0)), member), [0, 0, 0])


def test_path_bonus_and_shortest_paths():
    # a - b - c   d (disconnected)
    weights = np.zeros((4, 4))
    weights[0, 1] = weights[1, 0] = weights[1, 2] = weights[2, 1] = 0.5
    paths = graph.shortest_paths(weights, 0)
    assert paths == {0: [0], 1: [0, 1], 2: [0, 1, 2]}
    member = graph.membership(["a", "b", "c", "d"], [["c", "b"], ["c"], ["d"], ["a"]])
    chains = graph.passage_paths(paths, member)
    assert chains == [[0, 1], [0, 1, 2], None, [0]]
    bonuses = [graph.path_bonus(None if c is None else len(c) - 1, 0.3) for c in chains]
    assert bonuses == pytest.approx([0.15, 0.1, 0.0, 0.3])


def test_kept_edges_lists_each_undirected_edge_once():
    weights = np.array([[0, 0.5, 0], [0.5, 0, 0.25], [0, 0.25, 0]])
    assert graph.kept_edges(weights, ENTITIES) == [["a", "b", 0.5], ["b", "c", 0.25]]
