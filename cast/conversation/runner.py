"""What runs a configuration over conversations: in this process (:class:`LocalRunner`) or on Ray actors
(:class:`cast.conversation.ray_runner.RayRunner`), behind one protocol (:class:`Runner`), so that ``cast run``,
``cast sweep`` and the benchmarks write the same outputs either way without asking which."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from cast.conversation.prepared import Prepared
from cast.conversation.ray_runner import RayRunner
from cast.conversation.walker import answer_conversations, prepare_conversations
from cast.core.pipeline import Pipeline
from cast.core.records import Conversation, TurnResult
from cast.infra.cluster import RayOptions


class Runner(Protocol):
    """A configuration's pipeline, run over conversations."""

    @property
    def candidates(self) -> int:
        """How many re-ranked passages the selector considers (and the linker links)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What every answers record states of the settings (``Pipeline.describe``)."""
        ...

    def early_description(self, stop_after: str) -> dict[str, Any]:
        """What decides the turns of a pass stopping after ``stop_after`` (``Pipeline.early_description``)."""
        ...

    def run(
        self,
        conversations: Iterable[Conversation],
        *,
        done: Mapping[str, dict[str, Any]] | None = None,
        on_result: Callable[[TurnResult], None] | None = None,
        progress: bool = False,
        prepared: Prepared | None = None,
    ) -> list[TurnResult]:
        """Every turn of ``conversations`` answered (:func:`cast.conversation.walker.answer_conversations`; none
        returned where ``on_result`` takes each)."""
        ...

    def prepare(
        self, conversations: Iterable[Conversation], *, stop_after: str = "rerank", progress: bool = False
    ) -> Prepared:
        """Every turn taken as far as ``stop_after`` (:func:`cast.conversation.walker.prepare_conversations`)."""
        ...

    def linker_report(self) -> str | None:
        """The linker's end-of-run line (e.g. how many texts it left unlinked), or None."""
        ...

    def close(self) -> None:
        """Free what the runner holds (Ray actors)."""
        ...


class LocalRunner:
    """A pipeline run in this process."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline

    @property
    def candidates(self) -> int:
        return self.pipeline.candidates

    def describe(self) -> dict[str, Any]:
        return self.pipeline.describe()

    def early_description(self, stop_after: str) -> dict[str, Any]:
        return self.pipeline.early_description(stop_after)

    def run(
        self,
        conversations: Iterable[Conversation],
        *,
        done: Mapping[str, dict[str, Any]] | None = None,
        on_result: Callable[[TurnResult], None] | None = None,
        progress: bool = False,
        prepared: Prepared | None = None,
    ) -> list[TurnResult]:
        return answer_conversations(
            self.pipeline, conversations, done=done, on_result=on_result, progress=progress, prepared=prepared
        )

    def prepare(
        self, conversations: Iterable[Conversation], *, stop_after: str = "rerank", progress: bool = False
    ) -> Prepared:
        return prepare_conversations(self.pipeline, conversations, stop_after=stop_after, progress=progress)

    def linker_report(self) -> str | None:
        return self.pipeline.linker.report()

    def close(self) -> None:
        """Nothing to free: the pipeline's models go with it."""


@contextmanager
def open_runner(config: dict[str, Any], ray: RayOptions | None = None) -> Iterator[Runner]:
    """The runner of ``config``: its pipeline here, or with ``ray`` one per Ray actor; closed on leaving."""
    runner: Runner = LocalRunner(Pipeline.from_config(config)) if ray is None else RayRunner(config, ray)
    try:
        yield runner
    finally:
        runner.close()
