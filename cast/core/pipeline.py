"""The per-turn pipeline: (choose PTKB statements ->) rewrite -> first stage -> re-rank -> link entities -> select passages -> answer.

A :class:`Pipeline` holds the stages of one configuration, one per slot of :data:`COMPOSITION` (the order, declared
once: what it builds, describes and replaces), and takes batches of turns of independent conversations through
them, each turn given the history before it: :meth:`~Pipeline.rewrite_batch`,
:meth:`~Pipeline.prepare_batch` (as far as re-ranking, or linking), :meth:`~Pipeline.link_batch`,
:meth:`~Pipeline.finish_batch` (the later stages) and :meth:`~Pipeline.answer_batch` (all of them). Walking
conversations turn by turn, so that each turn gets its history, is :mod:`cast.conversation.walker`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, TypeVar, overload

from tqdm import tqdm

from cast.core.config_keys import ConfigKeys
from cast.core.limits import bounded_history, bounded_ranking, bounded_turn
from cast.core.records import (
    Answer,
    PastTurn,
    PreparedTurn,
    PTKBSelection,
    PTKBStatement,
    ScoredPassage,
    Selection,
    Turn,
    TurnLinks,
    TurnResult,
    Verification,
)
from cast.core.registry import STAGES, build_stage, check_section, resources_for, shared_stage
from cast.core.stages import (
    EntityLinker,
    FirstStage,
    PassageSelector,
    PTKBSelector,
    Reranker,
    Rewriter,
    SelectionInput,
    Stage,
    StageResources,
    Summarizer,
    Verifier,
)
from cast.errors import CastError, ConfigError
from cast.index.record import index_identity


@dataclass(frozen=True)
class Slot:
    """One place in the pipeline: the kind of stage that fills it (its config section and contract) and the step
    that runs it (its name in a turn's ``timings``).

    Args:
        optional: filled only where the config has the section (a PTKB selector for iKAT topics, a verifier).
        stop: a prepared pass may stop after this step (:data:`STOP_POINTS`).
        uses: the config's other sections the stage builds from (the selector's knowledge base).
    """

    kind: str
    step: str
    contract: type[Stage]
    optional: bool = False
    stop: bool = False
    uses: tuple[str, ...] = ()


# The pipeline's stages in order, declared once: a config's sections, a prepared pass's stages, what a sweep's
# points share and rebuild, and the explorer's stop point are read from it. A prepared pass stops no earlier than
# re-ranking: a later turn's rewrite reads an earlier turn's re-ranked top passage.
COMPOSITION = (
    Slot("ptkb", "ptkb", PTKBSelector, optional=True),
    Slot("rewriter", "rewrite", Rewriter),
    Slot("first_stage", "first_stage", FirstStage),
    Slot("reranker", "rerank", Reranker, stop=True),
    Slot("linker", "link", EntityLinker, stop=True),
    Slot("selector", "select", PassageSelector, uses=("knowledge_base",)),
    Slot("summarizer", "summarize", Summarizer),
    Slot("verifier", "verify", Verifier, optional=True),
)
# The kinds every config names, in pipeline order.
STAGE_KINDS = tuple(slot.kind for slot in COMPOSITION if not slot.optional)
# Where a prepared pass may stop, in pipeline order.
STOP_POINTS = tuple(slot.step for slot in COMPOSITION if slot.stop)
# Each step's name (in a turn's ``timings``) and the kind of the stage it runs (what ``on_stage`` is told).
STEP_KINDS = {slot.step: slot.kind for slot in COMPOSITION}


def check_stop_point(stop_after: str) -> None:
    """A :class:`ConfigError` unless a prepared pass may stop after ``stop_after``."""
    if stop_after not in STOP_POINTS:
        raise ConfigError(f"a prepared pass stops after one of {', '.join(STOP_POINTS)}, not {stop_after!r}")


def slots_through(stop_after: str) -> tuple[Slot, ...]:
    """The slots a prepared pass stopping after ``stop_after`` runs, in order."""
    check_stop_point(stop_after)
    steps = [slot.step for slot in COMPOSITION]
    return COMPOSITION[: steps.index(stop_after) + 1]


def slots_after(stop_after: str) -> tuple[Slot, ...]:
    """The slots that run on turns prepared as far as ``stop_after``, in order."""
    return COMPOSITION[len(slots_through(stop_after)) :]


def kinds_after(stop_after: str) -> set[str]:
    """The config sections that shape only what runs after a pass stopping after ``stop_after`` (the later
    stages' and the sections they build from)."""
    return {kind for slot in slots_after(stop_after) for kind in (slot.kind, *slot.uses)}


# The stages a pass stopping at each stop point has run by then (the early description's sections).
EARLY_STAGES = {stop: tuple(slot.kind for slot in slots_through(stop)) for stop in STOP_POINTS}


def useful_stop(needs_entities: bool, stop_after: str = STOP_POINTS[-1]) -> str:
    """Where a prepared pass stops, at most ``stop_after``: after linking only where the selector reads entities
    (``needs_entities``; else the links would be made for nothing)."""
    if stop_after == "link" and not needs_entities:
        return "rerank"
    return stop_after


Items = Sequence[tuple[Sequence[PastTurn], Turn]]


S = TypeVar("S")


class SlotStage(Generic[S]):
    """The stage a pipeline holds in the slot of this attribute's name (``pipeline.selector``), typed by its
    contract; read only: :meth:`Pipeline.with_stages` replaces stages."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.kind = name

    @overload
    def __get__(self, pipeline: None, owner: type | None = None) -> SlotStage[S]: ...
    @overload
    def __get__(self, pipeline: Pipeline, owner: type | None = None) -> S: ...
    def __get__(self, pipeline: Pipeline | None, owner: type | None = None) -> S | SlotStage[S]:
        return self if pipeline is None else pipeline.stages[self.kind]  # type: ignore[return-value]

    def __set__(self, pipeline: Pipeline, stage: S) -> None:
        raise AttributeError(f"a pipeline's stages are replaced by with_stages({self.kind}=...), not set")


class Pipeline:
    """The stages of one configuration, one per slot of its :attr:`composition`, applied to batches of turns.

    Args:
        config: the resolved config the stages were built from (its ``history_responses``, ``index`` and
            ``knowledge_base`` are read here).
        on_stage: told each stage's kind (``rewriter``, ``first_stage``...) just before the stage runs, e.g. to
            show progress or to stop at a stage boundary (by raising).
        stages: a stage for each slot, by kind (``rewriter=...``); an optional slot's may be left out or
            ``None`` (``ptkb``: no PTKB step, as with the ``none`` selector; ``verifier``: answers go out
            unchecked).

    Example:
        >>> pipe = Pipeline.from_config(load_config("offline", ["index=~/indexes/wiki"]))  # doctest: +SKIP
        >>> [result] = pipe.answer_batch([([], Turn("1_1", "1", "1", "Who was Marie Curie?"))])  # doctest: +SKIP
    """

    # The slots it holds, in order: what it builds, describes and replaces.
    composition: ClassVar[tuple[Slot, ...]] = COMPOSITION

    # The stages the turns' batches run, typed by their slots' contracts (held in ``stages``).
    ptkb: SlotStage[PTKBSelector | None] = SlotStage()
    rewriter: SlotStage[Rewriter] = SlotStage()
    first_stage: SlotStage[FirstStage] = SlotStage()
    reranker: SlotStage[Reranker] = SlotStage()
    linker: SlotStage[EntityLinker] = SlotStage()
    selector: SlotStage[PassageSelector] = SlotStage()
    summarizer: SlotStage[Summarizer] = SlotStage()
    verifier: SlotStage[Verifier | None] = SlotStage()

    def __init__(
        self,
        *,
        config: dict[str, Any] | None = None,
        on_stage: Callable[[str], object] | None = None,
        **stages: Stage | None,
    ):
        kinds = [slot.kind for slot in self.composition]
        unknown = sorted(set(stages) - set(kinds))
        if unknown:
            raise ConfigError(f"no stage kind(s) {', '.join(unknown)}; kinds: {', '.join(kinds)}")
        missing = [
            slot.kind for slot in self.composition if not slot.optional and stages.get(slot.kind) is None
        ]
        if missing:
            raise ConfigError(f"a pipeline needs a stage of each kind: {', '.join(missing)} missing")
        self.stages = {kind: stages.get(kind) for kind in kinds}
        ptkb = self.stages.get("ptkb")
        if isinstance(ptkb, PTKBSelector) and not ptkb.selects:
            self.stages["ptkb"] = None  # the ``none`` selector: no PTKB step
        self.on_stage = on_stage
        self.config = config or {}
        history_responses = self.config.get("history_responses", "topics")
        ConfigKeys.check("history_responses", history_responses)
        # "answers": a live system's view, where earlier turns' responses are its own answers.
        self.answers_as_responses = history_responses == "answers"

    @classmethod
    def from_config(
        cls, config: dict[str, Any], resources: StageResources | None = None, *, progress: bool = False
    ) -> Pipeline:
        """Build every stage named in ``config`` (models load now, so a bad name fails before any turn, and so does
        a device this machine lacks: checked here, where the pipeline runs, not on a Ray driver); ``progress``: a
        progress bar over the stages (seconds on a first use)."""
        resources = resources or resources_for(config)
        check_config(config, resources)
        resources.check_device()
        # An optional slot the config leaves empty (no PTKB but on iKAT topics, no verifier) has no stage.
        filled = [slot for slot in cls.composition if active_section(config, slot) is not None]
        slots = tqdm(filled, desc="loading the pipeline", unit=" stages", disable=not progress, leave=False)
        pipeline = cls(config=config, **{slot.kind: shared_stage(slot.kind, resources) for slot in slots})
        if pipeline.selector.needs_entities:
            # Its helpers load (seconds) on the other core while this process loads the rest and runs the first
            # stages, not when the first turn's passages wait for them.
            pipeline.linker.start_helpers()
        return pipeline

    @property
    def candidates(self) -> int:
        """How many re-ranked passages the selector considers (and the linker links)."""
        return self.selector.candidates

    def describe(self) -> dict[str, Any]:
        """Each stage's settings by kind, the sections they build from (the knowledge base: its settings change
        ER's scores), the index searched (outputs of another collection must not be mixed in) and the response
        rule. The optional stages come after what the stages build from, so that records keep their order."""
        held = [(slot, self.stages[slot.kind]) for slot in self.composition]
        described: dict[str, Any] = {
            slot.kind: stage.describe() for slot, stage in held if stage is not None and not slot.optional
        }
        for kind in (kind for slot in self.composition for kind in slot.uses):
            if self.config.get(kind) is not None:
                described[kind] = self.config[kind]
        described.update(
            {slot.kind: stage.describe() for slot, stage in held if stage is not None and slot.optional}
        )
        if self.config.get("index"):
            described["index"] = index_identity(self.config["index"])
        return {**described, "history_responses": "answers" if self.answers_as_responses else "topics"}

    def early_description(self, stop_after: str) -> dict[str, Any]:
        """What decides the turns a pass stopping after ``stop_after`` prepares: the early stages' ``describe()``,
        the response rule, the index, and (where it links) how many candidates it links."""
        check_stop_point(stop_after)
        described = self.describe()
        early = {kind: described[kind] for kind in EARLY_STAGES[stop_after] if kind in described}
        early["history_responses"] = described["history_responses"]
        early["index"] = described.get("index")
        if stop_after == "link":
            early["candidates"] = self.candidates
        return early

    def answer_turn(
        self, history: Sequence[PastTurn], turn: Turn, ptkb: Sequence[PTKBStatement] = ()
    ) -> TurnResult:
        """Answer one turn given what came before it in its conversation (and the user's PTKB, if any)."""
        return self.answer_batch([(history, turn)], [ptkb])[0]

    def answer_batch(
        self, items: Items, ptkbs: Sequence[Sequence[PTKBStatement]] | None = None
    ) -> list[TurnResult]:
        """Answer turns of independent conversations together (one item per conversation; ``ptkbs``: each
        conversation's PTKB statements, aligned with ``items``)."""
        prepared = self.prepare_batch(items, ptkbs)
        return self.finish_batch([(history, p) for (history, _), p in zip(items, prepared, strict=True)])

    def rewrite_batch(
        self, items: Items, ptkbs: Sequence[Sequence[PTKBStatement]] | None = None
    ) -> list[PreparedTurn]:
        """The rewrite step (:func:`rewrite_turns`) with this pipeline's rewriter and PTKB selector."""
        return rewrite_turns(self.rewriter, self.ptkb, items, ptkbs, on_stage=self.on_stage)

    def prepare_batch(
        self,
        items: Items,
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
        rewritten = self.rewrite_batch(items, ptkbs)
        timings = dict(rewritten[0].timings)
        timed = step_timer(timings, len(items), self.on_stage)
        queries = [p.rewrite.query for p in rewritten]
        applied = [dict(p.input_limits) for p in rewritten]
        first = timed("first_stage", lambda: self.first_stage.search_batch(queries))
        first = [bounded_ranking(ranking, limits) for ranking, limits in zip(first, applied, strict=True)]
        heads = timed(
            "rerank",
            lambda: self.reranker.rerank_batch(
                [(q, ranking[: self.reranker.depth]) for q, ranking in zip(queries, first, strict=True)],
                questions=[p.rewrite.answer_question for p in rewritten],
            ),
        )
        rankings = [tuple(merge_head(head, ranking)) for head, ranking in zip(heads, first, strict=True)]
        links: list[TurnLinks | None] = [None] * len(items)
        if stop_after == "link":
            histories = [bounded_history(list(history), {}) for history, _ in items]
            links = list(timed("link", lambda: self.link_batch(queries, rankings, histories)))
        _rest_as_other(timings, started, len(items))
        return [
            replace(p, ranking=ranking, links=turn_links, timings=timings, input_limits=limits)
            for p, ranking, turn_links, limits in zip(rewritten, rankings, links, applied, strict=True)
        ]

    def link_batch(
        self,
        queries: Sequence[str],
        rankings: Sequence[Sequence[ScoredPassage]],
        histories: Sequence[Sequence[PastTurn]],
    ) -> list[TurnLinks]:
        """Each turn's entities: its query's and its candidates' (:func:`link_turns` with this pipeline's linker)."""
        return link_turns(self.linker, self.candidates, queries, rankings, histories)

    def finish_batch(self, items: Sequence[tuple[Sequence[PastTurn], PreparedTurn]]) -> list[TurnResult]:
        """The stages after a prepared pass for turns of independent conversations, each given its history: link
        the candidates (unless prepared with their links), select passages, answer."""
        if not items:
            return []
        started = time.perf_counter()
        timings: dict[str, float] = {}
        timed = step_timer(timings, len(items), self.on_stage)
        prepared = [p for _, p in items]
        selected = self.select_batch(items, timed=timed)
        answered = self.write_answers(
            [
                (p.rewrite.answer_question, selection)
                for p, (_, selection) in zip(prepared, selected, strict=True)
            ],
            timed=timed,
            earlier=[tuple(past.answer for past in history if past.answer) for history, _ in items],
        )
        _rest_as_other(timings, started, len(items))
        return [
            TurnResult(
                turn=p.turn,
                rewrite=p.rewrite,
                ranking=p.ranking,
                links=turn_links,
                timings={**p.timings, **timings, "other": p.timings.get("other", 0.0) + timings["other"]},
                input_limits=p.input_limits,
                ptkb=p.ptkb,
                selection=selection,
                answer=answer,
                verification=verification,
            )
            for p, (turn_links, selection), (answer, verification) in zip(
                prepared, selected, answered, strict=True
            )
        ]

    def select_batch(
        self, items: Sequence[tuple[Sequence[PastTurn], PreparedTurn]], *, timed: Timer | None = None
    ) -> list[tuple[TurnLinks, Selection]]:
        """The selection step of :meth:`finish_batch` (:func:`select_turns` with this pipeline's linker and
        selector)."""
        return select_turns(
            self.linker, self.selector, items, timed or step_timer({}, max(len(items), 1), self.on_stage)
        )

    def write_answers(
        self,
        items: Sequence[tuple[str, Selection]],
        *,
        timed: Timer | None = None,
        earlier: Sequence[Sequence[str]] | None = None,
    ) -> list[tuple[Answer, Verification | None]]:
        """The answer step of :meth:`finish_batch` (:func:`answer_selections` with this pipeline's summarizer and
        verifier)."""
        timed = timed or step_timer({}, max(len(items), 1), self.on_stage)
        return answer_selections(self.summarizer, self.verifier, items, timed, earlier)

    def with_stages(self, config: dict[str, Any], **stages: Stage | None) -> Pipeline:
        """This pipeline with some stages replaced, by kind (the others shared, not rebuilt), under ``config``
        (``ptkb=None``: no PTKB step; ``verifier=None``: answers unchecked)."""
        return type(self)(config=config, on_stage=self.on_stage, **{**self.stages, **stages})


def rewrite_turns(
    rewriter: Rewriter,
    ptkb: PTKBSelector | None,
    items: Items,
    ptkbs: Sequence[Sequence[PTKBStatement]] | None = None,
    *,
    on_stage: Callable[[str], object] | None = None,
) -> list[PreparedTurn]:
    """The rewrite step for turns of independent conversations: each turn's inputs bounded (:mod:`cast.core.limits`),
    its PTKB statements chosen by ``ptkb`` (if any), its rewrite personalised with them: prepared turns without a
    ranking. The pipeline's first step (:meth:`Pipeline.rewrite_batch`), alone for studies of rewriters and PTKB
    selectors that need no retrieval."""
    if not items:
        return []
    timings: dict[str, float] = {}
    timed = step_timer(timings, len(items), on_stage)
    applied: list[dict[str, int]] = [{} for _ in items]
    items = [
        (bounded_history(list(history), limits), bounded_turn(turn, limits))
        for (history, turn), limits in zip(items, applied, strict=True)
    ]
    chosen: list[PTKBSelection | None] = [None] * len(items)
    histories = [history for history, _ in items]
    if ptkb is not None:  # timed only where chosen: CAsT runs' timings stay as they were
        statements = ptkbs if ptkbs is not None else [()] * len(items)
        selections = timed(
            "ptkb",
            lambda: [
                ptkb.select(said, history, turn)
                for (history, turn), said in zip(items, statements, strict=True)
            ],
        )
        histories = [
            ptkb.rewriter_history(history, turn, selection)
            for (history, turn), selection in zip(items, selections, strict=True)
        ]
        chosen = list(selections)
    rewrites = timed(
        "rewrite",
        lambda: rewriter.rewrite_batch(
            [(history, turn) for history, (_, turn) in zip(histories, items, strict=True)]
        ),
    )
    return [
        PreparedTurn(
            turn=turn,
            rewrite=rewrite if ptkb is None or selection is None else ptkb.personalise(rewrite, selection),
            timings=timings,
            input_limits=limits,
            ptkb=selection if selection is not None and selection.scores else None,
        )
        for (_, turn), rewrite, selection, limits in zip(items, rewrites, chosen, applied, strict=True)
    ]


def link_turns(
    linker: EntityLinker,
    candidates: int,
    queries: Sequence[str],
    rankings: Sequence[Sequence[ScoredPassage]],
    histories: Sequence[Sequence[PastTurn]],
) -> list[TurnLinks]:
    """Each turn's entities: its query's and its candidates' (the first ``candidates`` of its ranking).

    A query is linked after the conversation's earlier queries ("the band" after a turn about Metallica), for
    linkers that read them; a passage carries its own context, so it is linked once, whatever the turn (the
    conversation as a passage's context lowered EG's answers: bench/RESULTS.md, "Entity linking")."""
    heads = [ranking[:candidates] for ranking in rankings]
    earlier = [" ".join(past.query for past in history) for history in histories]
    query_entities = [tuple(m) for m in linker.link_batch(list(queries), kind="query", contexts=earlier)]
    unlinked_queries = set(linker.unlinked_in_last_batch)
    unique = {p.id: p.passage.text for cands in heads for p in cands}
    linked = dict(zip(unique, linker.link_batch(list(unique.values()), kind="passage"), strict=True))
    passage_ids = list(unique)
    unlinked_ids = {passage_ids[i] for i in linker.unlinked_in_last_batch}
    return [
        TurnLinks(
            query_entities=q_ents,
            passage_entities={p.id: tuple(linked[p.id]) for p in cands},
            unlinked_texts=(("query",) if number in unlinked_queries else ())
            + tuple(dict.fromkeys(p.id for p in cands if p.id in unlinked_ids)),
        )
        for number, (q_ents, cands) in enumerate(zip(query_entities, heads, strict=True))
    ]


def select_turns(
    linker: EntityLinker,
    selector: PassageSelector,
    items: Sequence[tuple[Sequence[PastTurn], PreparedTurn]],
    timed: Timer,
) -> list[tuple[TurnLinks, Selection]]:
    """Each turn's entities (unless prepared with them, or the selector reads none) and the passages ``selector``
    chooses among the first :attr:`~cast.core.stages.PassageSelector.candidates` of its ranking, each turn given
    its history."""
    histories = [bounded_history(list(history), {}) for history, _ in items]
    prepared = [p for _, p in items]
    candidates = [p.ranking[: selector.candidates] for p in prepared]
    links: list[TurnLinks]
    if not selector.needs_entities:  # as a whole run: none linked (a prepared pass may have)
        links = [TurnLinks() for _ in prepared]
    elif all(p.links is not None for p in prepared):
        links = [p.links for p in prepared if p.links is not None]
    else:
        links = timed(
            "link",
            lambda: link_turns(
                linker, selector.candidates, [p.rewrite.query for p in prepared], candidates, histories
            ),
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
    selections = timed("select", lambda: [selector.select(s) for s in selection_inputs])
    return list(zip(links, selections, strict=True))


def answer_selections(
    summarizer: Summarizer,
    verifier: Verifier | None,
    items: Sequence[tuple[str, Selection]],
    timed: Timer,
    earlier: Sequence[Sequence[str]] | None = None,
) -> list[tuple[Answer, Verification | None]]:
    """Each question's answer written from its selection by ``summarizer``, given the earlier answers of its
    conversation, and checked by ``verifier`` (``None``: unchecked)."""
    answers = timed("summarize", lambda: summarizer.summarize_batch(list(items), earlier))
    if verifier is None:
        return [(answer, None) for answer in answers]
    # Timed only where configured: other runs' timings stay as they were.
    checked = timed(
        "verify",
        lambda: verifier.verify_batch(
            [
                (question, selection, answer)
                for (question, selection), answer in zip(items, answers, strict=True)
            ]
        ),
    )
    return list(checked)


def _rest_as_other(timings: dict[str, float], started: float, turns: int) -> None:
    """Record as ``other`` a batch's seconds per turn since ``started`` outside its timed stages."""
    timings["other"] = max(0.0, (time.perf_counter() - started) / turns - sum(timings.values()))


# ``timed(step, fn)``: ``fn()``, its seconds recorded under ``step`` (:func:`step_timer`).
Timer = Callable[[str, Callable[[], Any]], Any]


def step_timer(
    timings: dict[str, float], turns: int, on_stage: Callable[[str], object] | None = None
) -> Timer:
    """``timed(step, fn)``: ``fn()`` once the step's stage kind is told to ``on_stage``, its wall-clock seconds per
    turn recorded in ``timings[step]``."""

    def timed(step: str, fn: Callable[[], Any]) -> Any:
        if on_stage is not None:
            on_stage(STEP_KINDS[step])
        start = time.perf_counter()
        out = fn()
        timings[step] = (time.perf_counter() - start) / turns
        return out

    return timed


def active_section(config: dict[str, Any], slot: Slot) -> dict[str, Any] | None:
    """The config's section for ``slot``; ``None`` for an optional slot the config leaves out or fills with
    ``none`` (no such step, and nothing about it recorded)."""
    section = config.get(slot.kind)
    if slot.optional and (not section or (isinstance(section, dict) and section.get("name") == "none")):
        return None
    return section


def configured_stage(slot: Slot, config: dict[str, Any], resources: StageResources) -> Stage | None:
    """The stage ``config`` names for ``slot``, built from its section with ``resources``; ``None`` where the
    slot is optional and the config leaves it empty (:func:`active_section`)."""
    section = active_section(config, slot)
    return None if section is None else build_stage(slot.kind, section, resources)


def check_config(config: dict[str, Any], resources: StageResources) -> None:
    """A :class:`CastError` for a config that no pipeline can run: a missing section, a top-level setting
    (:class:`~cast.core.config_keys.ConfigKeys`) or a stage's setting that does not fit its declaration (in every
    section, also those a pipeline builds late or not at all), an unknown stage, or resources that cannot start
    (``resources.check()``: the ``encoder`` section, a stemmer that is not the index's)."""
    missing = [k for k in STAGE_KINDS if k not in config]
    if missing:
        raise CastError(f"the config lacks the section(s): {', '.join(missing)}")
    ConfigKeys.of_config(config)
    for kind in STAGES:
        if kind in config:
            check_section(kind, config[kind])
    resources.check()


def merge_head(head: Sequence[ScoredPassage], ranking: Sequence[ScoredPassage]) -> list[ScoredPassage]:
    """The re-ranked head, then the first-stage passages not in it, in first-stage order."""
    if not head:
        return list(ranking)
    in_head = {p.id for p in head}
    return [*head, *(p for p in ranking if p.id not in in_head)]
