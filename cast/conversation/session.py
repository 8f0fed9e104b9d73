"""A conversation typed turn by turn (``cast answer``): its history, under the rule for what later turns see as a
turn's response. Conversations known in advance are walked by :mod:`cast.conversation.walker`, under the same
rule (:meth:`cast.core.records.TurnResult.past_turn`)."""

from __future__ import annotations

from dataclasses import replace

from cast.core.pipeline import Pipeline
from cast.core.records import Conversation, PastTurn, Turn, TurnResult


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
