"""The pipeline's stages: small classes with one obvious method over typed records.

A stage is built from its config section by :func:`cast.registry.build_stage`, which calls
``cls.from_config(params, resources)``. The default ``from_config`` passes the section's keys as keyword
arguments: a stage's ``__init__`` signature, with its limits and docs, is its configuration schema
(:mod:`cast.settings`).

Per turn the pipeline calls, in order::

    Rewriter.rewrite(history, turn) -> Rewrite
    FirstStage.search(query, k) -> list[ScoredPassage]
    Reranker.rerank(query, passages) -> list[ScoredPassage]
    EntityLinker.link(text) -> list[EntityMention]            (queries and the top passages)
    PassageSelector.select(SelectionInput) -> Selection
    Summarizer.summarize(query, selection) -> Answer
    Verifier.verify(question, selection, answer) -> (Answer, Verification)   (where the config has one)

Each has a ``*_batch`` form that the pipeline uses; the default loops, and stages that batch (neural models,
Lucene's threaded search) override it.
"""

from __future__ import annotations

import inspect
from abc import ABCMeta, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from cast.errors import ConfigError, ModelUnavailableError
from cast.records import (
    Answer,
    Conversation,
    EntityMention,
    PastTurn,
    Rewrite,
    ScoredPassage,
    Selection,
    Turn,
    Verification,
)
from cast.settings import Setting, check_value, stage_settings

if TYPE_CHECKING:
    from cast.resources import Resources


class _StageType(ABCMeta):
    """Builds a stage and records its settings: every keyword of the construction, defaults filled in, checked
    against the declaration (:mod:`cast.settings`) first, however the stage is built (a config or a test)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        declared = cls.settings()  # type: ignore[attr-defined]
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs).arguments  # type: ignore[misc]
        given = {**{k: v for k, v in bound.items() if k in declared}, **bound.get(_extra_key(cls), {})}
        for name, value in given.items():
            if name in declared:
                check_value(cls.kind, declared[name], value)  # type: ignore[attr-defined]
        stage = super().__call__(*args, **kwargs)
        stage._setting_values = {name: given.get(name, setting.default) for name, setting in declared.items()}
        return stage


def _extra_key(cls: type) -> str:
    """The name of ``cls.__init__``'s ``**settings`` parameter, if it has one."""
    for name, parameter in inspect.signature(cls.__init__).parameters.items():  # type: ignore[misc]
        if parameter.kind is parameter.VAR_KEYWORD:
            return name
    return ""


class Stage(metaclass=_StageType):
    """Base of all stages. ``name`` is the registry name, which each class states (the contract test checks it
    against the registry); each kind's one method is abstract, so a class lacking it cannot be built.

    A stage's settings are its constructor's keyword parameters (:mod:`cast.settings`); once built, it holds
    their values in ``setting_values``, from which :meth:`describe` is made."""

    kind: ClassVar[str] = "stage"
    name: str = ""
    _setting_values: dict[str, Any] = {}  # noqa: RUF012  (set per instance by the metaclass)

    @property
    def setting_values(self) -> Mapping[str, Any]:
        """Every setting's value in this stage, defaults filled in (read-only)."""
        return MappingProxyType(self._setting_values)

    @classmethod
    def settings(cls) -> dict[str, Setting]:
        """The stage's settings, as its constructor (and those of the bases it passes ``**settings`` to)
        declares them."""
        return stage_settings(cls)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """A :class:`ConfigError` for an unknown setting or a value that does not fit (nothing is built)."""
        accepted = cls.settings()
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            raise ConfigError(
                f"{cls.kind} {cls.name}: unknown setting(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(accepted)) or 'none'}"
            )
        for key, value in params.items():
            check_value(cls.kind, accepted[key], value)

    @classmethod
    def from_config(cls, params: dict[str, Any], resources: Resources) -> Stage:
        """Build the stage from its config section. Unknown keys are a :class:`ConfigError`."""
        cls.check_params(params)
        if "resources" in inspect.signature(cls.__init__).parameters:
            params = {**params, "resources": resources}
        try:
            return cls(**params)
        except ModelUnavailableError as e:
            if e.setting is not None:
                raise
            # Only here is the stage's config section known: name it in the hints.
            raise ModelUnavailableError(
                e.model, e.reason, setting=f"{cls.kind}.model", downloads_off=e.downloads_off
            ) from e

    def describe(self) -> dict[str, Any]:
        """What to record about this stage in outputs: its name, every setting's value, and what it resolved
        when built (:meth:`described_extras`)."""
        return {"name": self.name, **self.setting_values, **self.described_extras()}

    def described_extras(self) -> dict[str, Any]:
        """Values the stage resolved when it was built that change its outputs (a model's real dtype, the
        checkpoint a default named): recorded beside its settings."""
        return {}


class Rewriter(Stage):
    """Turns an utterance into a context-independent query."""

    kind = "rewriter"
    # Whether it reads an earlier turn's top passage (where the topics give no response), which only a walk that
    # retrieves each turn before rewriting the next has (not cast.pyterrier's).
    reads_top_passages: ClassVar[bool] = False

    @abstractmethod
    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        raise NotImplementedError

    def rewrite_batch(self, items: Sequence[tuple[Sequence[PastTurn], Turn]]) -> list[Rewrite]:
        """Rewrite turns of independent conversations (one item per conversation)."""
        return [self.rewrite(history, turn) for history, turn in items]

    def check_topics(self, conversations: Sequence[Conversation]) -> None:
        """Raise a :class:`ConfigError` if some turn of ``conversations`` cannot be rewritten (e.g. it lacks the
        topic-file rewrite this rewriter reads), so that a run stops before its first turn, not in the middle."""


class FirstStage(Stage):
    """Retrieves passages for a query from the collection."""

    kind = "first_stage"

    @abstractmethod
    def search(self, query: str, k: int | None = None) -> list[ScoredPassage]:
        """The top ``k`` passages (``None``: the stage's configured depth)."""
        raise NotImplementedError

    def search_batch(self, queries: Sequence[str], k: int | None = None) -> list[list[ScoredPassage]]:
        return [self.search(q, k) for q in queries]


class Reranker(Stage):
    """Re-scores the head of a first-stage ranking. Returns the re-ranked head only (``depth`` passages)."""

    kind = "reranker"
    depth: int = 100

    @abstractmethod
    def rerank(self, query: str, passages: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        raise NotImplementedError

    def rerank_batch(self, items: Sequence[tuple[str, Sequence[ScoredPassage]]]) -> list[list[ScoredPassage]]:
        return [self.rerank(q, ps) for q, ps in items]


class EntityLinker(Stage):
    """Finds entity mentions in a text and links them to knowledge-base identifiers."""

    kind = "linker"
    # The positions (in its ``texts``) of the texts the last ``link_batch`` call could not link (its service
    # failed): set by linkers that can fail, read by the pipeline to record them per turn.
    unlinked_in_last_batch: tuple[int, ...] = ()

    @abstractmethod
    def link(self, text: str, *, kind: str = "passage") -> list[EntityMention]:
        """``kind`` is ``"query"`` or ``"passage"`` (linkers may use different confidence thresholds)."""
        raise NotImplementedError

    def link_batch(
        self, texts: Sequence[str], *, kind: str = "passage", contexts: Sequence[str] | None = None
    ) -> list[list[EntityMention]]:
        """The mentions in each text; ``contexts`` (aligned with ``texts``) is what the conversation said before
        each one ("the band" after a turn about Metallica), for linkers that read it (others ignore it)."""
        return [self.link(t, kind=kind) for t in texts]

    def report(self) -> str | None:
        """A line for the end of a run (e.g. how many texts were left unlinked), or None."""
        return None

    def start_helpers(self) -> None:
        """Start now the helper processes the first large batch would start, so that they load while the rest of
        the pipeline does (linkers without helpers do nothing)."""


class KnowledgeBase(Stage):
    """Gives entity relatedness (Milne-Witten over in-link sets)."""

    kind = "knowledge_base"

    @abstractmethod
    def relatedness(self, a: str, b: str) -> float:
        raise NotImplementedError

    def relatedness_matrix(self, left: Sequence[str], right: Sequence[str]) -> list[list[float]]:
        """``[[rel(l, r) for r in right] for l in left]``; knowledge bases override this to batch look-ups."""
        return [[self.relatedness(a, b) for b in right] for a in left]


@dataclass(frozen=True)
class SelectionInput:
    """What a passage selector sees at one turn.

    Attributes:
        query: the rewritten query of this turn.
        candidates: the re-ranked top passages (10 by default), best first.
        query_entities: entities of the current query.
        history_entities: entities of all previous queries of the conversation (their rewrites).
        passage_entities: the entities of each candidate, aligned with ``candidates``.
        previous_focus_entity: the previous turn's highest-ranked entity (for entity paths), if any.
    """

    query: str
    candidates: tuple[ScoredPassage, ...]
    query_entities: tuple[EntityMention, ...] = ()
    history_entities: tuple[EntityMention, ...] = ()
    passage_entities: tuple[tuple[EntityMention, ...], ...] = ()
    previous_focus_entity: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class PassageSelector(Stage):
    """Chooses the passages the generator reads."""

    kind = "selector"
    needs_entities: ClassVar[bool] = False

    @abstractmethod
    def select(self, inputs: SelectionInput) -> Selection:
        raise NotImplementedError


class Summarizer(Stage):
    """Writes the answer from the selected passages."""

    kind = "summarizer"

    @abstractmethod
    def summarize(self, query: str, selection: Selection) -> Answer:
        raise NotImplementedError

    def summarize_batch(self, items: Sequence[tuple[str, Selection]]) -> list[Answer]:
        return [self.summarize(q, s) for q, s in items]


class Verifier(Stage):
    """Checks each claim of an answer against the passage it cites: drops (or marks) the unsupported ones, and
    withholds the answer where nothing in it is supported or the passages do not answer the question."""

    kind = "verifier"

    @abstractmethod
    def verify(
        self, question: str, selection: Selection, answer: Answer
    ) -> tuple[Answer, Verification | None]:
        """The answer to give (the generated one, with unsupported claims dropped, or the abstention) and how it
        was checked (``None``: not checked)."""
        raise NotImplementedError

    def verify_batch(
        self, items: Sequence[tuple[str, Selection, Answer]]
    ) -> list[tuple[Answer, Verification | None]]:
        return [self.verify(q, s, a) for q, s, a in items]
