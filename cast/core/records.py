"""Typed records in the vocabulary of TREC CAsT. Ids are always ``str``.

Records are frozen dataclasses; ``to_dict`` / ``from_dict`` give the JSON form used in answers files and prepared
turns. A turn goes through three records as the pipeline takes it: a :class:`PreparedTurn` (rewritten, retrieved,
re-ranked, and possibly linked: :class:`TurnLinks`), then a :class:`TurnResult` (a prepared turn with its
selection and answer); each says what later turns of its conversation see of it (:class:`PastTurn`).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation.

    Attributes:
        qid: the query id used by the official qrels, e.g. ``31_1``, ``132_1-3``.
        topic_id: the conversation (topic) number as a string, e.g. ``31``.
        turn_id: the turn number within the topic, e.g. ``1`` or ``1-3`` (CAsT 2022 tree paths).
        utterance: the raw user utterance.
        manual_rewrite: the organisers' manually resolved utterance (oracle), if given.
        automatic_rewrite: the topic file's automatic rewrite, if given.
        response: the canonical response passage text (2021) or written response (2022), if given.
        response_ids: canonical result / provenance passage ids, if given.
        ptkb_relevant: iKAT: the ids of the conversation's PTKB statements judged relevant to this turn
            (``ptkb_provenance``, 2025 ``relevant_ptkbs``), if given.
    """

    qid: str
    topic_id: str
    turn_id: str
    utterance: str
    manual_rewrite: str | None = None
    automatic_rewrite: str | None = None
    response: str | None = None
    response_ids: tuple[str, ...] = ()
    ptkb_relevant: tuple[str, ...] = ()


@dataclass(frozen=True)
class PTKBStatement:
    """A statement of the user's personal text knowledge base (TREC iKAT), e.g. ``I'm vegetarian.``

    Attributes:
        id: its number in the topic file, as a string (``"1"``...; 2025 lists are numbered from 1 in order).
        text: the statement.
    """

    id: str
    text: str


@dataclass(frozen=True)
class PTKBSelection:
    """The PTKB statements chosen for one turn, best first, and the score of every statement.

    Attributes:
        statements: the chosen statements, best first.
        scores: the selector's score of every statement of the PTKB, by statement id (its scale depends on the
            method: BM25, cosine, cross-encoder logit; 1.0 for ``all``).
        method: the selector's name.
    """

    statements: tuple[PTKBStatement, ...]
    scores: dict[str, float]
    method: str


@dataclass(frozen=True)
class Conversation:
    """A conversation (a CAsT topic, or one path through a 2022 topic tree); iKAT ones carry the user's PTKB."""

    topic_id: str
    turns: tuple[Turn, ...]
    title: str | None = None
    description: str | None = None
    ptkb: tuple[PTKBStatement, ...] = ()


@dataclass(frozen=True)
class Passage:
    """A passage of the collection."""

    id: str
    text: str
    title: str | None = None


@dataclass(frozen=True)
class ScoredPassage:
    """A passage with a score from one stage.

    Attributes:
        score: the score of the stage that produced this ordering (higher is better); its scale depends on the
            stage: LMD log-likelihood, monoBERT relevance probability, cosine similarity...
        first_stage_score: the first-stage (Lucene) score, kept through re-ranking.
        first_stage_rank: 1-based rank in the first stage.
    """

    passage: Passage
    score: float
    first_stage_score: float | None = None
    first_stage_rank: int | None = None

    @property
    def id(self) -> str:
        return self.passage.id


@dataclass(frozen=True)
class EntityMention:
    """An entity linked in a text.

    Attributes:
        surface: the mention as it appears in the text.
        start: character offset of the mention in the text (inclusive).
        end: character offset of the end of the mention (exclusive).
        entity: the DBpedia-style identifier, e.g. ``http://dbpedia.org/resource/Barack_Obama``.
        confidence: the linker's confidence in [0, 1] (or its similarity score).
        linker: the name of the linker that produced it.
    """

    surface: str
    start: int
    end: int
    entity: str
    confidence: float
    linker: str


@dataclass(frozen=True)
class Rewrite:
    """A context-independent query and what produced it (so a rewrite can be shown and explained).

    Attributes:
        query: what retrieval and re-ranking search with.
        method: the rewriter's name.
        inputs: what the rewriter used (history keywords, model input...).
        question: the question as words to answer, where it is not ``query``: HQE's query is keywords in front
            of the utterance, which suit retrieval, while the answer generator matches sentences to the question
            (:attr:`answer_question`). ``None``: the query itself reads as the question.
    """

    query: str
    method: str
    inputs: dict[str, Any] = field(default_factory=dict)
    question: str | None = None

    @property
    def answer_question(self) -> str:
        """The text the answer generator answers."""
        return self.question or self.query

    @property
    def history_query(self) -> str:
        """The query later turns' rewriters read: without the PTKB statements a personalised query appends."""
        return self.inputs.get("rewritten_query", self.query)


@dataclass(frozen=True)
class PastTurn:
    """What later turns may use of an earlier turn: its query, its top passage, its entities and the answer the
    user read (``None`` where none was given, or the turn was not answered by the pipeline)."""

    turn: Turn
    query: str
    top_passage: Passage | None = None
    query_entities: tuple[EntityMention, ...] = ()
    focus_entity: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class Selection:
    """The passages chosen for the generator, and why.

    Attributes:
        passages: the chosen passages, best first (their text may be filtered, e.g. by the entity-density filter).
        scores: the final selection score of every candidate, by passage id.
        explanation: method-specific, JSON-serialisable details (entities, ranks, graph edges kept, paths...).
        focus_entity: the conversation's highest-ranked entity at this turn, if the method ranks entities.
    """

    passages: tuple[ScoredPassage, ...]
    method: str
    scores: dict[str, float] = field(default_factory=dict)
    explanation: dict[str, Any] = field(default_factory=dict)
    focus_entity: str | None = None


@dataclass(frozen=True)
class AnswerSentence:
    """A sentence of an answer and the passage it came from (None where a generator cannot say)."""

    text: str
    passage_id: str | None


@dataclass(frozen=True)
class Answer:
    """One answer for a turn.

    Attributes:
        text: the answer; never empty (see ``no_answer_reason``).
        source_ids: the ids of the passages the generator read.
        sentences: the answer's sentences with their attribution, where the generator knows it.
        generator: the generator's name (and model, for neural generators).
        settings: the decoding/selection settings used.
        no_answer_reason: set when no usable answer could be produced; ``text`` then says so.
    """

    text: str
    source_ids: tuple[str, ...]
    generator: str
    sentences: tuple[AnswerSentence, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    no_answer_reason: str | None = None


NO_ANSWER_TEXT = "No answer was found for this question."


@dataclass(frozen=True)
class ClaimSupport:
    """One claim (sentence) of an answer, scored against the passage it cites.

    Attributes:
        text: the claim as the answer gave it.
        passage_id: the passage it was scored against: the one it cites, else (a generator that does not say)
            the selected passage that supports it best; ``None`` where no passage had text.
        support: the verifier's support score in [0, 1] (its scale is the verifier's: see ``verifier``).
        supported: ``support`` reached the verifier's threshold.
        kept: the claim is in the verified answer (unsupported claims are dropped, or kept and marked).
    """

    text: str
    passage_id: str | None
    support: float
    supported: bool
    kept: bool


@dataclass(frozen=True)
class Verification:
    """How an answer's claims were checked against the passages, and whether the answer was withheld.

    Attributes:
        verifier: the verifier's name (and model, where it has one).
        claims: every claim of the generated answer, in order.
        relevance: the best selected passage's relevance to the question, on the verifier's scale (cosine of
            sentence embeddings); ``None`` where no passage had text.
        abstained: the answer was replaced by the abstention text.
        reason: why it abstained, if it did.
        original_text: the generated answer before verification.
    """

    verifier: str
    claims: tuple[ClaimSupport, ...]
    relevance: float | None
    abstained: bool
    reason: str | None = None
    original_text: str = ""


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
    stages (selection, answer) start from (:meth:`cast.core.pipeline.Pipeline.prepare_batch`).

    Attributes:
        ranking: the re-ranked head followed by the rest of the first-stage ranking (empty: only rewritten).
        links: the linker's entities, or ``None`` where the turn was not linked.
        timings: wall-clock seconds per stage run so far, and ``other``: the rest of the turn's share of its
            batch's time (bounds, merging, the selection's inputs), so that they add up to the turn.
        input_limits: the bounds of :mod:`cast.core.limits` applied to this turn's inputs: ``{what: original
            size}`` (e.g. ``{"utterance": 1000000}``); empty when none was.
        ptkb: the PTKB statements chosen for the turn and every statement's score (iKAT topics), if any.
    """

    turn: Turn
    rewrite: Rewrite
    ranking: tuple[ScoredPassage, ...] = ()
    links: TurnLinks | None = None
    timings: dict[str, float] = field(default_factory=dict)
    input_limits: dict[str, int] = field(default_factory=dict)
    ptkb: PTKBSelection | None = None

    @property
    def qid(self) -> str:
        return self.turn.qid

    def past_turn(self) -> PastTurn:
        """What later turns' early stages may use of this one: its query (without PTKB statements), top passage and
        query entities, and the topics' response (a prepared turn has no answer)."""
        return PastTurn(
            turn=self.turn,
            query=self.rewrite.history_query,
            top_passage=self.ranking[0].passage if self.ranking else None,
            query_entities=self.links.query_entities if self.links else (),
        )


@dataclass(frozen=True, kw_only=True)
class TurnResult(PreparedTurn):
    """A turn answered: the prepared turn (linked), the passages chosen for the answer, and the answer.

    Attributes:
        verification: how the verifier checked the generated answer's claims, where the config has one.
    """

    links: TurnLinks = field(default_factory=TurnLinks)
    selection: Selection
    answer: Answer
    verification: Verification | None = None

    @property
    def query_entities(self) -> tuple[EntityMention, ...]:
        return self.links.query_entities

    @property
    def passage_entities(self) -> dict[str, tuple[EntityMention, ...]]:
        return self.links.passage_entities

    @property
    def unlinked_texts(self) -> tuple[str, ...]:
        return self.links.unlinked_texts

    def past_turn(self, answer_as_response: bool = False) -> PastTurn:
        """What later turns may use of this one (its focus entity too); with ``answer_as_response``, the answer (if
        there is one) is the turn's response, in place of the topics' canonical one."""
        answer = self.answer
        return replace(
            super().past_turn(),
            turn=_with_response(self.turn, answer.text, answer.no_answer_reason, answer_as_response),
            focus_entity=self.selection.focus_entity,
            answer=answer.text if answer.no_answer_reason is None else None,
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
    """What later turns need of a turn answered in an earlier (interrupted) run: the inverse of
    :meth:`TurnResult.past_turn` over its answers-file record (:meth:`TurnResult.to_record`)."""
    top = record.get("top_passage")
    answer = record.get("answer") or {}
    return PastTurn(
        turn=_with_response(turn, answer.get("text"), answer.get("no_answer_reason"), answer_as_response),
        query=(record.get("rewrite") or {}).get("inputs", {}).get("rewritten_query", record["query"]),
        top_passage=from_dict(Passage, top) if top else None,
        query_entities=tuple(from_dict(EntityMention, m) for m in record.get("query_entities", ())),
        focus_entity=(record.get("selection") or {}).get("focus_entity"),
        answer=answer.get("text") if answer.get("text") and answer.get("no_answer_reason") is None else None,
    )


def _with_response(turn: Turn, answer: str | None, no_answer_reason: str | None, use: bool) -> Turn:
    # The answer is what the user read and refers back to ("the first one"): later turns see it as the turn's
    # response, as CAsT 2022 topics give the canonical one (HQE's response keywords, T5's p_j).
    return replace(turn, response=answer) if use and answer and no_answer_reason is None else turn


def to_dict(record: Any) -> dict[str, Any]:
    """The JSON-serialisable form of a record: nested records become dicts (tuples stay tuples; JSON writes them
    as lists). As :func:`dataclasses.asdict`, without its deep copy of every other value (a selection's
    explanation holds thousands: ``asdict`` took 20 ms a turn)."""
    return _plain(record)


def _plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return copy.deepcopy(value)


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a record written by :func:`to_dict` (nested records included), validated by pydantic against the
    record's declaration: JSON's lists become the declared tuples, numbers must be finite.

    Raises:
        TypeError: ``data`` is not such a record: a field is missing or unknown, or of another type than the
            record declares (a file damaged or edited by hand), which would otherwise fail later and elsewhere;
            one line naming the first such field, as ``ranking[0].score = 'high'``.
    """
    try:
        return _reader(cls).validate_python(data)
    except ValidationError as e:
        error = e.errors(include_url=False)[0]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(
            "."
        )
        found = "" if error["type"] == "missing" else f"{' = ' if where else ''}{error['input']!r:.80}"
        raise TypeError(f"not a {cls.__name__} record: {where}{found} ({error['msg']})") from None


@functools.cache
def _reader(cls: type) -> TypeAdapter[Any]:
    return TypeAdapter(cls)


# How pydantic reads every record of this module: no field beyond those declared, no NaN or infinity for a number.
for _record in [
    value for value in tuple(globals().values()) if isinstance(value, type) and is_dataclass(value)
]:
    _record.__pydantic_config__ = ConfigDict(extra="forbid", allow_inf_nan=False)  # type: ignore[attr-defined]
