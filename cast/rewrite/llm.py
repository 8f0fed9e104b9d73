"""Conversational query rewriting with a chat model behind an OpenAI-compatible server (:mod:`cast.infra.llm`).

The model reads a prompt template (``configs/prompts/rewrite.txt`` by default: an instruction and few-shot
examples from CAsT 2019-2021 manual rewrites and CANARD) filled with the conversation so far: the earlier
utterances and, for the latest ``response_turns`` turns, their responses (the topics' canonical ones or the
pipeline's own answers, as ``history_responses`` says), cut to ``response_words`` words; and, for iKAT, the
user's PTKB statements the ``ptkb`` stage gives the rewriter (``ptkb.rewrite: context``; ``ptkb.name: all`` gives
every statement). Its answer's first line, without what real models put around a rewrite (a label such as
``Rewrite:`` or "The rewritten question is:", quotes, an explanation after it), is the query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from cast.core.records import PastTurn, Rewrite, Turn
from cast.core.stages import Rewriter
from cast.infra.chat_stage import ChatModelStage
from cast.infra.prompts import PromptName, PromptTemplate
from cast.infra.resources import Resources
from cast.rewrite.baselines import require_text
from cast.rewrite.ptkb import STATEMENTS_TURN_ID

PLACEHOLDERS = frozenset({"conversation", "question"})
OPTIONAL_PLACEHOLDERS = frozenset({"statements"})
NO_HISTORY = "(this is the first question)"
# Labels chat models put before an answer, although asked for the question only: "Rewrite:", "**Question:**",
# "The rewritten question is:", "Here is the rewritten query:".
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:[\w' ]{0,40}\b)?(?:rewritten|rewrite|question|query|answer)(?:\s+is)?\s*:\s*(?:\*\*)?\s*",
    re.I,
)
_QUOTES = "\"'“”‘’`"
# A question quoted inside a sentence about it: 'The rewritten question is "What is X?" because ...'.
_QUOTED_QUESTION = re.compile(r"[\"“]([^\"“”]+\?)[\"”]")
# An explanation after the question on the same line: "What is X? (This replaces 'it'...)", "... ? I replaced ...";
# not a sentence of the user's own ("What about the DASH diet? I heard it is healthy.").
_EXPLANATION = re.compile(
    r"(?<=\?)\s+(?:\(|this\b|here\b|note\b|i (?:replaced|changed|rewrote|resolved|added|kept|used)\b|the rewrite"
    r"|explanation\b|because\b).*$",
    re.I,
)


def clean_rewrite(reply: str) -> str:
    """The query in a model's reply: its first non-empty line (after a line that is only a label), without a
    leading label, enclosing quotes or a trailing explanation.

    Example:
        >>> clean_rewrite('Rewritten question: "What is the largest shark?"\\nIt resolves "it".')
        'What is the largest shark?'
        >>> clean_rewrite('The rewritten question is "Why did Zappa break up the band?" because "they" is the band.')
        'Why did Zappa break up the band?'
    """
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    while len(lines) > 1 and not _LABEL.sub("", lines[0]).strip():
        lines = lines[1:]  # "Here is the rewritten question:" on a line of its own
    line = lines[0] if lines else ""
    quoted = _QUOTED_QUESTION.search(line)
    if quoted and not (line[0] in _QUOTES and quoted.start() == 0 and quoted.end() == len(line)):
        return quoted[1].strip()
    line = _EXPLANATION.sub("", _LABEL.sub("", line)).strip()
    if len(line) > 1 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    return line


def cut_words(text: str, limit: int) -> str:
    """The first ``limit`` words of ``text`` ("…" marks a cut)."""
    words = text.split()
    return " ".join(words) if len(words) <= limit else " ".join(words[:limit]) + " …"


class LLMRewriter(ChatModelStage, Rewriter):
    """Rewrites each utterance with a chat model given the conversation so far (see the module docstring)."""

    name = "llm"

    class Settings(ChatModelStage.Settings):
        prompt: PromptName = "rewrite"
        response_words: Annotated[
            int, Field(description="earlier responses are cut to this many words (0: none is shown).")
        ] = 60
        response_turns: Annotated[
            int, Field(description="the responses of this many latest earlier turns are shown.")
        ] = 3
        max_tokens: Annotated[int, Field(ge=1, description="the longest rewrite, in tokens.")] = 64

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        self.template = PromptTemplate.load(settings.prompt, PLACEHOLDERS, OPTIONAL_PLACEHOLDERS)
        super().__init__(resources=resources)

    def described_extras(self) -> dict[str, Any]:
        return {"prompt_sha256": self.template.sha256}

    def messages(self, history: Sequence[PastTurn], turn: Turn) -> list[dict[str, str]]:
        """The chat messages for ``turn`` after ``history``."""
        statements = [p.turn.utterance for p in history if p.turn.turn_id == STATEMENTS_TURN_ID]
        conversation = [p for p in history if p.turn.turn_id != STATEMENTS_TURN_ID]
        shown_from = len(conversation) - self.setting_values.response_turns
        lines = []
        for number, past in enumerate(conversation):
            lines.append(f"USER: {past.turn.utterance.strip()}")
            if past.turn.response and self.setting_values.response_words and number >= shown_from:
                lines.append(f"SYSTEM: {cut_words(past.turn.response, self.setting_values.response_words)}")
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
        replies = self.ask(prompts, self.setting_values.max_tokens)
        rewrites = []
        for (_, turn), reply in zip(items, replies, strict=True):
            query = clean_rewrite(reply.text)
            inputs: dict[str, Any] = {"usage": reply.usage()}
            if not query:  # a model that says nothing must not leave the turn without a query
                query = require_text(turn.utterance, turn, "utterance")
                inputs["fallback"] = "the model gave no rewrite: the utterance is the query"
            rewrites.append(Rewrite(query=query, method=self.name, inputs=inputs))
        return rewrites
