"""The Ray runner (``--ray``): a pipeline per Ray actor, run as :class:`cast.conversation.runner.Runner` says, so
that a run writes its outputs as a local run does.

Each actor builds one Pipeline from the config and walks whole conversations (:mod:`cast.conversation.walker`), so the
turns of a conversation stay in order on one actor, each with the history a local run gives it. Conversations
that share turns (CAsT 2022 paths share their prefixes) go to one actor together, in their order in the topics,
so that a shared turn is answered once, by the path that reaches it first, as in a local run. Actors return
results and write nothing: the driver (this process) writes every turn through the same resumable outputs, so a
retried call (an actor died and was restarted, :mod:`cast.infra.cluster`) neither loses nor repeats a turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from cast.conversation.prepared import Prepared
from cast.conversation.walker import answer_conversations, prepare_conversations
from cast.core.pipeline import Pipeline
from cast.core.records import Conversation, TurnResult
from cast.errors import CastError
from cast.formats.outputs import setting_difference
from cast.infra.cluster import RayOptions, WorkerPool, require_path


class ConversationAnswerer:
    """One actor's share: a Pipeline built from ``config`` where it is first used, answering conversations.

    Args:
        config: the pipeline config, as ``cast run`` loaded it.
    """

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self._pipeline: Pipeline | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pipeline": None}

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            if self.config.get("index"):
                require_path(self.config["index"], "the index", "--index")
            self._pipeline = Pipeline.from_config(self.config)
        return self._pipeline

    def describe(self) -> dict[str, Any]:
        return self.pipeline.describe()

    def linker_report(self) -> str | None:
        return self.pipeline.linker.report()

    def candidates(self) -> int:
        return self.pipeline.candidates

    def early_description(self, stop_after: str) -> dict[str, Any]:
        return self.pipeline.early_description(stop_after)

    def __call__(self, job: Job) -> list[Any]:
        """The results (or, with ``job.stop_after``, the prepared turns) of the turns of the job's conversations."""
        if job.stop_after is not None:
            prepared = prepare_conversations(self.pipeline, job.conversations, stop_after=job.stop_after)
            return list(prepared.turns.values())
        return answer_conversations(self.pipeline, job.conversations, done=job.done, prepared=job.prepared)


@dataclass(frozen=True)
class Job:
    """One actor call: conversations that share turns, the records of those already answered (history only),
    and their prepared turns to finish, or where to stop preparing them."""

    conversations: list[Conversation]
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    prepared: Prepared | None = None
    stop_after: str | None = None


def conversation_groups(conversations: Sequence[Conversation]) -> list[list[Conversation]]:
    """The conversations, grouped so that those sharing a turn (a qid) are in one group, in their order.

    Example:
        >>> from cast.core.records import Turn
        >>> def path(*qids):
        ...     return Conversation("1", tuple(Turn(q, "1", q, "?") for q in qids))
        >>> groups = conversation_groups([path("1_1", "1_2"), path("2_1"), path("1_1", "1_3")])
        >>> [[[t.qid for t in c.turns] for c in group] for group in groups]
        [[['1_1', '1_2'], ['1_1', '1_3']], [['2_1']]]
    """
    parent = list(range(len(conversations)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for number, conversation in enumerate(conversations):
        for turn in conversation.turns:
            other = first_with.setdefault(turn.qid, number)
            parent[root(number)] = root(other)
    groups: dict[int, list[Conversation]] = {}
    for number, conversation in enumerate(conversations):
        groups.setdefault(root(number), []).append(conversation)
    return list(groups.values())


class RayRunner:
    """A Pipeline per Ray actor, run as one (:class:`cast.conversation.runner.Runner`); every actor builds its
    pipeline now (models load in parallel, and a worker without the index fails before any turn).

    Args:
        config: the pipeline config.
        options: where and how wide to run.

    Raises:
        CastError: an actor lacks the index, or describes its pipeline differently from the first one (another
            version of the toolkit, a model or a dictionary that differs on its machine).
    """

    def __init__(self, config: dict[str, Any], options: RayOptions):
        self.pool = WorkerPool(ConversationAnswerer(config), options)
        try:
            descriptions = self.pool.call_all("describe")
            for number, description in enumerate(descriptions[1:], start=1):
                if json.dumps(description, sort_keys=True) != json.dumps(descriptions[0], sort_keys=True):
                    raise CastError(
                        f"Ray worker {number} builds another pipeline than worker 0 "
                        f"({setting_difference(descriptions[0], description)}): give every machine the same toolkit, "
                        "models and index files"
                    )
        except BaseException:
            self.close()
            raise
        self.description = descriptions[0]
        self._candidates = self.pool.call_all("candidates")[0]
        self.linker_reports: list[str] = []

    @property
    def candidates(self) -> int:
        return self._candidates

    def describe(self) -> dict[str, Any]:
        return self.description

    def early_description(self, stop_after: str) -> dict[str, Any]:
        return self.pool.call_all("early_description", stop_after)[0]

    def run(
        self,
        conversations: Iterable[Conversation],
        *,
        done: Mapping[str, dict[str, Any]] | None = None,
        on_result: Callable[[TurnResult], None] | None = None,
        progress: bool = False,
        prepared: Prepared | None = None,
    ) -> list[TurnResult]:
        """Answer every turn of ``conversations`` on the actors (see
        :func:`cast.conversation.walker.answer_conversations`); ``on_result`` is called here, with each result of a
        group of conversations once the group is done (and the result is not kept)."""
        done = dict(done or {})
        jobs = []
        for group in conversation_groups(list(conversations)):
            qids = {t.qid for c in group for t in c.turns}
            if qids - set(done):
                own = None if prepared is None else prepared.subset(qids)
                jobs.append(Job(group, {qid: done[qid] for qid in qids if qid in done}, prepared=own))
        results = self._map(jobs, set(done), on_result, progress, "turns")
        self.linker_reports = [r for r in dict.fromkeys(self.pool.call_all("linker_report")) if r]
        return results

    def prepare(
        self, conversations: Iterable[Conversation], *, stop_after: str = "rerank", progress: bool = False
    ) -> Prepared:
        """Every turn of ``conversations`` prepared on the actors (see
        :func:`cast.conversation.walker.prepare_conversations`)."""
        jobs = [Job(group, stop_after=stop_after) for group in conversation_groups(list(conversations))]
        turns = self._map(jobs, set(), None, progress, "preparing turns")
        return Prepared(stop_after, self.early_description(stop_after), {t.qid: t for t in turns})

    def _map(
        self,
        jobs: list[Job],
        done: set[str],
        on_result: Callable[[Any], None] | None,
        progress: bool,
        desc: str,
    ) -> list[Any]:
        total = sum(len({t.qid for c in job.conversations for t in c.turns} - done) for job in jobs)
        items: list[Any] = []
        with tqdm(total=total, unit="turn", disable=not progress, desc=desc) as bar:
            for _, answered in self.pool.map(jobs):
                for item in answered:
                    if on_result is None:
                        items.append(item)
                    else:
                        on_result(item)
                bar.update(len(answered))
        return items

    def linker_report(self) -> str | None:
        """The linkers' end-of-run lines, one per actor that has one (after :meth:`run`)."""
        return "\n".join(self.linker_reports) or None

    def close(self) -> None:
        self.pool.shutdown()
