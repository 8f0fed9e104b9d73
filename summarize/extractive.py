"""The extractive baseline of the paper ("Top-k O trim"): the chosen passages' text, trimmed to a word budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from cast.core.records import Answer, AnswerSentence, Selection
from cast.core.stages import Summarizer
from cast.summarize import no_answer


class TopKTrimSummarizer(Summarizer):
    """Concatenates the selected passages in order and keeps the first ``words`` words."""

    name = "topk_trim"

    class Settings(Summarizer.Settings):
        words: Annotated[int, Field(ge=1, description="the word budget of the answer.")] = 50

    setting_values: Settings

    def summarize(self, query: str, selection: Selection, earlier: Sequence[str] = ()) -> Answer:
        source_ids = tuple(p.id for p in selection.passages)
        pieces: list[AnswerSentence] = []
        budget = self.setting_values.words
        for scored in selection.passages:
            if budget <= 0:
                break
            words = scored.passage.text.split()[:budget]
            if words:
                pieces.append(AnswerSentence(text=" ".join(words), passage_id=scored.id))
                budget -= len(words)
        if not pieces:
            return no_answer(self, source_ids)
        return Answer(
            text=" ".join(p.text for p in pieces),
            source_ids=source_ids,
            generator=self.name,
            sentences=tuple(pieces),
            settings=self.describe(),
        )
