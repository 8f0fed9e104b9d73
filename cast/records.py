"""Typed records in the vocabulary of TREC CAsT. Ids are always ``str``.

Records are frozen dataclasses; ``to_dict`` / ``from_dict`` give the JSON form used in answers files.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any


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
    """What later turns may use of an earlier turn: its query, its top passage and its entities."""

    turn: Turn
    query: str
    top_passage: Passage | None = None
    query_entities: tuple[EntityMention, ...] = ()
    focus_entity: str | None = None


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
    """Rebuild a record written by :func:`to_dict` (nested records included).

    Raises:
        TypeError: ``data`` is not such a record: a field is missing or unknown, or of another type than the
            record declares (a file damaged or edited by hand), which would otherwise fail later and elsewhere.
    """
    try:
        record = _RECORD_READERS[cls](data)
    except (KeyError, TypeError, AttributeError) as e:
        raise TypeError(f"not a {cls.__name__} record ({type(e).__name__}: {e})") from None
    wrong = _wrong_field(record)
    if wrong is not None:
        raise TypeError(f"not a {cls.__name__} record: {wrong}")
    return record


_FIELD_TYPES: dict[type, list[tuple[str, Any]]] = {}


def _field_types(cls: type) -> list[tuple[str, Any]]:
    if cls not in _FIELD_TYPES:
        hints = typing.get_type_hints(cls)
        _FIELD_TYPES[cls] = [(f.name, hints[f.name]) for f in fields(cls)]
    return _FIELD_TYPES[cls]


def _wrong_field(record: Any) -> str | None:
    """The first field of ``record`` (nested records included) whose value is not of its declared type, as
    ``name = value``, or None."""
    for name, hint in _field_types(type(record)):
        value = getattr(record, name)
        if not _fits(value, hint):
            return f"{type(record).__name__}.{name} = {value!r:.80}"
        if is_dataclass(value):
            inner = _wrong_field(value)
            if inner is not None:
                return inner
        elif isinstance(value, tuple):
            inner = next((w for v in value if is_dataclass(v) and (w := _wrong_field(v)) is not None), None)
            if inner is not None:
                return inner
    return None


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the declared type ``hint`` (records: their own type; their fields are checked by
    :func:`_wrong_field`); floats must be finite."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool) or (isinstance(hint, type) and is_dataclass(hint)):
        return isinstance(value, hint)
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(v, typing.get_args(hint)[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and _fits(v, typing.get_args(hint)[1]) for k, v in value.items()
        )
    return True  # Any


def _turn(d: dict) -> Turn:
    return Turn(
        **{
            **d,
            "response_ids": tuple(d.get("response_ids", ())),
            "ptkb_relevant": tuple(d.get("ptkb_relevant", ())),
        }
    )


def _ptkb_selection(d: dict) -> PTKBSelection:
    return PTKBSelection(
        statements=tuple(PTKBStatement(**s) for s in d["statements"]), scores=d["scores"], method=d["method"]
    )


def _passage(d: dict | None) -> Passage | None:
    return None if d is None else Passage(**d)


def _scored(d: dict) -> ScoredPassage:
    return ScoredPassage(**{**d, "passage": _passage(d["passage"])})


def _mention(d: dict) -> EntityMention:
    return EntityMention(**d)


def _past_turn(d: dict) -> PastTurn:
    return PastTurn(
        turn=_turn(d["turn"]),
        query=d["query"],
        top_passage=_passage(d.get("top_passage")),
        query_entities=tuple(_mention(m) for m in d.get("query_entities", ())),
        focus_entity=d.get("focus_entity"),
    )


def _selection(d: dict) -> Selection:
    return Selection(
        passages=tuple(_scored(p) for p in d["passages"]),
        method=d["method"],
        scores=d.get("scores", {}),
        explanation=d.get("explanation", {}),
        focus_entity=d.get("focus_entity"),
    )


def _answer(d: dict) -> Answer:
    return Answer(
        **{
            **d,
            "source_ids": tuple(d["source_ids"]),
            "sentences": tuple(AnswerSentence(**s) for s in d.get("sentences", ())),
        }
    )


def _verification(d: dict) -> Verification:
    return Verification(**{**d, "claims": tuple(ClaimSupport(**c) for c in d.get("claims", ()))})


_RECORD_READERS = {
    Turn: _turn,
    Passage: _passage,
    ScoredPassage: _scored,
    EntityMention: _mention,
    PastTurn: _past_turn,
    Answer: _answer,
    Selection: _selection,
    Rewrite: lambda d: Rewrite(**d),
    PTKBSelection: _ptkb_selection,
    Verification: _verification,
}
