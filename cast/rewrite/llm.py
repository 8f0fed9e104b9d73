"""Conversational query rewriting with a chat model behind an OpenAI-compatible server (:mod:`cast.llm`).

The model reads a prompt template (``configs/prompts/rewrite.txt`` by default: an instruction and few-shot
examples from CAsT 2019-2021 manual rewrites and CANARD) filled with the conversation so far: the earlier
utterances and, for the latest ``response_turns`` turns, their responses (the topics' canonical ones or the
pipeline's own answers, as ``history_responses`` says), cut to ``response_words`` words; and, for iKAT, the
user's PTKB statements the ``ptkb`` stage gives the rewriter (``ptkb.rewrite: context``; ``ptkb.name: all`` gives
every statement). Its answer's first line, without a label such as ``Rewrite:`` or quotes, is the query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from cast.llm import ChatModelStage
from cast.prompts import PromptTemplate
from cast.records import PastTurn, Rewrite, Turn
from cast.rewrite.baselines import require_text
from cast.rewrite.ptkb import STATEMENTS_TURN_ID
from cast.settings import Range
from cast.stages import Rewriter

if TYPE_CHECKING:
    from cast.resources import Resources

PLACEHOLDERS = frozenset({"conversation", "question"})
OPTIONAL_PLACEHOLDERS = frozenset({"statements"})
NO_HISTORY = "(this is the first question)"
# Labels chat models put before an answer, although asked for the question only.
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:rewritten (?:question|query)|rewrite|question|query|answer)\s*:\s*(?:\*\*)?\s*", re.I
)
_QUOTES = "\"'“”‘’`"


def clean_rewrite(reply: str) -> str:
    """The query in a model's reply: its first non-empty line, without a leading label or enclosing quotes.

    Example:
        >>> clean_rewrite('Rewritten question: "What is the largest shark?"\\nIt resolves "it".')
        'What is the largest shark?'
    """
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    line = _LABEL.sub("", line).strip()
    if len(line) > 1 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    return line


def cut_words(text: str, limit: int) -> str:
    """The first ``limit`` words of ``text`` ("…" marks a cut)."""
    words = text.split()
    return " ".join(words) if len(words) <= limit else " ".join(words[:limit]) + " …"


class LLMRewriter(ChatModelStage, Rewriter):
    """Rewrites each utterance with a chat model given the conversation so far (see the module docstring).

    Args:
        prompt: the prompt template: a name under ``configs/prompts/`` or a file (recorded with its sha256).
        response_words: earlier responses are cut to this many words (0: none is shown).
        response_turns: the responses of this many latest earlier turns are shown.
        max_tokens: the longest rewrite, in tokens.
    """

    name = "llm"

    def __init__(
        self,
        prompt: str = "rewrite",
        response_words: int = 60,
        response_turns: int = 3,
        max_tokens: Annotated[int, Range(1)] = 64,
        resources: Resources | None = None,
        **settings: Any,
    ):
        self.template = PromptTemplate.load(prompt, PLACEHOLDERS, OPTIONAL_PLACEHOLDERS)
        super().__init__(resources=resources, **settings)
        self.response_words = response_words
        self.response_turns = response_turns
        self.max_tokens = max_tokens

    def described_extras(self) -> dict[str, Any]:
        return {"prompt_sha256": self.template.sha256}

    def messages(self, history: Sequence[PastTurn], turn: Turn) -> list[dict[str, str]]:
        """The chat messages for ``turn`` after ``history``."""
        statements = [p.turn.utterance for p in history if p.turn.turn_id == STATEMENTS_TURN_ID]
        conversation = [p for p in history if p.turn.turn_id != STATEMENTS_TURN_ID]
        shown_from = len(conversation) - self.response_turns
        lines = []
        for number, past in enumerate(conversation):
            lines.append(f"USER: {past.turn.utterance.strip()}")
            if past.turn.response and self.response_words and number >= shown_from:
                lines.append(f"SYSTEM: {cut_words(past.turn.response, self.response_words)}")
        about = f"About the user: {' '.join(statements)}\n\n" if statements else ""
        return self.template.render(
            conversation="\n".join(lines) or NO_HISTORY,
            question=require_text(turn.utterance, turn, "utterance"),
            statements=about,
        )

    def rewrite(self, history: Sequence[PastTurn], turn: Turn) -> Rewrite:
        return self.rewrite_batch([(history, turn)])[0]

    def rewrite_batch(self, items: Sequence[tuple[Sequence[PastTurn], Turn]]) -> list[Rewrite]:
        prompts = [self.messages(history, turn) for history, turn in items]
        replies = self.ask(prompts, self.max_tokens)
        rewrites = []
        for (_, turn), reply in zip(items, replies, strict=True):
            query = clean_rewrite(reply.text)
            inputs: dict[str, Any] = {"usage": reply.usage()}
            if not query:  # a model that says nothing must not leave the turn without a query
                query = require_text(turn.utterance, turn, "utterance")
                inputs["fallback"] = "the model gave no rewrite: the utterance is the query"
            rewrites.append(Rewrite(query=query, method=self.name, inputs=inputs))
        return rewrites
