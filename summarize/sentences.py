"""Sentence splitting and word counting for answers: light regular expressions, no model to load."""

from __future__ import annotations

import re
from typing import NamedTuple

# A sentence ends at . ! or ? (and any closing quotes/brackets) followed by white space and an upper-case
# letter, a digit or an opening quote/bracket.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]’”]*\s+(?=[\"'(\[‘“]?[A-Z0-9])")
# Tokens before a full stop that do not end a sentence: titles, common abbreviations, single initials.
_ABBREVIATION = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|vs|etc|e\.g|i\.e|approx|No|Vol|Fig|Gen|Col|Lt|Sgt|Inc|Ltd|Co|Corp|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)|\b[A-Z]|\b(?:[A-Za-z]\.)+[A-Za-z])\.$"
)


class SentenceSpan(NamedTuple):
    """A sentence of a text and its character offsets in that text (``text[start:end] == sentence``)."""

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[SentenceSpan]:
    """Split ``text`` into sentences, keeping their character offsets.

    Example:
        >>> [s.text for s in split_sentences("Dr. Who is old. He travels! Does he? Yes.")]
        ['Dr. Who is old.', 'He travels!', 'Does he?', 'Yes.']
    """
    spans: list[SentenceSpan] = []
    start = 0
    for boundary in _BOUNDARY.finditer(text):
        if _ABBREVIATION.search(text, max(0, boundary.start() - 16), boundary.start()):
            continue
        _append_span(spans, text, start, boundary.start() + len(boundary.group().rstrip()))
        start = boundary.end()
    _append_span(spans, text, start, len(text))
    return spans


def _append_span(spans: list[SentenceSpan], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        offset = start + piece.index(stripped)
        spans.append(SentenceSpan(stripped, offset, offset + len(stripped)))


def count_words(text: str) -> int:
    """Words as the answer budgets count them: white-space separated tokens."""
    return len(text.split())
