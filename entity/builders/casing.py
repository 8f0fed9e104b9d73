"""How the collection writes names: a casing table for titles the knowledge base only has in lower case.

The knowledge base's titles are lower-cased (:mod:`cast.entity.builders.kb`), and sentence case ("Burger_king") is wrong for
proper names. The collection's running text says how a name is written: a word sequence the passages write with
capitals inside sentences in most of its occurrences ("... ordered a Big Mac and ...") is a proper name, and the
identifier takes that casing ("Big_Mac"). "Prime Minister", capitalised in 68% of its occurrences in Wikipedia
(before a name, as a title), keeps sentence case.

Counting takes both passes of the entity resources' scan (:mod:`cast.entity.builders.collection_entities`): the
first collects, with :func:`cased_names`, the capitalised sequences of one to :data:`MAX_WORDS` words whose casing
differs from sentence case; the second counts every occurrence of the frequent ones whatever its casing
(:class:`cast.entity.builders.collection_entities.MentionScanner`); :func:`casing_table` keeps the names written with their
casing in at least :data:`LEAST_SHARE` of their occurrences.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator, Mapping

from cast.entity.builders.kb import form_of
from cast.entity.builders.surfaces import words

MAX_WORDS = 4
LEAST_USES = 3  # a casing seen fewer times is noise (headings, a quoted title)
# Of all its occurrences, sentence starts included (on ConEL-2 val any share from 0.6 to 0.9 scores the same).
LEAST_SHARE = 0.75
# Lower-case words that may stand inside a name ("Bank of America", "Leonardo da Vinci").
CONNECTORS = frozenset(
    {"of", "the", "and", "de", "da", "del", "der", "di", "du", "la", "le", "van", "von", "y"}
)
_EDGE = "\"'()[]{},;:!?.“”‘’«»"
_SENTENCE_END = re.compile(r"[.!?:;][\"')\]”’]*$")


def cased_names(text: str) -> Iterator[str]:
    """The capitalised word sequences of a text that do not start a sentence and are not in sentence case.

    Words are the text's whitespace-separated tokens stripped of punctuation at their edges (a token of
    punctuation alone is skipped). Sequences end at punctuation; connectors (:data:`CONNECTORS`) may stand inside
    one, not at its ends. A sequence of several words always has a capital inside; one word needs one after its
    first letter.

    Example:
        >>> list(cased_names('He ate a Big Mac. Burger King sells the Whopper in New York City.'))
        ['Big Mac', 'New York', 'New York City', 'York City']
        >>> list(cased_names('the "Harry Potter" films, the Bank of America (USA)'))
        ['Harry Potter', 'Bank of America', 'USA']
    """
    # Only a token whose first character is not lower case can start a name: the loop skips the others at once.
    tokens = text.split()
    sentence_end = _SENTENCE_END.search
    for i, raw in enumerate(tokens):
        if raw[0].islower():
            continue
        word = raw.strip(_EDGE)
        if not word or not word[0].isupper() or i == 0 or sentence_end(tokens[i - 1]):
            continue
        rest = word[1:]
        if not rest.islower() and any(map(str.isupper, rest)):
            yield word
        if raw[-1] in _EDGE:
            continue
        name, taken = word, 1
        for following in itertools.islice(tokens, i + 1, None):
            last = following.strip(_EDGE)
            if not last:
                continue
            if following[0] in _EDGE or not (last[0].isupper() or last in CONNECTORS):
                break
            name = f"{name} {last}"
            if last[0].isupper():
                yield name
            taken += 1
            if taken == MAX_WORDS or following[-1] in _EDGE:
                break


def casing_table(cased: Counter, occurrences: Mapping[str, int]) -> dict[str, str]:
    """Lookup form -> the name's usual casing, where it is written so in at least :data:`LEAST_SHARE` of its
    occurrences (``occurrences``: counts by lower-cased word sequence, whatever the casing).

    Example:
        >>> cased = Counter({"Big Mac": 5, "Prime Minister": 4, "BIG MAC": 1})
        >>> casing_table(cased, Counter({"big mac": 6, "prime minister": 20}))
        {'big mac': 'Big Mac'}
    """
    best: dict[str, tuple[int, str]] = {}
    for name, count in cased.items():
        form = form_of(name)
        if count > best.get(form, (0, ""))[0]:
            best[form] = (count, name)
    table = {}
    for form, (count, name) in sorted(best.items()):
        total = occurrences.get(" ".join(words(name)), 0)
        if count >= LEAST_USES and count >= LEAST_SHARE * total:
            table[form] = name
    return table
