"""The JSON view of one answered turn, as the page shows it.

Everything is plain JSON (strings are never HTML: the page sets them as text). The entity graph comes from the
selection's explanation (see :mod:`entity.selection`): its nodes are the turn's entities sized by their rank
(PageRank for EG, mean relatedness for ER), its edges the entity-graph edges kept after the threshold τ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cast.pipeline import TurnResult
from cast.records import EntityMention, to_dict
from cast.text import entity_label

# Passages listed per turn (the ranking itself runs to first_stage.k, often 1000).
SHOWN_PASSAGES = 20

TextScorer = Callable[[str, Sequence[str]], dict[str, float]]


def turn_view(
    result: TurnResult,
    *,
    number: int,
    reranked_depth: int,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    text_scorer: Callable[[], TextScorer] | None = None,
    shown: int = SHOWN_PASSAGES,
) -> dict[str, Any]:
    """Everything the page shows about one turn.

    Args:
        result: the pipeline's result for the turn.
        number: the turn's position in its conversation (1-based).
        reranked_depth: how many passages the re-ranker re-scored (0: none), to tell re-ranked scores apart.
        qrels: relevance judgements by qid; the turn is evaluated where it is judged.
        text_scorer: gives the answer scorer (ROUGE, BLEU, METEOR), used where the turn has a written response.
        shown: how many passages of the ranking to list.
    """
    turn = result.turn
    explanation = result.selection.explanation or {}
    judged = (qrels or {}).get(turn.qid)
    chosen = [p.id for p in result.selection.passages]
    candidate_notes = {c["id"]: c for c in explanation.get("candidates", ())}
    passage_entities = _passage_entities(result, explanation)
    passages = []
    for rank, scored in enumerate(result.ranking[:shown], start=1):
        note = candidate_notes.get(scored.id, {})
        passages.append(
            {
                "rank": rank,
                "id": scored.id,
                "title": scored.passage.title,
                "text": scored.passage.text,
                "first_stage_rank": scored.first_stage_rank,
                "first_stage_score": scored.first_stage_score,
                "reranked_score": scored.score if rank <= reranked_depth else None,
                "selection_score": result.selection.scores.get(scored.id),
                "entity_score": note.get("entity_score"),
                "path_bonus": note.get("path_bonus"),
                "chosen": chosen.index(scored.id) + 1 if scored.id in chosen else None,
                "relevance": None if judged is None else judged.get(scored.id),
                "entities": sorted(passage_entities.get(scored.id, ())),
            }
        )
    return {
        "qid": turn.qid,
        "number": number,
        "turn_id": turn.turn_id,
        "utterance": turn.utterance,
        "manual_rewrite": turn.manual_rewrite,
        "response": turn.response,
        "rewrite": to_dict(result.rewrite),
        "passages": passages,
        "chosen": [
            {"id": p.id, "title": p.passage.title, "text": p.passage.text} for p in result.selection.passages
        ],
        "selection": {
            "method": result.selection.method,
            "focus_entity": result.selection.focus_entity,
            "top_entities": explanation.get("top_entities", []),
            "path": explanation.get("path"),
            "density_filter": explanation.get("density_filter"),
            "fallback": explanation.get("fallback"),
        },
        "graph": entity_graph(result, passage_entities),
        "answer": {
            "text": result.answer.text,
            "generator": result.answer.generator,
            "sentences": [to_dict(s) for s in result.answer.sentences],
            "source_ids": list(result.answer.source_ids),
            "no_answer_reason": result.answer.no_answer_reason,
        },
        # How the verifier checked each claim of the generated answer (null: no verifier configured).
        "verification": to_dict(result.verification) if result.verification else None,
        "evaluation": evaluation(result, judged, text_scorer),
        "timings": {stage: round(seconds, 4) for stage, seconds in result.timings.items()},
    }


def _passage_entities(result: TurnResult, explanation: Mapping[str, Any]) -> dict[str, set[str]]:
    """The entities of each candidate passage: the selection's (after any ED filter), else the linker's."""
    if "passage_entities" in explanation:
        return {
            pid: {m["entity"] for m in mentions} for pid, mentions in explanation["passage_entities"].items()
        }
    return {pid: {m.entity for m in mentions} for pid, mentions in result.passage_entities.items()}


def entity_graph(result: TurnResult, passage_entities: Mapping[str, set[str]]) -> dict[str, Any]:
    """The turn's entity graph: nodes with rank and marks, and the edges the selector kept.

    Node marks: ``query`` (an entity of this turn's query), ``history`` (of an earlier query only), ``chosen``
    (in a chosen passage), ``focus`` (the conversation's highest-ranked entity at this turn).
    """
    explanation = result.selection.explanation or {}
    ranks: dict[str, float] = explanation.get("entity_ranks", {})
    current = _entities(result.query_entities)
    conversation_query = list(explanation.get("query_entities", current))
    chosen_ids = {p.id for p in result.selection.passages}
    chosen_entities = {e for pid in chosen_ids for e in passage_entities.get(pid, ())}
    order = list(
        dict.fromkeys([*conversation_query, *(e for es in passage_entities.values() for e in sorted(es))])
    )
    nodes = [
        {
            "id": entity,
            "label": entity_label(entity),
            "rank": ranks.get(entity),
            "query": entity in current,
            "history": entity in conversation_query and entity not in current,
            "chosen": entity in chosen_entities,
            "focus": entity == result.selection.focus_entity,
            "passages": sorted(pid for pid, es in passage_entities.items() if entity in es),
        }
        for entity in order
    ]
    edges = [{"source": a, "target": b, "weight": w} for a, b, w in explanation.get("edges", ())]
    return {"nodes": nodes, "edges": edges, "ranked_by": _rank_name(result.selection.method, ranks)}


def _entities(mentions: Sequence[EntityMention]) -> list[str]:
    return list(dict.fromkeys(m.entity for m in mentions))


def _rank_name(method: str, ranks: Mapping[str, float]) -> str | None:
    if not ranks:
        return None
    return {"eg": "PageRank", "er": "mean relatedness to the query entities"}.get(method, "rank")


def evaluation(
    result: TurnResult, judged: Mapping[str, int] | None, text_scorer: Callable[[], TextScorer] | None
) -> dict[str, Any] | None:
    """Per-turn figures: retrieval measures where the turn is judged, answer measures where it has a response."""
    figures: dict[str, Any] = {}
    if judged is not None:
        from cast.evaluate.retrieval import evaluate_run
        from cast.outputs import run_scores

        run = {result.qid: dict(zip((p.id for p in result.ranking), run_scores(result.ranking), strict=True))}
        per_turn = evaluate_run(run, {result.qid: judged}).per_turn
        if result.qid in per_turn.index:
            row = per_turn.loc[result.qid]
            figures["retrieval"] = {name: round(float(row[name]), 4) for name in ("nDCG@3", "nDCG@10")}
        figures["chosen_grades"] = {p.id: judged.get(p.id) for p in result.selection.passages}
    if result.turn.response and text_scorer is not None:
        from cast.errors import CastError

        try:
            scores = text_scorer()(result.answer.text, [result.turn.response])
            figures["answer"] = {name: round(value, 2) for name, value in scores.items()}
        except CastError as error:  # e.g. WordNet (for METEOR) not installed: say so in the page
            figures["answer_error"] = str(error)
    return figures or None
