"""Answers written by a chat model behind an OpenAI-compatible server (:mod:`cast.infra.llm`), with citations.

The model reads a prompt template (``configs/prompts/answer.txt`` by default) filled with the selected passages,
numbered ``[1]``, ``[2]``... and cut to ``passage_words`` words each, the question and the length bound. It is
asked to end each sentence with the number of its passage. What real models write around an answer is taken off
first (:func:`clean_answer`: a lead-in such as "Sure! Here is the answer:", markdown list marks and emphasis, a
sentence cut off by ``max_tokens``); the answer is then split into sentences
(:func:`cast.infra.text.split_sentences`) and each sentence is attributed to the first passage it cites, the citation
marks taken out of the text, as the extractive generators' answers are. A sentence that cites no passage (small
models often cite none, or a number past the passages) is left for the verifier, which attributes it to the
passage that supports it best. The answer is cut to ``words`` words
(whole sentences while they fit). An answer that says the passages hold none (the template's abstention
sentence) is recorded as no answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field

from cast.core.records import Answer, AnswerSentence, Selection
from cast.core.stages import Summarizer
from cast.infra.chat_stage import ChatModelStage
from cast.infra.prompts import PromptName, PromptTemplate
from cast.infra.resources import Resources
from cast.infra.text import count_words, passage_text, split_sentences
from cast.summarize import no_answer
from cast.summarize.verify import ABSTENTION_TEXT

PLACEHOLDERS = frozenset({"passages", "question"})
OPTIONAL_PLACEHOLDERS = frozenset({"words"})
# "[1]", "[1, 3]", "[1][2]": a sentence's citations of numbered passages.
CITATION = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_LEADING_CITATIONS = re.compile(r"^(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])+\s*")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:!?])")
# A lead-in that introduces the answer: "Sure! Here is the answer:", "The passage is:", "Answer:". At most eight
# words before a colon at the start of a line, with no citation or figure in them.
_LEAD_IN = re.compile(r"^[ \t]*(?:[^\s:\[\]\d]+[ \t]+){0,7}[^\s:\[\]\d]+:[ \t]*(?=\S|$)", re.MULTILINE)
_COURTESY = re.compile(r"^\s*(?:sure|certainly|of course|okay|ok|great|absolutely)\b[^.!?\n]*[.!?]\s*", re.I)
_LIST_MARK = re.compile(r"^[ \t]*(?:[-*•+]|\d+[.)]|#+)[ \t]+", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
_SENTENCE_END = re.compile(r"(?:[.!?…\]\)\"'”’]|\[\d+(?:\s*[,;]\s*\d+)*\])\s*$")


def clean_answer(reply: str, cut: bool = False) -> str:
    """A model's answer without what real models write around it: a courtesy opening ("Sure!"), a lead-in up to a
    colon ("Here is the answer:", "The passage is:"), markdown list marks, headings and emphasis (each list item
    becomes a sentence); and, where ``max_tokens`` cut the reply (``cut``), its unfinished last sentence, unless
    it is the only one.

    Example:
        >>> clean_answer("Sure! Here is the answer:\\n- **Polonium** [1]\\n- Radium [2]")
        'Polonium [1]. Radium [2].'
        >>> clean_answer("Curie won in 1903 [1]. She also won in", cut=True)
        'Curie won in 1903 [1].'
    """
    text = _COURTESY.sub("", reply)
    text = _EMPHASIS.sub("", _LIST_MARK.sub("", text))
    lines = [_LEAD_IN.sub("", line, count=1).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if len(lines) > 1:  # list items and short lines: each a sentence of its own
        lines = [line if _SENTENCE_END.search(line) else line + "." for line in lines[:-1]] + lines[-1:]
        lines = [re.sub(r"(\[\d+(?:\s*[,;]\s*\d+)*\])$", r"\1.", line) for line in lines]
    text = " ".join(lines)
    if cut:
        spans = split_sentences(text)
        if len(spans) > 1 and not _SENTENCE_END.search(spans[-1].text):
            text = text[: spans[-1].start].rstrip()
    return text


def cited_numbers(text: str) -> list[int]:
    """The passage numbers ``text`` cites, in order (``"It is [2, 1]."`` -> ``[2, 1]``)."""
    return [int(n) for found in CITATION.finditer(text) for n in re.split(r"\s*[,;]\s*", found[1])]


def without_citations(text: str) -> str:
    """``text`` without its citation marks (``"It is tall [1]."`` -> ``"It is tall."``)."""
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", CITATION.sub("", text)).strip()


def attributed_sentences(text: str, passage_ids: Sequence[str]) -> list[AnswerSentence]:
    """The sentences of a cited answer, each attributed to the first passage it cites (``[n]`` is
    ``passage_ids[n - 1]``; a sentence citing none, or only numbers that name no passage, to ``None``).

    Citations that open a sentence close the one before it (``"... tall. [1] It ..."``).
    """
    found: list[tuple[str, list[int]]] = []
    for span in split_sentences(text):
        piece = span.text
        leading = _LEADING_CITATIONS.match(piece)
        if leading and found:
            found[-1][1].extend(cited_numbers(leading[0]))
            piece = piece[leading.end() :]
        cleaned = without_citations(piece)
        if cleaned:
            found.append((cleaned, cited_numbers(piece)))
        elif found:
            found[-1][1].extend(cited_numbers(piece))
    sentences = []
    for sentence, numbers in found:
        valid = [n for n in numbers if 1 <= n <= len(passage_ids)]
        sentences.append(AnswerSentence(sentence, passage_ids[valid[0] - 1] if valid else None))
    return sentences


def within_words(sentences: Sequence[AnswerSentence], words: int) -> tuple[list[AnswerSentence], bool]:
    """The whole sentences that fit in ``words`` words (the first one cut, marked "…", where even it does not),
    and whether anything was cut."""
    kept: list[AnswerSentence] = []
    budget = words
    for sentence in sentences:
        length = count_words(sentence.text)
        if length <= budget:
            kept.append(sentence)
            budget -= length
            continue
        if not kept:
            kept.append(AnswerSentence(" ".join(sentence.text.split()[:words]) + "…", sentence.passage_id))
        return kept, True
    return kept, False


def says_no_answer(text: str) -> bool:
    """The reply is the template's abstention sentence (the passages do not answer)."""
    return " ".join(text.lower().split()).startswith(ABSTENTION_TEXT.lower().rstrip("."))


class LLMSummarizer(ChatModelStage, Summarizer):
    """Answers with a chat model from the selected passages, each sentence attributed to the passage it cites.

    See the module docstring."""

    name = "llm"

    class Settings(ChatModelStage.Settings):
        prompt: PromptName = "answer"
        words: Annotated[
            int,
            Field(
                ge=1,
                description="the answer's length bound in words (asked of the model and enforced on its answer).",
            ),
        ] = 50
        passage_words: Annotated[
            int, Field(ge=1, description="each passage is cut to this many words in the prompt.")
        ] = 200
        with_title: Annotated[bool, Field(description="put each passage's title before its text.")] = True
        max_tokens: Annotated[
            int | None,
            Field(
                ge=1,
                description="the longest answer the model may write, in tokens (``null``: 3 per word of ``words``, +32).",
            ),
        ] = None

    setting_values: Settings

    def __init__(self, *, resources: Resources | None = None):
        settings = self.setting_values
        self.template = PromptTemplate.load(settings.prompt, PLACEHOLDERS, OPTIONAL_PLACEHOLDERS)
        super().__init__(resources=resources)
        self.max_tokens = settings.max_tokens or 3 * settings.words + 32

    @property
    def generator(self) -> str:
        """The name answers record: the stage and its model."""
        return f"{self.name}:{self.setting_values.model}"

    def described_extras(self) -> dict[str, Any]:
        return {"prompt_sha256": self.template.sha256, "max_tokens": self.max_tokens}

    def messages(self, question: str, selection: Selection) -> list[dict[str, str]]:
        """The chat messages for ``question`` over the selected passages."""
        numbered = []
        for number, scored in enumerate(selection.passages, start=1):
            words = passage_text(scored.passage, self.setting_values.with_title).split()
            cut = " ".join(words[: self.setting_values.passage_words]) + (
                " …" if len(words) > self.setting_values.passage_words else ""
            )
            numbered.append(f"[{number}] {cut}")
        return self.template.render(
            passages="\n".join(numbered), question=question, words=str(self.setting_values.words)
        )

    def summarize(self, query: str, selection: Selection, earlier: Sequence[str] = ()) -> Answer:
        return self.summarize_batch([(query, selection)])[0]

    def summarize_batch(
        self, items: Sequence[tuple[str, Selection]], earlier: Sequence[Sequence[str]] | None = None
    ) -> list[Answer]:  # the conversation's earlier answers are not in the model's input
        answerable = [i for i, (_, s) in enumerate(items) if any(p.passage.text.strip() for p in s.passages)]
        replies = self.ask([self.messages(*items[i]) for i in answerable], self.max_tokens)
        by_item = dict(zip(answerable, replies, strict=True))
        answers = []
        for i, (_, selection) in enumerate(items):
            source_ids = tuple(p.id for p in selection.passages)
            reply = by_item.get(i)
            if reply is None:
                answers.append(no_answer(self, source_ids, generator=self.generator))
                continue
            settings = {**self.describe(), "usage": reply.usage()}
            text = clean_answer(reply.text, cut=reply.finish_reason == "length")
            sentences, cut = within_words(attributed_sentences(text, source_ids), self.setting_values.words)
            if says_no_answer(text) or not sentences:
                reason = (
                    "the model found no answer in the passages"
                    if sentences
                    else "the model generated no text"
                )
                answers.append(
                    replace(no_answer(self, source_ids, reason, generator=self.generator), settings=settings)
                )
                continue
            answers.append(
                Answer(
                    text=" ".join(s.text for s in sentences),
                    source_ids=source_ids,
                    generator=self.generator,
                    sentences=tuple(sentences),
                    settings={**settings, "cut": cut} if cut else settings,
                )
            )
        return answers
