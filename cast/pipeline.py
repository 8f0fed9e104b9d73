"""The per-turn pipeline: (choose PTKB statements ->) rewrite -> first stage -> re-rank -> link entities -> select passages -> answer.

A turn's work is split in two (:meth:`Pipeline.prepare_batch`, :meth:`Pipeline.finish_batch`), so that a study
can take every turn as far as re-ranking (or entity linking) once and run the later stages under many settings
(:class:`cast.prepared.Prepared`, ``cast sweep``). Conversations are walked in lock-step by
:mod:`cast.session`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cast.errors import CastError, ConfigError
from cast.limits import bounded_history, bounded_ranking, bounded_turn
from cast.prepared import STOP_POINTS
from cast.records import (
    Answer,
    Conversation,
    EntityMention,
    Passage,
    PastTurn,
    PTKBSelection,
    PTKBStatement,
    Rewrite,
    ScoredPassage,
    Selection,
    Turn,
    Verification,
    from_dict,
    to_dict,
)
from cast.resources import Resources
from cast.rewrite.ptkb import NoPTKB, PTKBSelector
from cast.stages import (
    EntityLinker,
    FirstStage,
    PassageSelector,
    Reranker,
    Rewriter,
    SelectionInput,
    Stage,
    Summarizer,
    Verifier,
)

if TYPE_CHECKING:
    from cast.prepared import Prepared

STAGE_KINDS = ("rewriter", "first_stage", "reranker", "linker", "selector", "summarizer")
# What later turns see as an earlier turn's response: the topics' canonical one, or the pipeline's own answer.
HISTORY_RESPONSES = ("topics", "answers")


@dataclass
class TurnResult:
    """Everything the pipeline produced for one turn.

    Attributes:
        ranking: the re-ranked head followed by the rest of the first-stage ranking.
        passage_entities: the entities of each candidate passage, by passage id.
        unlinked_texts: the texts the linker could not link (its service failed): ``"query"`` and passage ids.
        timings: wall-clock seconds per stage, and ``other``: the rest of the turn's share of its batch's time
            (bounds, merging, the selection's inputs), so that they add up to the turn.
        input_limits: the bounds of :mod:`cast.limits` applied to this turn's inputs: ``{what: original size}``
            (e.g. ``{"utterance": 1000000}``); empty when none was.
        ptkb: the PTKB statements chosen for the turn and every statement's score (iKAT topics), if any.
        verification: how the verifier checked the generated answer's claims, where the config has one.
    """

    turn: Turn
    rewrite: Rewrite
    ranking: list[ScoredPassage]
    selection: Selection
    answer: Answer
    query_entities: tuple[EntityMention, ...] = ()
    passage_entities: dict[str, tuple[EntityMention, ...]] = field(default_factory=dict)
    unlinked_texts: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    input_limits: dict[str, int] = field(default_factory=dict)
    ptkb: PTKBSelection | None = None
    verification: Verification | None = None

    @property
    def qid(self) -> str:
        return self.turn.qid

    def past_turn(self, answer_as_response: bool = False) -> PastTurn:
        """What later turns may use of this one; with ``answer_as_response``, the answer (if there is one) is
        the turn's response, in place of the topics' canonical one."""
        return PastTurn(
            turn=_with_response(
                self.turn, self.answer.text, self.answer.no_answer_reason, answer_as_response
            ),
            query=self.rewrite.history_query,
            top_passage=self.ranking[0].passage if self.ranking else None,
            query_entities=self.query_entities,
            focus_entity=self.selection.focus_entity,
        )

    def to_record(self, top: int = 10) -> dict[str, Any]:
        """The answers-file record: one JSON object per turn."""
        return {
            "qid": self.qid,
            "topic_id": self.turn.topic_id,
            "turn_id": self.turn.turn_id,
            "utterance": self.turn.utterance,
            "query": self.rewrite.query,
            "rewrite": to_dict(self.rewrite),
            "top_ids": [p.id for p in self.ranking[:top]],
            "top_passage": to_dict(self.ranking[0].passage) if self.ranking else None,
            "query_entities": [to_dict(m) for m in self.query_entities],
            "passage_entities": {pid: [to_dict(m) for m in ms] for pid, ms in self.passage_entities.items()},
            "unlinked_texts": list(self.unlinked_texts),
            "selection": to_dict(self.selection),
            "answer": to_dict(self.answer),
            "answer_source_ids": list(self.answer.source_ids),
            "timings": self.timings,
            "input_limits": self.input_limits,
            **({"ptkb_provenance": to_dict(self.ptkb)} if self.ptkb and self.ptkb.scores else {}),
            **({"verification": to_dict(self.verification)} if self.verification else {}),
        }


def past_turn_from_record(turn: Turn, record: dict[str, Any], answer_as_response: bool = False) -> PastTurn:
    """What later turns need of a turn answered in an earlier (interrupted) run."""
    top = record.get("top_passage")
    answer = record.get("answer") or {}
    return PastTurn(
        turn=_with_response(turn, answer.get("text"), answer.get("no_answer_reason"), answer_as_response),
        query=(record.get("rewrite") or {}).get("inputs", {}).get("rewritten_query", record["query"]),
        top_passage=from_dict(Passage, top) if top else None,
        query_entities=tuple(from_dict(EntityMention, m) for m in record.get("query_entities", ())),
        focus_entity=(record.get("selection") or {}).get("focus_entity"),
    )


def _with_response(turn: Turn, answer: str | None, no_answer_reason: str | None, use: bool) -> Turn:
    # The answer is what the user read and refers back to ("the first one"): later turns see it as the turn's
    # response, as CAsT 2022 topics give the canonical one (HQE's response keywords, T5's p_j).
    return replace(turn, response=answer) if use and answer and no_answer_reason is None else turn


@dataclass(frozen=True)
class TurnLinks:
    """The entities the linker found at one turn: the query's, each candidate's by passage id, and the texts it
    could not link (``"query"`` and passage ids)."""

    query_entities: tuple[EntityMention, ...] = ()
    passage_entities: dict[str, tuple[EntityMention, ...]] = field(default_factory=dict)
    unlinked_texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreparedTurn:
    """A turn taken as far as re-ranking, and entity linking where the pass stopped after it: what the later
    stages (selection, answer) start from. See :meth:`Pipeline.prepare_batch`.

    Attributes:
        ranking: the re-ranked head followed by the rest of the first-stage ranking.
        links: the linker's entities, or ``None`` where the pass stopped after re-ranking.
        timings: wall-clock seconds per stage run so far.
        input_limits: as :attr:`TurnResult.input_limits`.
        ptkb: as :attr:`TurnResult.ptkb` (``None``: no PTKB was scored).
    """

    turn: Turn
    rewrite: Rewrite
    ranking: tuple[ScoredPassage, ...]
    links: TurnLinks | None = None
    timings: dict[str, float] = field(default_factory=dict)
    input_limits: dict[str, int] = field(default_factory=dict)
    ptkb: PTKBSelection | None = None

    @property
    def qid(self) -> str:
        return self.turn.qid

    def past_turn(self) -> PastTurn:
        """What later turns' early stages may use of this one (its query, top passage and query entities; the
        topics' response: a prepared pass never sees answers)."""
        return PastTurn(
            turn=self.turn,
            query=self.rewrite.history_query,
            top_passage=self.ranking[0].passage if self.ranking else None,
            query_entities=self.links.query_entities if self.links else (),
        )


class Pipeline:
    """The stages of one configuration, applied turn by turn.

    Example:
        >>> pipe = Pipeline.from_config(load_config("offline", ["index=~/indexes/wiki"]))  # doctest: +SKIP
        >>> results = pipe.run(load_topics("2022_evaluation_topics_flattened_duplicated_v1.0.json"))  # doctest: +SKIP
    """

    def __init__(
        self,
        rewriter: Rewriter,
        first_stage: FirstStage,
        reranker: Reranker,
        linker: EntityLinker,
        selector: PassageSelector,
        summarizer: Summarizer,
        config: dict[str, Any] | None = None,
        ptkb: PTKBSelector | None = None,
        verifier: Verifier | None = None,
    ):
        self.rewriter = rewriter
        self.first_stage = first_stage
        self.reranker = reranker
        self.linker = linker
        self.selector = selector
        self.summarizer = summarizer
        self.ptkb = ptkb if ptkb is not None else NoPTKB()
        self.verifier = verifier
        self.config = config or {}
        history_responses = self.config.get("history_responses", "topics")
        if history_responses not in HISTORY_RESPONSES:
            raise ConfigError(
                f"history_responses must be one of {', '.join(HISTORY_RESPONSES)}, got {history_responses!r}"
            )
        # "answers": a live system's view, where earlier turns' responses are its own answers.
        self.answers_as_responses = history_responses == "answers"

    @classmethod
    def from_config(
        cls, config: dict[str, Any], resources: Resources | None = None, *, progress: bool = False
    ) -> Pipeline:
        """Build every stage named in ``config`` (models load now, so a bad name fails before any turn);
        ``progress``: a progress bar over the stages (seconds on a first use)."""
        from tqdm import tqdm

        resources = resources or Resources(config)
        check_config(config, resources)
        kinds = tqdm(
            STAGE_KINDS, desc="loading the pipeline", unit=" stages", disable=not progress, leave=False
        )
        stages = {kind: resources.stage(kind) for kind in kinds}
        # Optional: only iKAT topics carry a PTKB.
        ptkb = resources.stage("ptkb") if "ptkb" in config else None
        pipeline = cls(**stages, config=config, ptkb=ptkb, verifier=configured_verifier(config, resources))
        if pipeline.selector.needs_entities:
            # Its helpers load (seconds) on the other core while this process loads the rest and runs the first
            # stages, not when the first turn's passages wait for them.
            pipeline.linker.start_helpers()
        return pipeline

    @property
    def candidates(self) -> int:
        """How many re-ranked passages the selector considers (and the linker links)."""
        return getattr(self.selector, "candidates", 10)

    def describe(self) -> dict[str, Any]:
        stages = {kind: getattr(self, kind).describe() for kind in STAGE_KINDS}
        # The knowledge base is built by the selector that needs it; its settings change ER's scores.
        if self.config.get("knowledge_base") is not None:
            stages["knowledge_base"] = self.config["knowledge_base"]
        if not isinstance(self.ptkb, NoPTKB):
            stages["ptkb"] = self.ptkb.describe()
        if self.verifier is not None:
            stages["verifier"] = self.verifier.describe()
        if self.config.get("index"):  # the collection searched: outputs of another one must not be mixed in
            from index.build import index_identity

            stages["index"] = index_identity(self.config["index"])
        return {**stages, "history_responses": "answers" if self.answers_as_responses else "topics"}

    def answer_turn(
        self, history: Sequence[PastTurn], turn: Turn, ptkb: Sequence[PTKBStatement] = ()
    ) -> TurnResult:
        """Answer one turn given what came before it in its conversation (and the user's PTKB, if any)."""
        return self.answer_batch([(history, turn)], [ptkb])[0]

    def answer_batch(
        self,
        items: Sequence[tuple[Sequence[PastTurn], Turn]],
        ptkbs: Sequence[Sequence[PTKBStatement]] | None = None,
    ) -> list[TurnResult]:
        """Answer turns of independent conversations together (one item per conversation; ``ptkbs``: each
        conversation's PTKB statements, aligned with ``items``)."""
        prepared = self.prepare_batch(items, ptkbs)
        return self.finish_batch([(history, p) for (history, _), p in zip(items, prepared, strict=True)])

    def prepare_batch(
        self,
        items: Sequence[tuple[Sequence[PastTurn], Turn]],
        ptkbs: Sequence[Sequence[PTKBStatement]] | None = None,
        *,
        stop_after: str = "rerank",
    ) -> list[PreparedTurn]:
        """The stages up to ``stop_after`` (:data:`STOP_POINTS`) for turns of independent conversations: PTKB
        statements, rewrite, first stage, re-rank, and with ``stop_after="link"`` the candidates' entities."""
        check_stop_point(stop_after)
        if not items:
            return []
        started = time.perf_counter()
        ptkbs = ptkbs if ptkbs is not None else [()] * len(items)
        timings: dict[str, float] = {}
        applied: list[dict[str, int]] = [{} for _ in items]
        items = [
            (bounded_history(list(history), limits), bounded_turn(turn, limits))
            for (history, turn), limits in zip(items, applied, strict=True)
        ]
        timed = _timer(timings, len(items))

        def choose() -> list[PTKBSelection]:
            return [
                self.ptkb.select(statements, history, turn)
                for (history, turn), statements in zip(items, ptkbs, strict=True)
            ]

        # Timed only where chosen: CAsT runs' timings stay as they were.
        personal = choose() if isinstance(self.ptkb, NoPTKB) else timed("ptkb", choose)
        rewrites = timed(
            "rewrite",
            lambda: self.rewriter.rewrite_batch(
                [
                    (self.ptkb.rewriter_history(history, turn, chosen), turn)
                    for (history, turn), chosen in zip(items, personal, strict=True)
                ]
            ),
        )
        rewrites = [self.ptkb.personalise(r, p) for r, p in zip(rewrites, personal, strict=True)]
        queries = [r.query for r in rewrites]
        first = timed("first_stage", lambda: self.first_stage.search_batch(queries))
        first = [bounded_ranking(ranking, limits) for ranking, limits in zip(first, applied, strict=True)]
        heads = timed(
            "rerank",
            lambda: self.reranker.rerank_batch(
                [(q, ranking[: self.reranker.depth]) for q, ranking in zip(queries, first, strict=True)]
            ),
        )
        rankings = [tuple(merge_head(head, ranking)) for head, ranking in zip(heads, first, strict=True)]
        links: list[TurnLinks | None] = [None] * len(items)
        if stop_after == "link":
            links = list(
                timed("link", lambda: self._link(queries, rankings, [history for history, _ in items]))
            )
        _rest_as_other(timings, started, len(items))
        return [
            PreparedTurn(
                turn=turn,
                rewrite=rewrite,
                ranking=ranking,
                links=turn_links,
                timings=timings,
                input_limits=limits,
                ptkb=chosen if chosen.scores else None,
            )
            for (_, turn), rewrite, ranking, turn_links, limits, chosen in zip(
                items, rewrites, rankings, links, applied, personal, strict=True
            )
        ]

    def finish_batch(self, items: Sequence[tuple[Sequence[PastTurn], PreparedTurn]]) -> list[TurnResult]:
        """The stages after a prepared pass for turns of independent conversations, each given its history: link
        the candidates (unless prepared with their links), select passages, answer."""
        if not items:
            return []
        started = time.perf_counter()
        timings: dict[str, float] = {}
        timed = _timer(timings, len(items))
        histories = [bounded_history(list(history), {}) for history, _ in items]
        prepared = [p for _, p in items]
        candidates = [p.ranking[: self.candidates] for p in prepared]
        links: list[TurnLinks]
        if not self.selector.needs_entities:  # as a whole run: none linked (a prepared pass may have)
            links = [TurnLinks() for _ in prepared]
        elif all(p.links is not None for p in prepared):
            links = [p.links for p in prepared if p.links is not None]
        else:
            links = timed(
                "link", lambda: self._link([p.rewrite.query for p in prepared], candidates, histories)
            )
        selection_inputs = [
            SelectionInput(
                query=p.rewrite.query,
                candidates=cands,
                query_entities=turn_links.query_entities,
                history_entities=tuple(m for past in history for m in past.query_entities),
                passage_entities=tuple(turn_links.passage_entities.get(c.id, ()) for c in cands),
                previous_focus_entity=history[-1].focus_entity if history else None,
            )
            for history, p, cands, turn_links in zip(histories, prepared, candidates, links, strict=True)
        ]
        selections = timed("select", lambda: [self.selector.select(s) for s in selection_inputs])
        answers = timed(
            "summarize",
            lambda: self.summarizer.summarize_batch(
                [(p.rewrite.answer_question, sel) for p, sel in zip(prepared, selections, strict=True)]
            ),
        )
        verifications: list[Verification | None] = [None] * len(prepared)
        verifier = self.verifier
        if verifier is not None:  # timed only where configured: other runs' timings stay as they were
            checked = timed(
                "verify",
                lambda: verifier.verify_batch(
                    [
                        (p.rewrite.answer_question, sel, answer)
                        for p, sel, answer in zip(prepared, selections, answers, strict=True)
                    ]
                ),
            )
            answers = [answer for answer, _ in checked]
            verifications = [verification for _, verification in checked]
        _rest_as_other(timings, started, len(items))
        return [
            TurnResult(
                turn=p.turn,
                rewrite=p.rewrite,
                ranking=list(p.ranking),
                selection=selection,
                answer=answer,
                query_entities=turn_links.query_entities,
                passage_entities=turn_links.passage_entities,
                unlinked_texts=turn_links.unlinked_texts,
                timings={**p.timings, **timings, "other": p.timings.get("other", 0.0) + timings["other"]},
                input_limits=p.input_limits,
                ptkb=p.ptkb,
                verification=verification,
            )
            for p, selection, answer, turn_links, verification in zip(
                prepared, selections, answers, links, verifications, strict=True
            )
        ]

    def _link(
        self,
        queries: Sequence[str],
        rankings: Sequence[Sequence[ScoredPassage]],
        histories: Sequence[Sequence[PastTurn]],
    ) -> list[TurnLinks]:
        """Each turn's entities: its query's and its candidates' (the first :attr:`candidates` of its ranking).

        A query is linked after the conversation's earlier queries ("the band" after a turn about Metallica), for
        linkers that read them; a passage carries its own context, so it is linked once, whatever the turn (the
        conversation as a passage's context lowered EG's answers: bench/RESULTS.md, "Entity linking")."""
        candidates = [ranking[: self.candidates] for ranking in rankings]
        earlier = [" ".join(past.query for past in history) for history in histories]
        query_entities = [
            tuple(m) for m in self.linker.link_batch(list(queries), kind="query", contexts=earlier)
        ]
        unlinked_queries = set(self.linker.unlinked_in_last_batch)
        unique = {p.id: p.passage.text for cands in candidates for p in cands}
        linked = dict(zip(unique, self.linker.link_batch(list(unique.values()), kind="passage"), strict=True))
        passage_ids = list(unique)
        unlinked_ids = {passage_ids[i] for i in self.linker.unlinked_in_last_batch}
        return [
            TurnLinks(
                query_entities=q_ents,
                passage_entities={p.id: tuple(linked[p.id]) for p in cands},
                unlinked_texts=(("query",) if number in unlinked_queries else ())
                + tuple(dict.fromkeys(p.id for p in cands if p.id in unlinked_ids)),
            )
            for number, (q_ents, cands) in enumerate(zip(query_entities, candidates, strict=True))
        ]

    def run(
        self,
        conversations: Iterable[Conversation],
        *,
        done: dict[str, dict[str, Any]] | None = None,
        on_result: Callable[[TurnResult], None] | None = None,
        progress: bool = False,
        prepared: Prepared | None = None,
    ) -> list[TurnResult]:
        """Answer every turn of ``conversations`` (see :func:`cast.session.answer_conversations`).

        Args:
            done: answers-file records of turns already answered (by qid), e.g. from an interrupted run: they
                are not answered again, only used as history.
            on_result: called with each new result as soon as its batch is done (to write it out).
            progress: show a progress bar over turns.
            prepared: the turns taken as far as re-ranking (or linking) by :meth:`prepare` with the same early
                stages: only the later stages run.
        """
        from cast.session import answer_conversations

        return answer_conversations(
            self, conversations, done=done, on_result=on_result, progress=progress, prepared=prepared
        )

    def prepare(
        self, conversations: Iterable[Conversation], *, stop_after: str = "rerank", progress: bool = False
    ) -> Prepared:
        """Every turn of ``conversations`` taken as far as ``stop_after`` (see :func:`cast.session.prepare`)."""
        from cast.session import prepare

        return prepare(self, conversations, stop_after=stop_after, progress=progress)

    def with_stages(self, config: dict[str, Any], **stages: Stage | None) -> Pipeline:
        """This pipeline with some stages replaced (the others shared, not rebuilt), under ``config``
        (``verifier=None``: answers unchecked)."""
        verifier = stages.pop("verifier", self.verifier)
        kinds = {kind: getattr(self, kind) for kind in STAGE_KINDS}
        unknown = set(stages) - set(kinds)
        if unknown:
            raise ConfigError(
                f"no stage kind(s) {', '.join(sorted(unknown))}; kinds: {', '.join(STAGE_KINDS)}"
            )
        return Pipeline(
            **{**kinds, **stages},  # type: ignore[arg-type]
            config=config,
            ptkb=self.ptkb,
            verifier=verifier,  # type: ignore[arg-type]
        )


def active_verifier(config: dict[str, Any]) -> dict[str, Any] | None:
    """The config's ``verifier`` section; ``None`` where it has none or names ``none`` (answers go out unchecked,
    and nothing about verification is recorded)."""
    section = config.get("verifier")
    if not section or (isinstance(section, dict) and section.get("name") == "none"):
        return None
    return section


def configured_verifier(config: dict[str, Any], resources: Resources) -> Verifier | None:
    """The verifier ``config`` names, built from its section (with ``resources`` for its encoder and cache)."""
    from cast.registry import build_stage

    section = active_verifier(config)
    return None if section is None else build_stage("verifier", section, resources)  # type: ignore[return-value]


def check_config(config: dict[str, Any], resources: Resources) -> None:
    """A :class:`CastError` for a config that no pipeline can run: a missing section, an unknown stage or setting
    in any section (also those a pipeline builds late or not at all), or a stemmer that is not the index's."""
    from cast.registry import STAGES, check_section

    missing = [k for k in STAGE_KINDS if k not in config]
    if missing:
        raise CastError(f"the config lacks the section(s): {', '.join(missing)}")
    for kind in STAGES:
        if kind in config:
            check_section(kind, config[kind])
    if config.get("index"):
        resources.stemmer  # noqa: B018  (checks it against the index now, not at the first search)


def check_stop_point(stop_after: str) -> None:
    """A :class:`ConfigError` unless a prepared pass may stop after ``stop_after``."""
    if stop_after not in STOP_POINTS:
        raise ConfigError(f"a prepared pass stops after one of {', '.join(STOP_POINTS)}, not {stop_after!r}")


def merge_head(head: Sequence[ScoredPassage], ranking: Sequence[ScoredPassage]) -> list[ScoredPassage]:
    """The re-ranked head, then the first-stage passages not in it, in first-stage order."""
    if not head:
        return list(ranking)
    in_head = {p.id for p in head}
    return [*head, *(p for p in ranking if p.id not in in_head)]


def _rest_as_other(timings: dict[str, float], started: float, turns: int) -> None:
    """Record as ``other`` a batch's seconds per turn since ``started`` outside its timed stages."""
    timings["other"] = max(0.0, (time.perf_counter() - started) / turns - sum(timings.values()))


def _timer(timings: dict[str, float], turns: int) -> Callable[[str, Callable[[], Any]], Any]:
    """``timed(stage, fn)``: ``fn()``, its wall-clock seconds per turn recorded in ``timings[stage]``."""

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = fn()
        timings[stage] = (time.perf_counter() - start) / turns
        return out

    return timed
