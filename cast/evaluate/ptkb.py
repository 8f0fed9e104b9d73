"""PTKB statement ranking measures (TREC iKAT): nDCG@3, P@3 and R@3 of each turn's statement scores.

A turn's statement ranking is its ``ptkb_provenance.scores`` in an answers file (every statement scored by the
``ptkb`` stage). Judgements come from the topics (``ptkb_provenance`` / 2025 ``relevant_ptkbs``: those
statements are relevant, the others not) or from NIST's qrels (``2023_test_9-14.ptkb_rel_nist``,
``qid 0 statement grade``). As for passages, a turn without a relevant statement is not judged and is left out;
a judged turn without a ranking scores 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cast.core.records import Conversation
from cast.evaluate.retrieval import judged_qrels

if TYPE_CHECKING:
    import pandas as pd

PTKB_MEASURES = ("nDCG@3", "P@3", "R@3")


def ptkb_qrels(conversations: Iterable[Conversation]) -> dict[str, dict[str, int]]:
    """``{qid: {statement id: 1 if judged relevant else 0}}`` from the topics, for turns with a relevant one."""
    return {
        turn.qid: {s.id: int(s.id in turn.ptkb_relevant) for s in conversation.ptkb}
        for conversation in conversations
        for turn in conversation.turns
        if turn.ptkb_relevant
    }


def ptkb_rankings(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{qid: {statement id: score}}`` from answers-file records (those without a PTKB ranking are left out)."""
    return {
        str(record["qid"]): dict(record["ptkb_provenance"]["scores"])
        for record in records
        if record.get("ptkb_provenance")
    }


def evaluate_ptkb(
    rankings: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]
) -> pd.DataFrame:
    """Per judged turn (index ``qid``), nDCG@3 (graded gains), P@3 and R@3 (grade >= 1 relevant).

    Example:
        >>> per_turn = evaluate_ptkb({"9-1_1": {"5": 0.9, "1": 0.2}}, {"9-1_1": {"5": 1, "1": 0, "2": 1}})
        >>> float(per_turn.loc["9-1_1", "R@3"])
        0.5
    """
    import ir_measures
    import pandas as pd
    from ir_measures import P, R, nDCG

    by_name = {"nDCG@3": nDCG @ 3, "P@3": P @ 3, "R@3": R @ 3}
    names = {measure: name for name, measure in by_name.items()}
    judged = judged_qrels(qrels)
    rows: dict[str, dict[str, float]] = {qid: {} for qid in judged}
    ranked = {qid: dict(scores) for qid, scores in rankings.items() if qid in judged and scores}
    for metric in ir_measures.iter_calc(list(by_name.values()), judged, ranked) if ranked else ():
        rows[metric.query_id][names[metric.measure]] = metric.value
    per_turn = pd.DataFrame.from_dict(rows, orient="index", columns=list(PTKB_MEASURES)).fillna(0.0)
    per_turn.index.name = "qid"
    return per_turn.astype(float)
