"""Retrieval measures of a run against CAsT qrels, through ``ir_measures`` (``pytrec_eval`` backend).

CAsT conventions:

* Relevance is graded 0-4. nDCG uses the grades as gains (``trec_eval``'s ``ndcg_cut``). The binary measures
  (MAP, MRR, recall) count a passage as relevant from grade ``rel`` on (1 by default, as in CAsT 2019-2022;
  some papers use 2).
* Turns without judgements are excluded: a turn counts as judged when the qrels hold at least one passage graded
  1 or more for it. Run turns that are not judged are left out and counted.
* A judged turn the run has no ranking for scores 0 on every measure (``ir_measures`` reports the measure's
  default for queries missing from the run), and is counted too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cast.core.records import ScoredPassage

if TYPE_CHECKING:
    import pandas as pd

RETRIEVAL_MEASURES = ("nDCG@3", "nDCG@10", "MAP", "MRR", "R@100", "R@1000")
# The lowest grade of a relevant passage in CAsT qrels: turns with none are unjudged.
MIN_RELEVANT_GRADE = 1


def measures(rel: int = 1) -> dict:
    """The ``ir_measures`` measure objects by column name, binary measures at relevance threshold ``rel``
    (:data:`RETRIEVAL_MEASURES`, and ``Judged@10``: the share of the top 10 the qrels judge at all)."""
    from ir_measures import AP, RR, Judged, R, nDCG

    return {
        "nDCG@3": nDCG @ 3,
        "nDCG@10": nDCG @ 10,
        "MAP": AP(rel=rel),
        "MRR": RR(rel=rel),
        "R@100": R(rel=rel) @ 100,
        "R@1000": R(rel=rel) @ 1000,
        "Judged@10": Judged @ 10,
    }


def judged_qrels(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """The qrels of the turns that have at least one passage graded 1 or more."""
    return {
        qid: dict(judgements)
        for qid, judgements in qrels.items()
        if any(grade >= MIN_RELEVANT_GRADE for grade in judgements.values())
    }


@dataclass
class RetrievalEvaluation:
    """Per-turn retrieval measures of one run.

    Attributes:
        per_turn: one row per judged turn (index ``qid``, str), one column per measure.
        unjudged_run_turns: run turns without judgements, left out.
        missing_turns: judged turns absent from the run, scored 0.
        rel: the relevance threshold used by the binary measures.
    """

    per_turn: pd.DataFrame
    unjudged_run_turns: list[str] = field(default_factory=list)
    missing_turns: list[str] = field(default_factory=list)
    rel: int = 1

    def mean(self) -> pd.Series:
        return self.per_turn.mean()

    def notes(self) -> list[str]:
        """What a reader needs to know to compare these numbers with others."""
        notes = [
            f"{len(self.per_turn)} judged turns; nDCG with graded gains 0-4; MAP, MRR and R@k count grade >= "
            f"{self.rel} as relevant"
        ]
        if self.unjudged_run_turns:
            notes.append(f"{len(self.unjudged_run_turns)} run turns without judgements excluded")
        if self.missing_turns:
            notes.append(
                f"{len(self.missing_turns)} judged turns missing from the run scored 0 "
                f"(e.g. {self.missing_turns[0]})"
            )
        return notes


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    rel: int = 1,
    names: Sequence[str] = RETRIEVAL_MEASURES,
) -> RetrievalEvaluation:
    """Score a run (``{qid: {docid: score}}``) against qrels (``{qid: {docid: grade}}``) turn by turn.

    Args:
        run: each turn's ranking as passage scores.
        qrels: each turn's graded judgements.
        rel: the lowest grade the binary measures count as relevant.
        names: the measures (columns), among those of :func:`measures`.

    Example:
        >>> evaluation = evaluate_run({"31_1": {"d1": 2.0, "d2": 1.0}}, {"31_1": {"d2": 3, "d3": 1}})
        >>> float(evaluation.mean()["MRR"]), float(evaluation.mean()["R@100"])
        (0.5, 0.5)

        Files: ``evaluate_run(read_run("runs/lmd.run"), read_qrels("cast2022.qrel"), rel=2)``.
    """
    import ir_measures
    import pandas as pd

    if rel < 1:
        raise ValueError(f"the relevance threshold must be at least 1, got {rel}")
    known = measures(rel)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown measure {unknown[0]!r}; choose among {', '.join(known)}")
    judged = judged_qrels(qrels)
    by_name = {name: known[name] for name in names}
    name_of = {measure: name for name, measure in by_name.items()}
    rows: dict[str, dict[str, float]] = {qid: {} for qid in judged}
    # ir_measures' pytrec_eval provider breaks on empty rankings: give it the judged turns the run has.
    scored_run = {qid: dict(ranking) for qid, ranking in run.items() if qid in judged and ranking}
    for metric in ir_measures.iter_calc(list(by_name.values()), judged, scored_run) if scored_run else ():
        rows[metric.query_id][name_of[metric.measure]] = metric.value
    per_turn = pd.DataFrame.from_dict(rows, orient="index", columns=list(names)).fillna(0.0).astype(float)
    per_turn.index = per_turn.index.astype(str)
    per_turn.index.name = "qid"
    return RetrievalEvaluation(
        per_turn=per_turn,
        unjudged_run_turns=[qid for qid in run if qid not in judged],
        missing_turns=[qid for qid in judged if qid not in scored_run],
        rel=rel,
    )


def ranked_run(rankings: Mapping[str, Sequence[ScoredPassage]]) -> dict[str, dict[str, float]]:
    """Rankings as a run in ir_measures' dict form, scored by rank: the stages' scores are on scales that differ
    between a ranking's re-ranked head and its tail."""
    return {qid: {p.id: float(len(r) - rank) for rank, p in enumerate(r)} for qid, r in rankings.items()}
