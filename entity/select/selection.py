"""Passage selection: which of the re-ranked top passages the generator reads, and why.

Three selectors share one procedure and differ in the entity score they give each candidate:

- **O** (``o``): no entity score, the re-ranker's order (the paper's baseline);
- **ER** (``er``, eq. 6): mean Milne-Witten relatedness of the passage's entities to the conversation's query
  entities;
- **EG** (``eg``, eqs. 7-9 and 4): PageRank over the turn's entity co-occurrence graph, summed over the
  passage's entities.

Each can add the **EP** entity-path bonus ``beta/(d+1)`` (``path_bonus: beta``; 0 turns it off), combine the
entity score with the re-ranker's relevance (``combine``) and filter the chosen passages' sentences by entity
density (**ED**, ``density_filter``). Every :class:`~cast.core.records.Selection` carries a JSON-serialisable
``explanation``:

- ``entity_ranks``: ``{entity: rank}`` (EG: PageRank; ER: mean relatedness to the query entities);
- ``passage_entities``: ``{passage_id: [{"surface", "start", "end", "entity"}, ...]}`` for every candidate; the
  offsets index the passage text as it appears in ``Selection.passages`` (the filtered text where ED applied);
- ``query_entities``: the conversation's query entities ``E_q`` (current turn first, then earlier turns);
- ``top_entities``: the ten highest-ranked entities as ``[entity, rank]``;
- ``edges``: the entity-graph edges kept after thresholding as ``[entity_a, entity_b, weight]`` (EG, or EP);
- ``candidates``: per candidate ``{"id", "relevance", "entity_score", "path_bonus", "score", "chosen"}``;
- ``chosen``: the chosen passage ids, in the order handed on (``passage_order``);
- ``path``: with EP, ``{"focus": entity, "chains": {passage_id: [focus, ..., entity] | null}}``;
- ``density_filter``: with ED, per chosen passage the sentences kept and dropped;
- ``method``, ``settings``: the selector's name and settings; ``fallback``: why a method fell back to O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from cast.core.records import EntityMention, Passage, ScoredPassage, Selection
from cast.core.registry import shared_stage
from cast.core.stages import KnowledgeBase, PassageSelector, SelectionInput
from cast.entity.select import graph
from cast.errors import CastError, ConfigError
from cast.infra.resources import Resources
from cast.infra.text import count_words, entity_label, split_sentences
from cast.rank.fusion import interpolate
from cast.summarize.question import fits_kind

# PageRank damping for ranking entities where the method itself ranks none (O with EP needs a focus entity).
FOCUS_ALPHA = 0.99
TOP_ENTITIES = 10
# Entity scores equal to this many decimals are a tie (floating-point noise separates equal PageRank nodes).
TIE_DECIMALS = 9


@dataclass(frozen=True)
class _TurnEntities:
    """The entities a selector works with at one turn."""

    candidates: tuple[ScoredPassage, ...]
    mentions: tuple[tuple[EntityMention, ...], ...]  # aligned with ``candidates``
    query: list[str]  # E_q: distinct entities of the current and (with ``history``) earlier queries
    entities: list[str]  # every distinct entity of the turn, query entities first
    member: np.ndarray  # M_P, |entities| x |candidates|

    @property
    def query_vector(self) -> np.ndarray:
        return np.array([1.0 if i < len(self.query) else 0.0 for i in range(len(self.entities))])


@dataclass
class _EntityScores:
    """What a selector's entity scoring found: a score per candidate and how it got there."""

    scores: np.ndarray
    entity_ranks: dict[str, float]
    graph_weights: np.ndarray | None = None  # the thresholded GraphE, where the method built it
    notes: dict[str, Any] | None = None


class _SelectorBase(PassageSelector):
    """The shared procedure: entity scores, EP bonus, combination with relevance, choice, ED filter.

    Two readings combine the entity score with the re-ranker's relevance (``combine``):

    - ``interpolate`` (default): ``weight * relevance + (1 - weight) * entity score``, both min-max normalised
      over the candidates, with ``weight = 0.5``. The re-ranker keeps a say: on the CAsT 2022 dev benchmark it
      ranks a relevant candidate above a non-relevant one far more often than the entity graph does (AUC 0.89
      vs 0.75), so the entity score is best used to break the re-ranker's close calls. Leave-one-topic-out
      over weights 0.5-0.9 picks 0.5 for 8 of 9 topics, and the held-out answers beat O's by 1.6 ROUGE-L and
      1.0 METEOR points, not significantly (bench/RESULTS.md, "Passage selection").
    - ``reorder``: the entity score alone orders the ``candidates`` and relevance only breaks ties: the paper's
      reading (the re-ranker picks the candidates, the entities decide among them); use it to reproduce the
      paper. With the offline linker it loses 5 to 7 ROUGE-L points to O, whatever gamma, tau or linker filter.
    """

    class Settings(PassageSelector.Settings):
        candidates: Annotated[
            int,
            Field(
                ge=1, description="how many re-ranked passages are considered (the pipeline links that many)."
            ),
        ] = 10
        n: Annotated[int, Field(ge=1, description="how many passages are chosen.")] = 3
        combine: Annotated[
            Literal["reorder", "interpolate"], Field(description="``interpolate`` (default) or ``reorder``.")
        ] = "interpolate"
        weight: Annotated[
            float,
            Field(ge=0, le=1, description="the relevance weight ``lambda`` of ``interpolate``, in [0, 1]."),
        ] = 0.5
        path_bonus: Annotated[float, Field(ge=0, description="the EP bonus ``beta`` (0 = EP off).")] = 0.0
        gamma: Annotated[
            float,
            Field(
                ge=0, le=1, description="the query's weight ``gamma`` in the entity graph (eq. 7), in [0, 1]."
            ),
        ] = 0.25
        threshold: Annotated[
            float, Field(description="the edge threshold ``tau`` of the entity graph (eq. 9).")
        ] = 0.0
        density_filter: Annotated[
            bool,
            Field(description="drop sentences of the chosen passages with too few linked entities (ED)."),
        ] = False
        min_density: Annotated[
            float,
            Field(
                ge=0,
                description="with ED, the least entity mentions per word a kept sentence has (it always has one).",
            ),
        ] = 0.0
        history: Annotated[
            bool,
            Field(description="count the entities of earlier queries of the conversation as query entities."),
        ] = True
        definitions: Annotated[
            bool,
            Field(
                description='for a question that asks who or what a named entity is ("Who was Marie Curie?"), '
                "hand on first the best candidate that defines it (its first sentence says what the entity is: "
                '"Marie Skłodowska-Curie (1867-1934) was a Polish physicist ..."), in place of the last one '
                "chosen, where the scores did not choose it."
            ),
        ] = False
        passage_order: Annotated[
            Literal["score", "relevance"],
            Field(
                description=(
                    "the order the chosen passages are handed on in: ``score`` (the final selection score, "
                    "default) or ``relevance`` (the re-ranker's order; the entity score then decides only which "
                    "passages are read, not which comes first, which matters to generators that trim)."
                )
            ),
        ] = "score"

        @classmethod
        def check_together(cls, values: Mapping[str, Any]) -> None:
            settings = cls.resolved(values)
            candidates, n = settings["candidates"], settings["n"]
            if candidates < n:
                raise ConfigError(f"selector: need n <= candidates, got n={n}, candidates={candidates}")

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        self._resources = resources

    @property
    def candidates(self) -> int:
        return self.setting_values.candidates

    def select(self, inputs: SelectionInput) -> Selection:
        turn = self._turn_entities(inputs)
        found = self._entity_scores(turn)
        explanation: dict[str, Any] = {}
        bonuses = np.zeros(len(turn.candidates))
        weights = found.graph_weights
        if self.setting_values.path_bonus > 0:
            if weights is None:
                weights = self._graph(turn)
            bonuses, explanation["path"] = self._path_bonuses(turn, weights, inputs.previous_focus_entity)
            if not found.entity_ranks:  # O ranks no entities; EP still needs this turn's focus for the next
                ranks = graph.pagerank(weights, FOCUS_ALPHA)
                found.entity_ranks = {e: float(r) for e, r in zip(turn.entities, ranks, strict=True)}
        relevance = np.array([c.score for c in turn.candidates])
        final, order = combine_scores(
            relevance, found.scores + bonuses, self.setting_values.combine, self.setting_values.weight
        )
        picked = order[: self.setting_values.n]
        if self.setting_values.passage_order == "relevance":
            picked = sorted(picked, key=lambda k: (-relevance[k], k))
        if self.setting_values.definitions:
            defined = asked_definition(inputs.query, inputs.query_entities)
            defining = defining_passage(turn.candidates, turn.mentions, defined) if defined else None
            if defining is not None:
                picked = [defining, *(k for k in picked if k != defining)][: self.setting_values.n]
                explanation["definition"] = {"entity": defined, "passage": turn.candidates[defining].id}
        chosen = [turn.candidates[k] for k in picked]
        chosen_mentions = {turn.candidates[k].id: turn.mentions[k] for k in picked}
        if self.setting_values.density_filter:
            chosen, filtered_mentions, explanation["density_filter"] = self._filter(chosen, chosen_mentions)
            chosen_mentions.update(filtered_mentions)

        ranked_entities = sorted(found.entity_ranks.items(), key=lambda item: (-item[1], item[0]))
        focus = ranked_entities[0][0] if ranked_entities else inputs.previous_focus_entity
        chosen_ids = [c.id for c in chosen]
        explanation.update(
            {
                "method": self.name,
                "query_entities": turn.query,
                "entity_ranks": {e: round(r, 6) for e, r in found.entity_ranks.items()},
                "top_entities": [[e, round(r, 6)] for e, r in ranked_entities[:TOP_ENTITIES]],
                "passage_entities": {
                    c.id: [_mention_dict(m) for m in chosen_mentions.get(c.id, turn.mentions[k])]
                    for k, c in enumerate(turn.candidates)
                },
                "edges": [] if weights is None else graph.kept_edges(weights, turn.entities),
                "candidates": [
                    {
                        "id": c.id,
                        "relevance": float(c.score),
                        "entity_score": round(float(found.scores[k]), 6),
                        "path_bonus": round(float(bonuses[k]), 6),
                        "score": round(float(final[k]), 6),
                        "chosen": c.id in chosen_ids,
                    }
                    for k, c in enumerate(turn.candidates)
                ],
                "chosen": chosen_ids,
                "settings": self.describe(),
                **(found.notes or {}),
            }
        )
        # O without entity features reports the re-ranker's scores (its entity scores are all 0).
        reported = final if self.needs_entities else relevance
        return Selection(
            passages=tuple(chosen),
            method=self.name,
            scores={c.id: float(reported[k]) for k, c in enumerate(turn.candidates)},
            explanation=explanation,
            focus_entity=focus,
        )

    def _entity_scores(self, turn: _TurnEntities) -> _EntityScores:
        raise NotImplementedError

    def _turn_entities(self, inputs: SelectionInput) -> _TurnEntities:
        candidates = tuple(inputs.candidates[: self.candidates])
        if self.needs_entities:
            if len(inputs.passage_entities) < len(candidates):
                raise CastError(
                    f"selector {self.name}: {len(inputs.passage_entities)} passages were entity-linked but "
                    f"{len(candidates)} candidates are considered; the pipeline must link the top "
                    f"selector.candidates={self.setting_values.candidates} passages"
                )
            mentions = tuple(tuple(m) for m in inputs.passage_entities[: len(candidates)])
        else:
            mentions = tuple(() for _ in candidates)
        history = inputs.history_entities if self.setting_values.history else ()
        query = list(dict.fromkeys(m.entity for m in (*inputs.query_entities, *history)))
        per_passage = [[m.entity for m in ms] for ms in mentions]
        entities = graph.turn_entities(query, per_passage)
        return _TurnEntities(candidates, mentions, query, entities, graph.membership(entities, per_passage))

    def _graph(self, turn: _TurnEntities) -> np.ndarray:
        """The thresholded entity graph of the turn (eqs. 7-9)."""
        mapping = graph.map_e(turn.query_vector, turn.member, self.setting_values.gamma)
        return graph.threshold(graph.graph_e(mapping), self.setting_values.threshold)

    def _path_bonuses(
        self, turn: _TurnEntities, weights: np.ndarray, focus: str | None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """EP: ``beta/(d+1)`` per candidate, ``d`` the hops from the focus entity to its nearest entity."""
        count = len(turn.candidates)
        if focus is None or focus not in turn.entities:
            chains: list[list[int] | None] = [None] * count
        else:
            chains = graph.passage_paths(
                graph.shortest_paths(weights, turn.entities.index(focus)), turn.member
            )
        bonuses = np.array(
            [
                graph.path_bonus(None if chain is None else len(chain) - 1, self.setting_values.path_bonus)
                for chain in chains
            ]
        )
        explained = {
            "focus": focus,
            "chains": {
                c.id: None if chain is None else [turn.entities[e] for e in chain]
                for c, chain in zip(turn.candidates, chains, strict=True)
            },
        }
        return bonuses, explained

    def _filter(
        self, chosen: list[ScoredPassage], mentions: dict[str, tuple[EntityMention, ...]]
    ) -> tuple[list[ScoredPassage], dict[str, tuple[EntityMention, ...]], dict[str, Any]]:
        """ED on every chosen passage; a passage none of whose sentences passes is kept whole (and said so)."""
        kept_passages, kept_mentions, report = [], {}, {}
        for scored in chosen:
            text, new_mentions, kept, dropped = filter_sentences(
                scored.passage.text, mentions[scored.id], self.setting_values.min_density
            )
            if not kept:
                kept_passages.append(scored)
                report[scored.id] = {"kept": "all (no sentence passed)", "dropped": 0}
                continue
            passage = Passage(id=scored.passage.id, text=text, title=scored.passage.title)
            kept_passages.append(
                ScoredPassage(passage, scored.score, scored.first_stage_score, scored.first_stage_rank)
            )
            kept_mentions[scored.id] = new_mentions
            report[scored.id] = {"kept": kept, "dropped": dropped}
        return kept_passages, kept_mentions, report


class OriginalOrderSelector(_SelectorBase):
    """**O**: the re-ranker's top ``n`` passages (the paper's baseline), optionally with EP and ED.

    Entity linking is needed only when ``path_bonus`` or ``density_filter`` is set. See :class:`_SelectorBase`
    for the arguments.
    """

    name = "o"

    @property
    def needs_entities(self) -> bool:  # type: ignore[override]
        return self.setting_values.path_bonus > 0 or self.setting_values.density_filter

    def _entity_scores(self, turn: _TurnEntities) -> _EntityScores:
        return _EntityScores(np.zeros(len(turn.candidates)), {})


class EntityRelatednessSelector(_SelectorBase):
    """**ER** (eq. 6): a passage's mean Milne-Witten relatedness to the conversation's query entities.

    ``rel`` comes from the configured ``knowledge_base`` stage. Without query entities every passage scores
    0, so the choice falls back to the re-ranker's order (O). An entity's rank is its mean relatedness to the
    query entities. See :class:`_SelectorBase` for the other arguments.
    """

    name = "er"
    needs_entities = True

    @property
    def knowledge_base(self) -> KnowledgeBase:
        if self._resources is None:
            raise ConfigError("selector er needs the pipeline's resources (for its knowledge_base)")
        return shared_stage("knowledge_base", self._resources)

    def _entity_scores(self, turn: _TurnEntities) -> _EntityScores:
        if not turn.query:
            return _EntityScores(
                np.zeros(len(turn.candidates)), {}, notes={"fallback": "no query entities: O"}
            )
        relatedness = np.array(self.knowledge_base.relatedness_matrix(turn.entities, turn.query), dtype=float)
        relatedness = relatedness.reshape(len(turn.entities), len(turn.query))
        scores = graph.entity_relatedness_scores(relatedness, turn.member)
        per_entity = relatedness.mean(axis=1)
        return _EntityScores(scores, {e: float(r) for e, r in zip(turn.entities, per_entity, strict=True)})


class EntityGraphSelector(_SelectorBase):
    """**EG** (eqs. 7-9 and 4): PageRank over the turn's entity graph; a passage scores its entities' ranks.

    ``MapE = [gamma * v_q | (1 - gamma) * M_P]``, ``GraphE = MapE . MapE^T`` with weights below ``threshold``
    removed, PageRank with damping ``alpha``; the passage score is the ``sum`` (paper) or ``mean`` of its
    entities' ranks.

    See :class:`_SelectorBase` for the other arguments."""

    name = "eg"
    needs_entities = True

    class Settings(_SelectorBase.Settings):
        alpha: Annotated[float, Field(gt=0, lt=1, description="PageRank damping (0.99 in the paper).")] = 0.99
        aggregate: Annotated[Literal["sum", "mean"], Field(description="``sum`` or ``mean``.")] = "sum"

    setting_values: Settings

    def _entity_scores(self, turn: _TurnEntities) -> _EntityScores:
        weights = self._graph(turn)
        ranks = graph.pagerank(weights, self.setting_values.alpha)
        scores = graph.passage_scores(ranks, turn.member, self.setting_values.aggregate)
        return _EntityScores(
            scores, {e: float(r) for e, r in zip(turn.entities, ranks, strict=True)}, graph_weights=weights
        )


def combine_scores(
    relevance: np.ndarray, entity: np.ndarray, mode: str, weight: float
) -> tuple[np.ndarray, list[int]]:
    """The final score of each candidate and the candidates' order, best first.

    Args:
        relevance: the re-ranker's scores (any scale).
        entity: the entity scores (with any EP bonus added).
        mode: ``reorder``: the entity score orders, relevance breaks ties (the final score is the entity score);
            ``interpolate``: ``weight * norm(relevance) + (1 - weight) * norm(entity)``, min-max normalised.
        weight: ``lambda`` of ``interpolate``.

    Returns:
        ``(final_scores, order)``; remaining ties keep the re-ranker's order.
    """
    if mode == "reorder":
        final = entity.astype(float)
    elif mode == "interpolate":
        final = interpolate(relevance, entity, weight, "minmax")
    else:
        raise ValueError(f"unknown combination {mode!r}")
    rounded = np.round(final, TIE_DECIMALS)
    order = sorted(range(len(final)), key=lambda k: (-rounded[k], -relevance[k], k))
    return final, order


def filter_sentences(
    text: str, mentions: Sequence[EntityMention], min_density: float
) -> tuple[str, tuple[EntityMention, ...], int, int]:
    """ED: keep the sentences with at least one entity mention and ``mentions / words >= min_density``.

    Returns:
        ``(kept_text, mentions_shifted_into_kept_text, sentences_kept, sentences_dropped)``; kept sentences are
        joined by one space. A mention belongs to the sentence it starts in.
    """
    pieces: list[str] = []
    shifted: list[EntityMention] = []
    dropped = 0
    offset = 0
    for sentence in split_sentences(text):
        inside = [m for m in mentions if sentence.start <= m.start < sentence.end]
        words = count_words(sentence.text)
        if not inside or len(inside) / words < min_density:
            dropped += 1
            continue
        if pieces:
            offset += 1  # the joining space
        shift = offset - sentence.start
        shifted.extend(
            EntityMention(
                m.surface,
                m.start + shift,
                min(m.end, sentence.end) + shift,
                m.entity,
                m.confidence,
                m.linker,
            )
            for m in inside
        )
        pieces.append(sentence.text)
        offset += len(sentence.text)
    return " ".join(pieces), tuple(shifted), len(pieces), dropped


# "Who was Marie Curie?", "what is radium": the question words right before the entity's mention, nothing after it.
_ASKS_WHAT_IS = re.compile(r"\b(?:who|what)(?:'s| is| are| was| were) (?:(?:a|an|the) )?$", re.I)


def asked_definition(query: str, mentions: Sequence[EntityMention]) -> str | None:
    """The entity ``query`` asks to be defined ("Who was Marie Curie?", "Curie Marie what is radium"), where a
    mention of it ends the question; else ``None``.

    Example:
        >>> curie = EntityMention("Marie Curie", 8, 19, "Marie_Curie", 0.9, "wikipedia")
        >>> asked_definition("Who was Marie Curie?", [curie]), asked_definition("Who was her husband?", [])
        ('Marie_Curie', None)
    """
    for mention in mentions:
        if _ASKS_WHAT_IS.search(query[: mention.start]) and not query[mention.end :].strip(" ?.!"):
            return mention.entity
    return None


def defining_passage(
    candidates: Sequence[ScoredPassage], mentions: Sequence[Sequence[EntityMention]], entity: str
) -> int | None:
    """The index of the first of ``candidates`` whose first sentence defines ``entity`` (names it, by a linked
    mention or as the passage's title, and says what it is: :func:`cast.summarize.question.fits_kind`); ``None``
    where none does."""
    for k, candidate in enumerate(candidates):
        first = next(iter(split_sentences(candidate.passage.text)), None)
        if first is None or not fits_kind("definition", first.text):
            continue
        named = candidate.passage.title == entity_label(entity) or any(
            m.entity == entity and m.start < first.end for m in mentions[k]
        )
        if named:
            return k
    return None


def _mention_dict(mention: EntityMention) -> dict[str, Any]:
    return {"surface": mention.surface, "start": mention.start, "end": mention.end, "entity": mention.entity}
