"""Conversations as they are answered: their history, the rule for what later turns see as a turn's response,
and resumption. The one conversation driver: ``cast run`` (through :meth:`Pipeline.run`, also on Ray workers),
``cast answer``, ``cast demo``, ``cast sweep``, the explorer and the benchmarks all walk conversations here.

- :class:`Session`: one conversation answered turn by turn (a typed conversation, the explorer's page).
- :func:`answer_conversations`: many conversations in lock-step: the i-th turns of all conversations form one
  batch, so that neural stages batch over independent conversations and Lucene searches them with its own
  threads. A turn whose qid was already answered (CAsT 2022 paths share their prefixes) is answered once; turns
  answered by an interrupted run serve as history only.
- :func:`prepare`: the same walk through the early stages only (see :mod:`cast.prepared`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from cast.errors import ConfigError
from cast.records import Conversation, PastTurn, Turn

if TYPE_CHECKING:
    from cast.pipeline import Pipeline, PreparedTurn, TurnResult
    from cast.prepared import Prepared

Item = TypeVar("Item")


class Session:
    """The history of one conversation under a response rule.

    Args:
        pipeline: answers the turns.
        conversation: the conversation (its PTKB, if any, is used at every turn).
        answers_as_responses: later turns see the pipeline's answers as the responses; ``None``: the pipeline's
            ``history_responses`` decides. A conversation typed by a user has no topics' responses: what the user
            read is the response, so ``cast answer`` and the explorer's typed conversations pass ``True``.
    """

    def __init__(
        self, pipeline: Pipeline, conversation: Conversation, *, answers_as_responses: bool | None = None
    ):
        self.pipeline = pipeline
        self.conversation = conversation
        self.answers_as_responses = (
            pipeline.answers_as_responses if answers_as_responses is None else answers_as_responses
        )
        self.history: list[PastTurn] = []

    def answer(self, turn: Turn) -> TurnResult:
        """Answer ``turn`` given the history so far, and add it to the history."""
        result = self.pipeline.answer_turn(list(self.history), turn, self.conversation.ptkb)
        self.add(result)
        return result

    def add(self, result: TurnResult) -> None:
        """Add a turn answered elsewhere (e.g. a batch of conversations, or a cache) to the history."""
        self.history.append(result.past_turn(self.answers_as_responses))

    @classmethod
    def typed(cls, pipeline: Pipeline, topic_id: str = "user") -> Session:
        """A conversation a user types turn by turn (:meth:`ask`): later turns see its answers as responses."""
        return cls(pipeline, Conversation(topic_id, ()), answers_as_responses=True)

    def ask(self, utterance: str) -> TurnResult:
        """Answer ``utterance`` as the conversation's next turn (qid ``<topic>_<number>``)."""
        topic, number = self.conversation.topic_id, len(self.conversation.turns) + 1
        turn = Turn(qid=f"{topic}_{number}", topic_id=topic, turn_id=str(number), utterance=utterance)
        self.conversation = replace(self.conversation, turns=(*self.conversation.turns, turn))
        return self.answer(turn)


def answer_conversations(
    pipeline: Pipeline,
    conversations: Iterable[Conversation],
    *,
    done: Mapping[str, dict[str, Any]] | None = None,
    on_result: Callable[[TurnResult], None] | None = None,
    progress: bool = False,
    prepared: Prepared | None = None,
) -> list[TurnResult]:
    """Answer every turn of ``conversations`` not in ``done``, in lock-step.

    Args:
        done: answers-file records of turns already answered (by qid), e.g. from an interrupted run: they are not
            answered again, only used as history.
        on_result: called with each new result as soon as its batch is done (to write it out).
        progress: show a progress bar over turns.
        prepared: every turn taken as far as re-ranking (or linking) by this pipeline's early stages: only the
            later stages run.

    Raises:
        ConfigError: ``prepared`` was made by other early stages, or lacks some turn.
    """
    from cast.pipeline import past_turn_from_record

    conversations = list(conversations)
    rule = pipeline.answers_as_responses
    turns = {t.qid: t for c in conversations for t in c.turns}
    first_turns = {t.qid: t for c in reversed(conversations) for t in reversed(c.turns)}.values()  # as taken
    history = {
        qid: past_turn_from_record(turns[qid], record, rule)
        for qid, record in (done or {}).items()
        if qid in turns
    }
    if prepared is None:
        pipeline.rewriter.check_topics(conversations)

        def answer(steps: list[Step]) -> list[TurnResult]:
            return pipeline.answer_batch(
                [(s.history, s.turn) for s in steps], [s.conversation.ptkb for s in steps]
            )

    else:
        prepared.check(pipeline)
        prepared.check_turns(first_turns)
        missing = prepared.missing(qid for qid in turns if qid not in history)
        if missing:
            raise ConfigError(
                f"{len(missing)} turn(s) were not prepared (e.g. {missing[0]}): prepare the same topics"
            )

        def answer(steps: list[Step]) -> list[TurnResult]:
            return pipeline.finish_batch([(s.history, prepared.turns[s.turn.qid]) for s in steps])

    return lockstep(
        conversations,
        answer,
        lambda _, result: result.past_turn(rule),
        done=history,
        on_result=on_result,
        progress=progress,
    )


def prepare(
    pipeline: Pipeline,
    conversations: Iterable[Conversation],
    *,
    stop_after: str = "rerank",
    progress: bool = False,
) -> Prepared:
    """Every turn of ``conversations`` taken as far as ``stop_after`` (``rerank`` or ``link``), in lock-step.

    Raises:
        ConfigError: the pipeline's later turns would see its own answers (``history_responses: answers``): their
            rewrites depend on the later stages, so no pass can stop early.
    """
    from cast.pipeline import check_stop_point
    from cast.prepared import Prepared, early_description

    check_stop_point(stop_after)
    if pipeline.answers_as_responses:
        raise ConfigError(
            "turns cannot be prepared under history_responses: answers (a later turn's rewrite reads the earlier "
            "answers, made by the stages a prepared pass leaves out): use history_responses: topics"
        )
    conversations = list(conversations)
    pipeline.rewriter.check_topics(conversations)
    description = early_description(pipeline, stop_after)

    def prepare_batch(steps: list[Step]) -> list[PreparedTurn]:
        return pipeline.prepare_batch(
            [(s.history, s.turn) for s in steps], [s.conversation.ptkb for s in steps], stop_after=stop_after
        )

    turns = lockstep(
        conversations,
        prepare_batch,
        lambda _, prepared: prepared.past_turn(),
        progress=progress,
        desc="preparing turns",
    )
    return Prepared(stop_after, description, {t.qid: t for t in turns})


@dataclass(frozen=True)
class Step:
    """A turn to take in a lock-step walk, with its conversation and the history before it."""

    conversation: Conversation
    turn: Turn
    history: tuple[PastTurn, ...]


def lockstep(
    conversations: Iterable[Conversation],
    answer: Callable[[list[Step]], Sequence[Item]],
    past_turn: Callable[[Turn, Item], PastTurn],
    *,
    done: Mapping[str, PastTurn] | None = None,
    on_result: Callable[[Item], None] | None = None,
    progress: bool = False,
    desc: str = "turns",
) -> list[Item]:
    """Walk ``conversations`` turn by turn: the i-th turns not yet taken form one batch for ``answer``, a turn
    shared by several conversations is taken once, and each conversation's history grows by ``past_turn`` of its
    turn and item (or by ``done[qid]``, for a turn taken before). Returns the items, in the order taken."""
    from tqdm import tqdm

    conversations = list(conversations)
    histories: list[list[PastTurn]] = [[] for _ in conversations]
    taken: dict[str, PastTurn] = dict(done or {})
    items: list[Item] = []
    total = len({t.qid for c in conversations for t in c.turns} - set(taken))
    with tqdm(total=total, unit="turn", disable=not progress, desc=desc) as bar:
        for position in range(max((len(c.turns) for c in conversations), default=0)):
            batch: dict[str, Step] = {}
            for conversation, history in zip(conversations, histories, strict=True):
                if position < len(conversation.turns) and conversation.turns[position].qid not in taken:
                    turn = conversation.turns[position]
                    batch.setdefault(turn.qid, Step(conversation, turn, tuple(history)))
            new = answer(list(batch.values())) if batch else []
            for step, item in zip(batch.values(), new, strict=True):
                taken[step.turn.qid] = past_turn(step.turn, item)
                items.append(item)
                if on_result is not None:
                    on_result(item)
            bar.update(len(new))
            for conversation, history in zip(conversations, histories, strict=True):
                if position < len(conversation.turns):
                    history.append(taken[conversation.turns[position].qid])
    return items
