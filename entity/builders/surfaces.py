"""Surface forms of entity names: the words a title gives (aliases, plurals, a name's last word) and the
longest-match scan that finds them in a text (:class:`SurfaceMatcher`). Forms are compared as lower-cased word
sequences; the dictionary's keys depend on this module's word pattern, so it keeps its own."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from operator import itemgetter
from pathlib import Path

from cast.errors import CastError

# The dictionary's word pattern: its surface keys are these words, lower-cased (cast/infra/text.py has the toolkit's own).
WORD = re.compile(r"\w+")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")


def words(text: str) -> list[str]:
    """The lower-cased words of a text, as surface forms are compared."""
    return WORD.findall(text.lower())


def title_aliases(title: str) -> list[str]:
    """The surface forms of an article title: itself, without a parenthetical, without a comma qualifier.

    Example:
        >>> title_aliases("Mercury (planet)")
        ['Mercury (planet)', 'Mercury']
        >>> title_aliases("Paris, Texas")
        ['Paris, Texas', 'Paris']
    """
    forms = [title]
    bare = _PARENTHETICAL.sub("", title)
    if bare and bare != title:
        forms.append(bare)
    head, comma, _ = bare.partition(", ")
    if comma and head:
        forms.append(head)
    return forms


def plural_form(key: str) -> str:
    """The regular English plural of a surface key's last word (``"chemical element"`` -> ``"chemical elements"``).

    Example:
        >>> plural_form("black hole"), plural_form("galaxy"), plural_form("virus")
        ('black holes', 'galaxies', 'viruses')
    """
    if key.endswith(("s", "x", "z", "ch", "sh")):
        return key + "es"
    if key.endswith("y") and key[-2:-1] not in ("a", "e", "o", "u", ""):
        return key[:-1] + "ies"
    return key + "s"


_NAME_WORD = re.compile(r"[A-Z][\w.'-]*$")


def name_alias(title: str) -> str | None:
    """The last word of a title that looks like a name (2-3 capitalised words): ``"Marie Curie"`` -> ``"Curie"``.

    Such an alias is only a candidate: the dictionary keeps it where the article itself uses it often.
    """
    name = _PARENTHETICAL.sub("", title).split()
    if 2 <= len(name) <= 3 and all(_NAME_WORD.match(word) for word in name):
        return name[-1]
    return None


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """spaCy's English stop words, read from its ``lang/en/stop_words.py`` without importing spaCy (which costs a
    quarter of a gigabyte of memory in the processes that need nothing else of it)."""
    import importlib.util

    spacy = importlib.util.find_spec("spacy")  # finds the package without importing it
    if spacy is None or not spacy.submodule_search_locations:
        raise CastError("spaCy is not installed: run the set-up (make setup)")
    path = Path(next(iter(spacy.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
    spec = importlib.util.spec_from_file_location("spacy_en_stop_words", path)
    if spec is None or spec.loader is None:
        raise CastError(f"spaCy's English stop words are missing at {path}; reinstall spaCy")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STOP_WORDS)


def usable_surface(key: str) -> bool:
    """Whether a surface key (lower-cased words joined by spaces) can name an entity in running text."""
    tokens = key.split()
    if not tokens or len(key) < 2:
        return False
    return not all(t in stop_words() or t.isdigit() for t in tokens)


def surface_line(tokens: Sequence[str]) -> str:
    """Words as :class:`SurfaceMatcher` reads them: joined by single spaces, with a space before and after."""
    return f" {' '.join(tokens)} "


class SurfaceMatcher:
    """Finds surface forms (word sequences) in a text's words: an Aho-Corasick automaton over the forms, each
    written with a space before and after, run over :func:`surface_line` (C speed, whatever the number of forms).

    Args:
        keys: surface keys (lower-cased words joined by single spaces), numbered in order.
    """

    def __init__(self, keys: Sequence[str]):
        import ahocorasick

        self._automaton = ahocorasick.Automaton(ahocorasick.STORE_INTS)
        self._sizes = [len(key) + 2 for key in keys]
        for number, key in enumerate(keys):
            if key:  # an empty key would match an empty text's line
                self._automaton.add_word(f" {key} ", number)
        if len(self._automaton):
            self._automaton.make_automaton()

    def longest(self, line: str) -> list[tuple[int, int, int]]:
        """``(start, end, form id)`` in ``line`` (:func:`surface_line`) of the forms found left to right, longest
        first, not overlapping; a form's span includes the spaces around it, which it shares with its
        neighbours."""
        if not len(self._automaton):
            return []
        sizes = self._sizes
        found = sorted(
            (end + 1 - sizes[form], -sizes[form], form) for end, form in self._automaton.iter(line)
        )
        spans = []
        free = 0  # the first character a next form may start at (the space after the last form taken)
        for start, negative_size, form in found:  # by start, then longest first
            if start >= free:
                free = start - negative_size - 1
                spans.append((start, free + 1, form))
        return spans

    def matches(self, tokens: Sequence[str]) -> list[tuple[int, int, int]]:
        """``(first word, end word, form id)`` of the forms found left to right, longest first, not overlapping."""
        line = surface_line(tokens)
        word_at = {}  # a space's offset in the line -> the number of the word after it
        offset = 0
        for number, token in enumerate(tokens):
            word_at[offset] = number
            offset += len(token) + 1
        word_at[offset] = len(tokens)
        return [(word_at[start], word_at[end - 1], form) for start, end, form in self.longest(line)]

    def every_match(self, line: str) -> Iterator[int]:
        """The form id of every occurrence of a form in ``line`` (:func:`surface_line`), overlapping ones included
        ("new york" inside "new york city")."""
        # map + itemgetter: the matches are taken in C, with no Python frame per match (a scan counts millions).
        return map(itemgetter(1), self._automaton.iter(line)) if len(self._automaton) else iter(())
