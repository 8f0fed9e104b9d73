"""Re-rankers. ``none`` keeps the first-stage order; neural re-rankers are added alongside."""

from __future__ import annotations

from collections.abc import Sequence

from cast.records import ScoredPassage
from cast.stages import Reranker


class NoReranker(Reranker):
    """Keeps the first-stage ranking (re-rank depth 0)."""

    depth = 0

    def rerank(self, query: str, passages: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        return []
