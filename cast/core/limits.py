"""Bounds on every per-turn input, so that one hostile or mistaken turn cannot take minutes and write megabytes.

A 1 MB utterance took 97 s and wrote a 24 MB answers record. Each bound is far above what real conversations
need (CAsT's longest utterance has about 300 characters, its longest canonical response about 3,000, its longest
conversation 13 turns), and a turn on which one is applied says so in its answers record (``input_limits``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cast.core.records import PastTurn, ScoredPassage, Turn

# Characters of an utterance, and of each of its rewrites.
MAX_UTTERANCE_CHARS = 2_000
# Characters of an earlier turn's response (the topics' canonical one, or the pipeline's own answer).
MAX_RESPONSE_CHARS = 5_000
# Earlier turns a turn sees (rewriters, the selectors' history entities): the most recent ones.
MAX_HISTORY_TURNS = 50
# Characters of a passage's text given to the entity linker and to the generator.
MAX_PASSAGE_CHARS = 20_000

_TURN_TEXTS = {
    "utterance": MAX_UTTERANCE_CHARS,
    "manual_rewrite": MAX_UTTERANCE_CHARS,
    "automatic_rewrite": MAX_UTTERANCE_CHARS,
    "response": MAX_RESPONSE_CHARS,
}


def bounded_text(text: str, limit: int) -> str:
    return text[:limit]


def bounded_turn(turn: Turn, applied: dict[str, int] | None = None) -> Turn:
    """``turn`` with each text cut to its limit; ``applied`` gets ``{field: original length}`` of what was cut."""
    cut: dict[str, Any] = {}
    for name, limit in _TURN_TEXTS.items():
        text = getattr(turn, name)
        if text is not None and len(text) > limit:
            cut[name] = bounded_text(text, limit)
            if applied is not None:
                applied[name] = len(text)
    return replace(turn, **cut) if cut else turn


def bounded_history(history: list[PastTurn], applied: dict[str, int]) -> list[PastTurn]:
    """The last :data:`MAX_HISTORY_TURNS` earlier turns, each turn's texts within their limits (``applied`` gets
    the number of earlier turns, and of those whose texts were cut)."""
    if len(history) > MAX_HISTORY_TURNS:
        applied["history_turns"] = len(history)
        history = history[-MAX_HISTORY_TURNS:]
    bounded, cut = [], 0
    for past in history:
        turn = bounded_turn(past.turn)
        if turn is not past.turn:
            cut += 1
            past = replace(past, turn=turn)
        bounded.append(past)
    if cut:
        applied["history_texts"] = cut
    return bounded


def bounded_ranking(ranking: list[ScoredPassage], applied: dict[str, int]) -> list[ScoredPassage]:
    """``ranking`` with passage texts over :data:`MAX_PASSAGE_CHARS` cut (``applied`` counts them)."""
    long = [i for i, p in enumerate(ranking) if len(p.passage.text) > MAX_PASSAGE_CHARS]
    if not long:
        return ranking
    applied["passage_texts"] = len(long)
    ranking = list(ranking)
    for i in long:
        passage = ranking[i].passage
        ranking[i] = replace(
            ranking[i], passage=replace(passage, text=bounded_text(passage.text, MAX_PASSAGE_CHARS))
        )
    return ranking
