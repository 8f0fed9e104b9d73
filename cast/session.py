"""One conversation as it is answered: its history and the rule for what later turns see as a turn's response.

The one place that turns answered turns into history, so ``cast demo``, the explorer and :meth:`Pipeline.run`
rewrite a typed conversation the same way under ``history_responses``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cast.pipeline import Pipeline, TurnResult
    from cast.records import Conversation, PastTurn, Turn


class Session:
    """The history of one conversation under ``pipeline``'s response rule (topics' or its own answers)."""

    def __init__(self, pipeline: Pipeline, conversation: Conversation):
        self.pipeline = pipeline
        self.conversation = conversation
        self.history: list[PastTurn] = []

    def answer(self, turn: Turn) -> TurnResult:
        """Answer ``turn`` given the history so far, and add it to the history."""
        result = self.pipeline.answer_turn(list(self.history), turn, self.conversation.ptkb)
        self.add(result)
        return result

    def add(self, result: TurnResult) -> None:
        """Add a turn answered elsewhere (e.g. a batch of conversations, or a cache) to the history."""
        self.history.append(result.past_turn(self.pipeline.answers_as_responses))

    def add_record(self, turn: Turn, record: dict[str, Any]) -> None:
        """Add a turn answered by an earlier (interrupted) run, from its answers-file record."""
        from cast.pipeline import past_turn_from_record

        self.history.append(past_turn_from_record(turn, record, self.pipeline.answers_as_responses))
