"""Passage selection: which of the re-ranked top passages the generator reads."""

from __future__ import annotations

from cast.records import Selection
from cast.stages import PassageSelector, SelectionInput


class OriginalOrderSelector(PassageSelector):
    """**O**: the re-ranker's top ``n`` passages (the paper's baseline).

    Args:
        candidates: how many re-ranked passages are considered (and entity-linked by entity-aware pipelines).
        n: how many passages are chosen.
    """

    def __init__(self, candidates: int = 10, n: int = 3):
        self.candidates = candidates
        self.n = n

    def select(self, inputs: SelectionInput) -> Selection:
        chosen = inputs.candidates[: self.n]
        return Selection(
            passages=tuple(chosen),
            method=self.name,
            scores={p.id: p.score for p in inputs.candidates},
        )
