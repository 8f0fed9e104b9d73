"""The one walk over conversations: each turn taken once, in order, with the history before it.

:func:`walk` takes the i-th turns of all conversations as batches (of at most :data:`MAX_BATCH_TURNS`), so that
neural stages batch over independent conversations and Lucene searches them with its own threads; a turn shared by
several conversations (CAsT 2022 paths share their prefixes) is taken once, by the first conversation that reaches
it; each conversation's history grows by what later turns see of each of its turns (the taken item's
``past_turn()``, or ``done[qid]`` for a turn taken before). What a walk keeps of a turn once it is taken is that
small view (a query, a top passage, entities): a turn's whole result (its ranking, ~1.5 MB at depth 1000) is handed
on and dropped where a caller takes each as it comes (``on_item``), so that a run's memory stays flat however many
turns it answers. ``cast run`` (also on Ray workers), ``cast sweep``, ``cast demo``, the explorer and the
benchmarks walk conversations here, through:

- :func:`answer_conversations`: every turn answered by a pipeline (or finished from prepared turns), resuming
  after the turns of an interrupted run;
- :func:`prepare_conversations`: every turn taken as far as re-ranking or linking (:mod:`cast.conversation.prepared`);
- :func:`rewrite_conversations`: every turn only rewritten (studies of rewriters and PTKB selectors);
- :func:`turn_histories`: every turn with the history its rewrite step gives it (timing studies).

A conversation typed turn by turn is :class:`cast.conversation.session.Session`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tqdm import tqdm

from cast.conversation.prepared import Prepared
from cast.core.pipeline import Pipeline, check_stop_point, rewrite_turns
from cast.core.records import Conversation, PastTurn, PreparedTurn, Turn, TurnResult, past_turn_from_record
from cast.core.stages import PTKBSelector, Rewriter
from cast.errors import ConfigError

Item = TypeVar("Item")
# The most turns taken in one batch: a batch's results are all in memory at once (1,000 conversations' first turns
# at depth 1000 are 1.5 GB), and larger batches buy little (Lucene's threads and a GPU are busy at a few dozen).
MAX_BATCH_TURNS = 64


@dataclass(frozen=True)
class Step:
    """A turn to take, with its conversation and the history before it."""

    conversation: Conversation
    turn: Turn
    history: tuple[PastTurn, ...]


def walk(
    conversations: Iterable[Conversation],
    take: Callable[[list[Step]], Sequence[Item]],
    past_turn: Callable[[Item], PastTurn],
    *,
    done: Mapping[str, PastTurn] | None = None,
    on_item: Callable[[Item], None] | None = None,
    progress: bool = False,
    desc: str = "turns",
) -> list[Item]:
    """Walk ``conversations`` turn by turn: the i-th turns not yet taken form batches for ``take`` (of at most
    :data:`MAX_BATCH_TURNS`), a turn shared by several conversations is taken once, and each conversation's history
    grows by ``past_turn`` of each turn's item (or by ``done[qid]``, for a turn taken before). Returns the items, in
    the order taken; with ``on_item``, each is handed to it as soon as its batch is taken and not kept (none are
    returned)."""
    conversations = list(conversations)
    histories: list[list[PastTurn]] = [[] for _ in conversations]
    taken: dict[str, PastTurn] = dict(done or {})
    items: list[Item] = []
    total = len({t.qid for c in conversations for t in c.turns} - set(taken))

    def take_batch(steps: list[Step]) -> int:
        # A function of its own: nothing of the batch is held once it returns (a run hands on ~1.5 MB a turn).
        new = take(steps)
        for step, item in zip(steps, new, strict=True):
            taken[step.turn.qid] = past_turn(item)
            if on_item is None:
                items.append(item)
            else:
                on_item(item)
        return len(new)

    with tqdm(total=total, unit="turn", disable=not progress, desc=desc) as bar:
        for position in range(max((len(c.turns) for c in conversations), default=0)):
            batch: dict[str, Step] = {}
            for conversation, history in zip(conversations, histories, strict=True):
                if position < len(conversation.turns) and conversation.turns[position].qid not in taken:
                    turn = conversation.turns[position]
                    batch.setdefault(turn.qid, Step(conversation, turn, tuple(history)))
            steps = list(batch.values())
            for start in range(0, len(steps), MAX_BATCH_TURNS):
                bar.update(take_batch(steps[start : start + MAX_BATCH_TURNS]))
            for conversation, history in zip(conversations, histories, strict=True):
                if position < len(conversation.turns):
                    history.append(taken[conversation.turns[position].qid])
    return items


def answer_conversations(
    pipeline: Pipeline,
    conversations: Iterable[Conversation],
    *,
    done: Mapping[str, dict[str, Any]] | None = None,
    on_result: Callable[[TurnResult], None] | None = None,
    progress: bool = False,
    prepared: Prepared | None = None,
) -> list[TurnResult]:
    """Answer every turn of ``conversations`` not in ``done``: the results, in the order answered (none where
    ``on_result`` takes each: a run does not keep them).

    Args:
        done: answers-file records of turns already answered (by qid), e.g. from an interrupted run: they are not
            answered again, only used as history.
        on_result: called with each new result as soon as its batch is done (to write it out); the result is not
            kept.
        progress: show a progress bar over turns.
        prepared: every turn taken as far as re-ranking (or linking) by this pipeline's early stages: only the
            later stages run.

    Raises:
        ConfigError: ``prepared`` was made by other early stages, or lacks some turn.
    """
    conversations = list(conversations)
    rule = pipeline.answers_as_responses
    turns = {t.qid: t for c in conversations for t in c.turns}
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
        # Each qid's turn as a walk takes it: from the first conversation that reaches it.
        prepared.check_turns({t.qid: t for c in reversed(conversations) for t in reversed(c.turns)}.values())
        missing = prepared.missing(qid for qid in turns if qid not in history)
        if missing:
            raise ConfigError(
                f"{len(missing)} turn(s) were not prepared (e.g. {missing[0]}): prepare the same topics"
            )

        def answer(steps: list[Step]) -> list[TurnResult]:
            return pipeline.finish_batch([(s.history, prepared.turns[s.turn.qid]) for s in steps])

    return walk(
        conversations,
        answer,
        lambda result: result.past_turn(rule),
        done=history,
        on_item=on_result,
        progress=progress,
    )


def prepare_conversations(
    pipeline: Pipeline,
    conversations: Iterable[Conversation],
    *,
    stop_after: str = "rerank",
    progress: bool = False,
) -> Prepared:
    """Every turn of ``conversations`` taken as far as ``stop_after`` (``rerank`` or ``link``).

    Raises:
        ConfigError: the pipeline's later turns would see its own answers (``history_responses: answers``): their
            rewrites depend on the later stages, so no pass can stop early.
    """
    check_stop_point(stop_after)
    if pipeline.answers_as_responses:
        raise ConfigError(
            "turns cannot be prepared under history_responses: answers (a later turn's rewrite reads the earlier "
            "answers, made by the stages a prepared pass leaves out): use history_responses: topics"
        )
    conversations = list(conversations)
    pipeline.rewriter.check_topics(conversations)

    def prepare(steps: list[Step]) -> list[PreparedTurn]:
        return pipeline.prepare_batch(
            [(s.history, s.turn) for s in steps], [s.conversation.ptkb for s in steps], stop_after=stop_after
        )

    turns = walk(conversations, prepare, PreparedTurn.past_turn, progress=progress, desc="preparing turns")
    return Prepared(stop_after, pipeline.early_description(stop_after), {t.qid: t for t in turns})


def rewrite_conversations(
    rewriter: Rewriter,
    conversations: Iterable[Conversation],
    *,
    ptkb: PTKBSelector | None = None,
    progress: bool = False,
) -> list[PreparedTurn]:
    """Every turn of ``conversations`` rewritten as the pipeline rewrites it (its PTKB statements chosen by
    ``ptkb``, if given), later turns seeing the earlier rewrites; no retrieval, so no earlier top passages."""
    conversations = list(conversations)
    rewriter.check_topics(conversations)

    def rewrite(steps: list[Step]) -> list[PreparedTurn]:
        return rewrite_turns(
            rewriter, ptkb, [(s.history, s.turn) for s in steps], [s.conversation.ptkb for s in steps]
        )

    return walk(conversations, rewrite, PreparedTurn.past_turn, progress=progress, desc="rewriting turns")


def turn_histories(
    rewriter: Rewriter, conversations: Iterable[Conversation]
) -> list[tuple[tuple[PastTurn, ...], Turn]]:
    """Each turn once, in the conversations' order, with the history the pipeline's rewrite step gives it (the
    earlier turns rewritten by ``rewriter``; no passages): what timing studies of single stages run on."""
    conversations = list(conversations)
    seen: dict[str, tuple[tuple[PastTurn, ...], Turn]] = {}

    def rewrite(steps: list[Step]) -> list[PreparedTurn]:
        seen.update({s.turn.qid: (s.history, s.turn) for s in steps})
        return rewrite_turns(rewriter, None, [(s.history, s.turn) for s in steps])

    walk(conversations, rewrite, PreparedTurn.past_turn)
    return [seen[qid] for qid in dict.fromkeys(t.qid for c in conversations for t in c.turns)]
