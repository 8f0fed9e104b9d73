"""Surface forms of entity names: the words a title gives (aliases, plurals, a name's last word) and the
longest-match scan that finds them in a text (:class:`SurfaceMatcher`). Forms are compared as lower-cased word
sequences; the dictionary's keys depend on this module's word pattern, so it keeps its own."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

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
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def usable_surface(key: str) -> bool:
    """Whether a surface key (lower-cased words joined by spaces) can name an entity in running text."""
    tokens = key.split()
    if not tokens or len(key) < 2:
        return False
    return not all(t in stop_words() or t.isdigit() for t in tokens)


class SurfaceMatcher:
    """Longest-first matching of surface forms (word sequences) in a word sequence.

    Args:
        keys: surface keys (lower-cased words joined by single spaces), numbered in order.
    """

    def __init__(self, keys: Sequence[str]):
        self.ids = {key: number for number, key in enumerate(keys)}
        self.longest: dict[str, int] = {}  # first word -> most words of a form starting with it
        for key in keys:
            tokens = key.split(" ")
            self.longest[tokens[0]] = max(self.longest.get(tokens[0], 0), len(tokens))

    def matches(self, tokens: Sequence[str]) -> list[tuple[int, int, int]]:
        """``(first word, end word, form id)`` of the forms found left to right, longest first, not overlapping."""
        found = []
        i, n = 0, len(tokens)
        longest, ids = self.longest, self.ids
        while i < n:
            most = longest.get(tokens[i])
            if most:
                for length in range(min(most, n - i), 0, -1):
                    form = ids.get(tokens[i] if length == 1 else " ".join(tokens[i : i + length]))
                    if form is not None:
                        found.append((i, i + length, form))
                        i += length
                        break
                else:
                    i += 1
            else:
                i += 1
        return found

    def every_match(self, tokens: Sequence[str]) -> Iterator[int]:
        """The form id of every occurrence of a form, overlapping ones included ("new york" inside "new york
        city")."""
        longest, ids = self.longest, self.ids
        for i, word in enumerate(tokens):
            most = longest.get(word)
            if most:
                for end in range(i + 1, min(i + most, len(tokens)) + 1):
                    form = ids.get(" ".join(tokens[i:end]))
                    if form is not None:
                        yield form
