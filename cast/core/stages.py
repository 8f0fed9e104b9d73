"""The pipeline's stages: small classes with one obvious method over typed records.

A stage declares its settings in a nested ``Settings`` model (:mod:`cast.core.settings`): the fields, their limits
and meaning, are its configuration schema. It is built from its config section by
:func:`cast.core.registry.build_stage` (``cls.from_config(params, resources)``), or in code with the settings as
keywords (``EntityGraphSelector(gamma=0.5)``); either way the settings are checked before ``__init__`` runs and
held, once, in ``setting_values``.

Per turn the pipeline calls, in order::

    PTKBSelector.select(statements, history, turn) -> PTKBSelection   (iKAT topics, where the config has one)
    Rewriter.rewrite(history, turn) -> Rewrite
    FirstStage.search(query, k) -> list[ScoredPassage]
    Reranker.rerank(query, passages) -> list[ScoredPassage]
    EntityLinker.link(text) -> list[EntityMention]            (queries and the top passages)
    PassageSelector.select(SelectionInput) -> Selection
    Summarizer.summarize(query, selection, earlier) -> Answer   (earlier: the conversation's earlier answers)
    Verifier.verify(question, selection, answer) -> (Answer, Verification)   (where the config has one)

Stages that ask a chat model (the ``llm`` rewriter and summarizer) share
:class:`cast.infra.chat_stage.ChatModelStage`.

Each has a ``*_batch`` form that the pipeline uses; the default loops, and stages that batch (neural models,
Lucene's threaded search) override it.
"""

from __future__ import annotations

import copy
import inspect
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, TypeVar, runtime_checkable

from cast.core.records import (
    Answer,
    Conversation,
    EntityMention,
    PastTurn,
    PTKBSelection,
    PTKBStatement,
    Rewrite,
    ScoredPassage,
    Selection,
    Turn,
    Verification,
)
from cast.core.settings import Setting, StageSettings
from cast.errors import ModelUnavailableError

T = TypeVar("T")


@runtime_checkable
class StageResources(Protocol):
    """What stages are built with (:meth:`Stage.from_config`) and a pipeline checks before it runs: the resolved
    config and the things its stages share, made once. The turn core knows resources by this contract alone;
    :class:`cast.infra.resources.Resources` starts them (the JVM, the cache, encoders, chat clients)."""

    config: dict[str, Any]

    def shared(self, key: Hashable, build: Callable[[], T]) -> T:
        """What ``build()`` makes, made once under ``key``."""
        ...

    def check(self) -> None:
        """A :class:`~cast.errors.ConfigError` for resources no pipeline can start (a stemmer that is not the
        index's...)."""
        ...

    def check_device(self) -> None:
        """A :class:`~cast.errors.ConfigError` for a device this machine lacks."""
        ...


class _StageType(ABCMeta):
    """Builds a stage: the settings among the arguments are checked against the stage's ``Settings`` and held in
    ``setting_values`` (defaults filled in) before ``__init__`` runs with the others (``resources``), however the
    stage is built (a config or a test)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        own = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]  # type: ignore[misc]
        given = {key: kwargs.pop(key) for key in list(kwargs) if key not in {p.name for p in own}}
        # Positional values beyond ``__init__``'s own parameters are settings, in their declared order.
        taken = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in own)
        given.update(zip(cls.settings(), args[taken:], strict=False))  # type: ignore[attr-defined]
        args = args[:taken]
        # object.__new__ refuses an abstract class (one lacking its kind's method).
        stage: Any = object.__new__(cls)  # type: ignore[arg-type]
        stage.setting_values = cls.check_params(given)  # type: ignore[attr-defined]
        stage.__init__(*args, **kwargs)
        return stage


class Stage(metaclass=_StageType):
    """Base of all stages. ``name`` is the registry name, which each class states (the contract test checks it
    against the registry); each kind's one method is abstract, so a class lacking it cannot be built.

    A stage's settings are the fields of its nested ``Settings`` class (and of the classes it extends); once
    built, it holds their values in ``setting_values``, from which :meth:`describe` is made."""

    kind: ClassVar[str] = "stage"
    name: ClassVar[str] = ""

    class Settings(StageSettings):
        """A stage's settings (none here: each stage declares its own)."""

    setting_values: Settings

    @classmethod
    def settings(cls) -> dict[str, Setting]:
        """The stage's settings as its ``Settings`` declares them (its own first, then those it inherits)."""
        return cls.Settings.declared()

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> Settings:
        """The stage's settings ``params`` give, checked: a :class:`ConfigError` for an unknown setting or a value
        that does not fit (nothing is built)."""
        return cls.Settings.of(params, section=cls.kind, where=f"{cls.kind} {cls.name}")

    @classmethod
    def from_config(cls, params: dict[str, Any], resources: StageResources | None) -> Self:
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

    def with_settings(self, **values: Any) -> Self:
        """The same stage (sharing what it loaded) with some settings changed: for settings it reads as it runs
        (a generator's ``min_length``), not those it built something from."""
        other = copy.copy(self)
        other.setting_values = self.check_params({**dict(self.setting_values), **values})
        return other

    def describe(self) -> dict[str, Any]:
        """What to record about this stage in outputs: its name, every setting's value, and what it resolved
        when built (:meth:`described_extras`)."""
        return {"name": self.name, **dict(self.setting_values), **self.described_extras()}

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


class PTKBSelector(Stage):
    """Chooses the statements of the user's personal text knowledge base (TREC iKAT) that matter at a turn, and
    says how the rewriter and the answer generator use them."""

    kind = "ptkb"
    # False for the selector that never chooses a statement (``none``): the pipeline then leaves the step out.
    selects: ClassVar[bool] = True

    @abstractmethod
    def select(
        self, statements: Sequence[PTKBStatement], history: Sequence[PastTurn], turn: Turn
    ) -> PTKBSelection:
        """The chosen statements, best first, and every statement's score."""
        raise NotImplementedError

    def rewriter_history(
        self, history: Sequence[PastTurn], turn: Turn, selection: PTKBSelection
    ) -> Sequence[PastTurn]:
        """The history the rewriter sees, given the statements chosen at this turn."""
        return history

    def personalise(self, rewrite: Rewrite, selection: PTKBSelection) -> Rewrite:
        """``rewrite`` with the chosen statements put to use (in the query, or before the question answered)."""
        return rewrite


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

    @property
    def depth(self) -> int:
        """How many passages of a first-stage ranking it re-ranks (the head)."""
        return 100

    @abstractmethod
    def rerank(self, query: str, passages: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        raise NotImplementedError

    def rerank_batch(
        self, items: Sequence[tuple[str, Sequence[ScoredPassage]]], *, questions: Sequence[str] | None = None
    ) -> list[list[ScoredPassage]]:
        """Each ``(query, head)`` re-ranked. ``questions`` (aligned with ``items``) is each turn's question as words
        to answer (:attr:`~cast.core.records.Rewrite.answer_question`) where the query is keywords, for re-rankers
        that read it beside the query (others ignore it)."""
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

    @property
    def candidates(self) -> int:
        """How many of the re-ranked passages it considers (and the pipeline links)."""
        return 10

    @abstractmethod
    def select(self, inputs: SelectionInput) -> Selection:
        raise NotImplementedError


class Summarizer(Stage):
    """Writes the answer from the selected passages."""

    kind = "summarizer"

    @abstractmethod
    def summarize(self, query: str, selection: Selection, earlier: Sequence[str] = ()) -> Answer:
        """The answer to ``query`` from the selected passages; ``earlier`` holds the conversation's earlier
        answers, which a generator may avoid repeating."""
        raise NotImplementedError

    def summarize_batch(
        self, items: Sequence[tuple[str, Selection]], earlier: Sequence[Sequence[str]] | None = None
    ) -> list[Answer]:
        said = earlier if earlier is not None else [()] * len(items)
        return [self.summarize(q, s, e) for (q, s), e in zip(items, said, strict=True)]


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
