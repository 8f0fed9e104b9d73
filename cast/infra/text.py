"""Text as the toolkit reads it: the one sentence splitter, the one word pattern, entity labels and the text a
passage encoder reads.

Every stage that cuts a text into sentences (the density filter ED, the summarizers' attribution, groundedness in
the evaluation) or into words uses these functions, so that they agree on what a sentence and a word are. Light
regular expressions only: no model to load.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple
from urllib.parse import unquote

from cast.core.records import Passage

# A sentence ends at . ! or ? (and any closing quotes/brackets) followed by white space and an upper-case
# letter, a digit or an opening quote/bracket.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]’”]*\s+(?=[\"'(\[‘“]?[A-Z0-9])")
# Tokens before a full stop that do not end a sentence: titles, common abbreviations, single initials.
_ABBREVIATION = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|vs|etc|e\.g|i\.e|approx|No|Vol|Fig|Gen|Col|Lt|Sgt|Inc|Ltd|Co|Corp|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)|\b[A-Z]|\b(?:[A-Za-z]\.)+[A-Za-z])\.$"
)
# A word: letters and digits, with inner apostrophes and hyphens ("don't", "COVID-19").
WORD = re.compile(r"\w+(?:['’-]\w+)*")
WORD_JOINERS = "'’-"


class SentenceSpan(NamedTuple):
    """A sentence of a text and its character offsets in that text (``text[start:end] == sentence``)."""

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[SentenceSpan]:
    """Split ``text`` into sentences, keeping their character offsets; titles and initials end none.

    Example:
        >>> [s.text for s in split_sentences("Dr. Marie Curie won twice. She was born in Warsaw! Was she?")]
        ['Dr. Marie Curie won twice.', 'She was born in Warsaw!', 'Was she?']
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


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (:func:`split_sentences` without the offsets)."""
    return [span.text for span in split_sentences(text)]


def word_tokens(text: str, split_at: str = "") -> list[str]:
    """The words of ``text`` as written (:data:`WORD`), each cut further at the characters ``split_at``.

    ``split_at="-"`` gives the parts a Lucene analyzer sees; ``split_at=WORD_JOINERS`` the plain runs of letters
    and digits (for matching terms: "Curie's" -> "Curie", "s").

    Example:
        >>> word_tokens("Dr. Curie's X-ray work!"), word_tokens("X-ray", split_at="-")
        (['Dr', "Curie's", 'X-ray', 'work'], ['X', 'ray'])
    """
    found = WORD.findall(text)
    if not split_at:
        return found
    joiners = re.compile(f"[{re.escape(split_at)}]")
    return [part for word in found for part in joiners.split(word) if part]


def words(text: str) -> list[str]:
    """Lower-cased words (:data:`WORD`); punctuation dropped."""
    return [w.lower() for w in WORD.findall(text)]


def count_words(text: str) -> int:
    """Words as the answer budgets count them: white-space separated tokens."""
    return len(text.split())


def entity_label(entity: str) -> str:
    """A readable name for an entity id: ``http://dbpedia.org/resource/Caf%C3%A9_M%C3%BCller`` -> ``Café Müller``.

    Example:
        >>> entity_label("http://dbpedia.org/resource/River_Clyde"), entity_label("Glasgow")
        ('River Clyde', 'Glasgow')
    """
    name = entity.rstrip("/").rsplit("/", 1)[-1]
    return unquote(name).replace("_", " ") or entity


def passage_text(passage: Passage, with_title: bool) -> str:
    """The text a re-ranker reads: ``"title. text"`` when asked and the passage has a title, else the text."""
    if with_title and passage.title and not passage.text.startswith(passage.title):
        return f"{passage.title}. {passage.text}"
    return passage.text


# An answer (or a sentence) repeats an earlier one that holds this share of its word pairs.
REPEAT_SHARE = 0.5


def word_pairs(text: str) -> set[tuple[str, str]]:
    """The pairs of consecutive words of ``text`` (:func:`words`)."""
    tokens = words(text)
    return set(zip(tokens, tokens[1:], strict=False))


def repeats(text: str, earlier: Sequence[str]) -> bool:
    """Whether ``text`` shares at least :data:`REPEAT_SHARE` of its word pairs, or of an earlier answer's (the
    shorter of the two), with one of ``earlier``."""
    return repeats_pairs(word_pairs(text), [word_pairs(other) for other in earlier])


def repeats_pairs(pairs: set[tuple[str, str]], earlier: Sequence[set[tuple[str, str]]]) -> bool:
    """:func:`repeats` on word pairs already taken (:func:`word_pairs`), for many texts against the same earlier
    ones."""
    for other_pairs in earlier:
        shorter = min(len(pairs), len(other_pairs))
        if shorter and len(pairs & other_pairs) / shorter >= REPEAT_SHARE:
            return True
    return False
