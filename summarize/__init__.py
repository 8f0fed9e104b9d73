"""Answer generation: summarizers that turn the selected passages into one short answer."""

from __future__ import annotations

from cast.core.records import NO_ANSWER_TEXT, Answer
from cast.core.stages import Summarizer


def no_answer(
    summarizer: Summarizer,
    source_ids: tuple[str, ...],
    reason: str | None = None,
    *,
    generator: str | None = None,
) -> Answer:
    """The answer that says none was found, with why (by default: no passages, or no text in them).

    Args:
        generator: the generator named in the answer (default: the summarizer's registry name).
    """
    if reason is None:
        reason = "no passages were selected" if not source_ids else "the selected passages have no text"
    return Answer(
        NO_ANSWER_TEXT,
        source_ids,
        generator or summarizer.name,
        settings=summarizer.describe(),
        no_answer_reason=reason,
    )
