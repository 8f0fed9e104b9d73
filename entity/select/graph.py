"""The paper's selection formulas as pure functions over small matrices (a turn has tens of entities).

The paper: Leite et al., "Knowledge-driven Answer Generation for Conversational Search", arXiv:2104.06892 (2021),
https://arxiv.org/abs/2104.06892; "eq. N" below is its equation N.

Notation: ``E`` is the list of distinct entities of a turn (query entities first, then passage entities in
candidate order), ``K`` the number of candidate passages. ``membership`` is the ``|E| x K`` 0/1 matrix
``M_P`` with ``M_P[e, k] = 1`` when passage ``k`` contains entity ``e``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def turn_entities(query_entities: Sequence[str], passage_entities: Sequence[Sequence[str]]) -> list[str]:
    """The distinct entities of a turn, query entities first, each in order of first appearance."""
    seen: dict[str, None] = dict.fromkeys(query_entities)
    for entities in passage_entities:
        seen.update(dict.fromkeys(entities))
    return list(seen)


def membership(entities: Sequence[str], passage_entities: Sequence[Sequence[str]]) -> np.ndarray:
    """``M_P``: ``|E| x K`` with 1 where passage ``k`` contains entity ``e`` (repeats count once)."""
    index = {e: i for i, e in enumerate(entities)}
    matrix = np.zeros((len(entities), len(passage_entities)))
    for k, passage in enumerate(passage_entities):
        for e in passage:
            matrix[index[e], k] = 1.0
    return matrix


def entity_relatedness_scores(relatedness: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Eq. 6: ``score(p_k) = 1/(|E_q||E_pk|) * sum_{e1 in E_pk} sum_{e2 in E_q} rel(e1, e2)``.

    Args:
        relatedness: ``|E| x |E_q|`` Milne-Witten relatedness of each turn entity to each query entity.
        member: ``M_P``, ``|E| x K``.

    Returns:
        ``K`` scores; a passage without entities, or a turn without query entities, scores 0.
    """
    if relatedness.shape[1] == 0:
        return np.zeros(member.shape[1])
    per_entity = relatedness.mean(axis=1)  # (1/|E_q|) sum over e2, for each e1
    sizes = member.sum(axis=0)
    totals = per_entity @ member
    return np.divide(totals, sizes, out=np.zeros_like(totals), where=sizes > 0)


def map_e(query_vector: np.ndarray, member: np.ndarray, gamma: float) -> np.ndarray:
    """Eq. 7: ``MapE = [gamma * v_q | (1 - gamma) * M_P]``, an ``|E| x (1 + K)`` matrix.

    Args:
        query_vector: ``v_q``, 1 for the query entities of the turn, 0 otherwise (length ``|E|``).
        member: ``M_P``, ``|E| x K``.
        gamma: the weight of the query against the passages, in [0, 1].
    """
    return np.column_stack([gamma * np.asarray(query_vector, dtype=float), (1.0 - gamma) * member])


def graph_e(mapping: np.ndarray) -> np.ndarray:
    """Eq. 8: ``GraphE = MapE . MapE^T``, the weighted co-occurrence graph of the turn's entities (``|E| x |E|``)."""
    return mapping @ mapping.T


def threshold(graph: np.ndarray, tau: float) -> np.ndarray:
    """Eq. 9: the edges of ``GraphE`` kept for PageRank: weights ``>= tau`` off the diagonal, others set to 0.

    Zero weights are never edges, whatever ``tau``; self-loops (the diagonal) are ignored.
    """
    kept = np.where(graph >= tau, graph, 0.0)
    np.fill_diagonal(kept, 0.0)
    return kept


def pagerank(weights: np.ndarray, alpha: float) -> np.ndarray:
    """Eq. 4: PageRank with damping ``alpha`` over the undirected weighted graph ``weights``.

    networkx builds the Google matrix (edge weights normalised per node, uniform teleport, a node without
    edges spreading its rank uniformly); its stationary distribution is then solved for exactly instead of by
    power iteration, which at the paper's ``alpha = 0.99`` needs thousands of iterations to converge.

    Returns:
        The rank of each entity (they sum to 1); an empty array for an empty graph.
    """
    import networkx as nx

    size = weights.shape[0]
    if size == 0:
        return np.zeros(0)
    google = np.asarray(nx.google_matrix(nx.from_numpy_array(weights), alpha=alpha, weight="weight"))
    # x = x G with sum(x) = 1: (G^T - I) x = 0, one equation replaced by the normalisation.
    system = google.T - np.eye(size)
    system[-1, :] = 1.0
    target = np.zeros(size)
    target[-1] = 1.0
    return np.linalg.solve(system, target)


def passage_scores(ranks: np.ndarray, member: np.ndarray, aggregate: str = "sum") -> np.ndarray:
    """The EG passage score: the sum (or mean) of the PageRank of the passage's entities; 0 without entities.

    Args:
        ranks: the rank of each turn entity (length ``|E|``).
        member: ``M_P``, ``|E| x K``.
        aggregate: ``"sum"`` (the paper) or ``"mean"`` (does not favour passages with many entities).
    """
    totals = ranks @ member
    if aggregate == "sum":
        return totals
    if aggregate == "mean":
        sizes = member.sum(axis=0)
        return np.divide(totals, sizes, out=np.zeros_like(totals), where=sizes > 0)
    raise ValueError(f"aggregate must be 'sum' or 'mean', got {aggregate!r}")


def path_bonus(distance: int | None, beta: float) -> float:
    """The entity-path (WikiPath) bonus ``beta / (d + 1)`` for a passage at distance ``d`` from the focus entity.

    ``distance`` is ``None`` when no entity of the passage can be reached from the focus entity: no bonus.
    """
    return 0.0 if distance is None else beta / (distance + 1)


def shortest_paths(weights: np.ndarray, source: int) -> dict[int, list[int]]:
    """The shortest path (in hops, over the kept edges) from entity ``source`` to every entity it reaches."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(weights.shape[0]))
    rows, cols = np.nonzero(np.triu(weights, k=1))
    graph.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    return nx.single_source_shortest_path(graph, source)


def passage_paths(paths: dict[int, list[int]], member: np.ndarray) -> list[list[int] | None]:
    """For each passage, the shortest of the ``paths`` to one of its entities (``None`` when none is reached).

    Ties go to the entity that comes first in the turn's entity order, so the result is deterministic.
    """
    best: list[list[int] | None] = []
    for k in range(member.shape[1]):
        reached = [paths[e] for e in np.flatnonzero(member[:, k]).tolist() if e in paths]
        best.append(min(reached, key=len) if reached else None)
    return best


def kept_edges(weights: np.ndarray, entities: Sequence[str]) -> list[list[Any]]:
    """The kept edges as ``[entity_a, entity_b, weight]`` (each undirected edge once), for explanations."""
    rows, cols = np.nonzero(np.triu(weights, k=1))
    return [
        [entities[int(i)], entities[int(j)], round(float(weights[i, j]), 6)]
        for i, j in zip(rows, cols, strict=True)
    ]
