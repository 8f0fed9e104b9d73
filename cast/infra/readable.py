"""What of a passage reads as an answer: whole sentences without web-page boilerplate, and sentences that open on a
reference to what came before.

The collections CAsT and iKAT answer from are crawled web pages and Wikipedia dumps, and their passages carry
page furniture between the sentences: KILT's ``Section::::History.`` and ``BULLET::::-`` markers, page titles
("Black garlic - Wikipedia"), "From Wikipedia, the free encyclopedia Jump to navigation", breadcrumbs ("Home >
Canada > Articles"), bylines ("By Jane McLean Updated on 11/24/19 Share Pin Email"), photo credits ("Harry Traeger /
Getty Images"), "Read More", "Click here", "Table of Contents", list numbers, and headings glued to the sentence
after them ("Email marketing isn't dead Just as email itself isn't dead, ..."). Passages also start and end
mid-sentence (a crawled page cut into passages), and snippets end on "...". The patterns below come from the
provenance passages of CAsT 2021-2022 and iKAT 2023 and the Wikipedia passages (the examples in the comments are
theirs); :func:`readable_sentence` keeps what of a sentence reads as one, and :func:`boilerplate_in` tells where an
answer still carries any of it.

Light regular expressions only, no model.
"""

from __future__ import annotations

import re

from cast.infra.text import SentenceSpan, split_sentences

# Page furniture, wherever it stands in a sentence.
_FURNITURE = re.compile(
    "|".join(
        (
            r"\w*::::\S*",  # KILT Wikipedia: "Section::::Attractions.", "BULLET::::-"
            r"(?:\S+ )?- Wikipedia\b",  # page titles: "Black garlic - Wikipedia"
            r"\bFrom Wikipedia, the free encyclopedia",
            r"\bJump to (?:navigation|search|content|ratings and reviews)",
            r"\bSkip to (?:main )?content",
            r"\bTable of [Cc]ontents\b(?:\s*\[show\])?",
            r"\bPage [Cc]ontents\b",
            r"\s\|\s",  # "Top Computer Science Universities in Netherlands | US News"
            r"\s[>›»]\s",  # breadcrumbs: "Home > Canada > Articles", "Home » Travel Guides » Nigeria"
            r"[←→]",
            r"\b(?:Read|Learn|Show|See|View) (?:[Mm]ore|[Aa]ll|[Ss]pecs|[Pp]hotos)\b",
            r"\b[Cc]lick (?:here|to (?:see|read|view|find))\b",
            r"\bShare(?: on \w+| this| Pin| Email| Tweet| Print)+\b",
            r"\b(?:Sign up|Subscribe)(?: (?:now|to|for) (?:our )?)?(?:[Nn]ewsletter)?\b",
            r"\bADVERTISEMENT\b|\bAdvertisement\b",
            r"\bHome (?:Menu|Shows|News)\b|\bMenu Home\b",
            r"\b(?:have|enable|turn on) JavaScript\b|\bJavaScript (?:turned on|enabled|is disabled)\b",  # "- CBBC Newsround Home Menu Home Shows Games"
            r"\b(?:Keep reading|Continue reading|Read on|Find out more|To read more)\b",
            r"\bcontinued below\b",
            r"(?:/ )?\b(?:Getty Images|Shutterstock|iStock)\b|©",
            r"\b(?:Photo|Image)(?: [Cc]redits?)?:",
            r"\b(?:Updated|Published|Posted|Last updated|Page last reviewed)(?: [Oo]n)?:? (?:\d|[A-Z][a-z]+ \d)",
            r"\bMedically [Rr]eviewed by\b",
            r"\bBy [A-Z][a-z]+(?: [A-Z][a-z.]+){0,2} (?:•|\||Updated|Published|[A-Z][a-z]{2,8} \d{1,2},? \d{4})",
            r"\b\d+ mins? read\b",
            r"\b(?:Prev|Previous|Next)(?: (?:Post|Article|Page))?\s*[»«]|\bPrevious Next\b|\bPrev\b",
            r"\bNext(?=[A-Z])",  # link text glued to the next page's title: "NextSymptoms"
            r"\b(?:Tel|Phone|Instagram|Facebook|Twitter|Website|WhatsApp):",
            r"https?://\S+|\bwww\.\S+",
            r"\b\d+ (?:years?|months?|weeks?|days?|hours?)(?: \d+ \w+)? ago\b",  # "By Eve • 12 years 5 months ago"
            # a video player: "If playback doesn't begin shortly, try restarting your device.", "0 seconds of 0
            # seconds Volume 90% 1:24 Click Play to See This Easy Vegan Fried Tofu Come Together"
            r"\bIf playback doesn[’']t begin shortly\b|\b\d+ seconds of \d+ seconds\b|\bVolume \d+%|\bClick Play\b",
            # photo credits: "Abuja Source: flickr Abuja ...", "AP Apple Pay is still in its early days"
            r"\bSource: \S+|(?:^|(?<=\s))AP(?= [A-Z][a-z])",
            # shop and hotel listings: "Uncommon Goods 2 of 33 Fun Gift for Him Cinephile Game $20 AT UNCOMMON
            # GOODS", "Hotel Bruna Show Prices 93 reviews ... #3 Best Value of 10,000 places to stay in Rome"
            r"\$\d[\d.,]* AT [A-Z]+\b(?: [A-Z]+\b)*|\b\d+ of \d+(?= [A-Z])|\bShow Prices\b|\b\d[\d,]* reviews\b",
            r"#\d+ Best Value\b|#\d+ of [\d,]+ (?:hotels|places|restaurants|things)\b",
            r"\bSHOP NOW\b|\bJump to Recipe\b|\b(?:Print|Pin) Recipe\b|\bSimilar recipes you may like\b",
            # Wikipedia's hatnotes and maintenance notes: "For the plant, see Allium nigrum.", "This article is
            # missing information about black garlic oil. Please expand the article to include this information."
            r"\bFor (?:the|other) [\w ]{1,30}, see\b|\bThis (?:article|section) (?:is missing|needs)\b",
            r"\bPlease (?:expand|help improve) (?:the|this) (?:article|section)\b",
            r"\bRequest Sample(?: Pages)?\b|\bGet more information on this report\b",
            r"[\u0600-\u06ff]+(?:[\s:]+[\u0600-\u06ff]+)+",  # Arabic words glued to an English sentence (a menu)
        )
    )
)
# A list number in front of a sentence: "2. Increase the intensity of your runs."
# Reference marks inside a sentence ("... closely associated with obesity [ 17 ].") are dropped, not cut at.
# So are a mark that lost its opening bracket ("1] Microbeads are ...") and a pointer into the page's tables ("(table 4)").
_REFERENCE_MARK = re.compile(
    r"\s?\[\s?\d+\s?\]|(?:^|\s)\d{1,3}\](?=\s|$)|\s?\((?:[Tt]able|[Ff]ig\.?|[Ff]igure) \d+\)"
)
# What the Wikipedia dump left where it removed a template (a pronunciation, a native name): empty parentheses
# ("Abuja () is ..."), separators at a parenthesis' start ("Marie Skłodowska-Curie (; ]; 7 November 1867 – ..."), an
# empty title between commas ("in his bestseller, "", attempts ..."). Dropped from the text, as reference marks are.
_TEMPLATE_RESIDUE = re.compile(r"\s?\(\s*[;,]*\s*\)|(?<=\()[\s;,\]]+(?=[^\s;,\]])|,\s*\"\"\s*(?=,)")
_LONE_NUMBER = re.compile(r"\d{1,2}\s?[.)]")
_LIST_NUMBER = re.compile(r"^(?:\d{1,2}|[a-z])\s?[.)]\s+(?=\S)")
# Words that open a sentence, seen capitalised after a lower-case word with no stop between: a heading glued to the
# sentence after it ("Email marketing isn't dead Just as email itself isn't dead").
_OPENERS = frozenset(
    """The This These It If In When While You Your We They There Here As For Just But So To With Many Most Some Each
    Every He She However Also After Before Because Since Although What How Why Is Are Do Does Can Let Make Try
    Use""".split()
)
# Words a heading does not end on: "starred in The Godfather", "the film The ..." ends no heading.
JOINING = frozenset(
    """a an the of in on at to for from by with and or but as is are was were be been into onto than that
    about like called named titled film films song songs album novel book series show band""".split()
)
_CAPITALISED = re.compile(r"^[A-Z0-9]")
_TERMINAL = re.compile(r"[.!?][\"')\]’”]*$")
_ELLIPSIS = re.compile(r"\.\.\.|…")
# A sentence shorter than this after cleaning is a heading or a fragment.
MIN_WORDS = 4


def is_cut(sentence: str) -> bool:
    """Whether ``sentence`` is not whole: it ends without a full stop, question or exclamation mark (a passage cut
    mid-sentence), or on "..." (a snippet), or starts in lower case (the rest of a sentence)."""
    sentence = sentence.strip()
    return (
        not sentence
        or not _TERMINAL.search(sentence)
        or bool(_ELLIPSIS.search(sentence))
        or not _CAPITALISED.match(sentence.lstrip("\"'(‘“["))
    )


def glued_heading_end(text: str) -> int | None:
    """The offset where the sentence after a heading glued in front of it starts ("Email marketing isn't dead Just
    as ..." -> the offset of "Just"), or ``None``.

    A heading ends where a word that opens sentences follows a lower-case or numeric word with no stop between,
    and the word after it is in lower case ("Prius The new RAV4", but not "band The Beatles").
    """
    tokens = list(re.finditer(r"\S+", text))
    for before, word, after in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if (
            word.group() in _OPENERS
            and after.group()[:1].islower()
            and re.search(r"[a-z0-9]$", before.group())
            and before.group().lower() not in JOINING
            and quotes_closed(text[: word.start()])
        ):
            return word.start()
    return None


def quotes_closed(text: str) -> bool:
    """Whether no quotation is open at the end of ``text`` (a title quoted in a sentence ends no heading)."""
    return text.count('"') % 2 == 0 and text.count("“") <= text.count("”")


def _title_like(text: str) -> bool:
    """A page title or a menu: no comma, and no word in lower case but the joining ones ("Vancouver Weather: What
    to Expect and How to Pack"; a list of names has commas and a verb: "Notable winners include ...")."""
    tokens = [t for t in text.split() if re.search(r"[A-Za-z]", t)]
    if len(tokens) < MIN_WORDS or "," in text:
        return False
    lower = sum(1 for t in tokens if t[:1].islower() and t.lower() not in JOINING)
    return lower == 0


def readable_sentence(span: SentenceSpan) -> SentenceSpan | None:
    """What of a sentence reads as one: its text after the last page furniture in it and after a heading glued in
    front of it, without a list number; ``None`` when no whole sentence of :data:`MIN_WORDS` words remains (a
    title, a menu, a fragment, a sentence cut at the passage's end or on "...").

    The offsets are those of the kept part in the passage (the span is trimmed at its start; reference marks such
    as "[ 1]" and what the Wikipedia dump left of a removed template, such as "()", are dropped from its text).

    Example:
        >>> readable_sentence(SentenceSpan("Section::::Religion.", 0, 20)) is None
        True
        >>> readable_sentence(SentenceSpan("2. Dress for the weather you expect.", 0, 36)).text
        'Dress for the weather you expect.'
    """
    start = span.start
    text = _TEMPLATE_RESIDUE.sub("", _REFERENCE_MARK.sub("", span.text))
    while True:
        cut = 0
        for furniture in _FURNITURE.finditer(text):
            cut = furniture.end()
        number = _LIST_NUMBER.match(text[cut:].lstrip())
        if number:
            cut = len(text) - len(text[cut:].lstrip()) + number.end()
        heading = glued_heading_end(text[cut:])
        if heading is not None:
            cut += heading
        rest = text[cut:].lstrip(" ,;:-–—•*.")
        if rest == text:
            break
        start += len(text) - len(rest)
        text = rest
    if len(text.split()) < MIN_WORDS or is_cut(text) or _title_like(text):
        return None
    return SentenceSpan(text, start, span.end)


def readable_sentences(text: str) -> list[SentenceSpan]:
    """The sentences of ``text`` that read as sentences (:func:`readable_sentence`), with their offsets."""
    kept = (readable_sentence(span) for span in split_sentences(text))
    return [span for span in kept if span is not None]


def boilerplate_in(text: str) -> bool:
    """Whether an answer carries page furniture, a list number or a heading glued to a sentence."""
    return any(
        _FURNITURE.search(sentence.text)
        or _REFERENCE_MARK.search(sentence.text)
        or _TEMPLATE_RESIDUE.search(sentence.text)
        or _LIST_NUMBER.match(sentence.text)
        or _LONE_NUMBER.fullmatch(sentence.text)
        or glued_heading_end(sentence.text) is not None
        for sentence in split_sentences(text)
    )


# A sentence that opens on a reference to what came before: a pronoun, a determiner without its noun's
# antecedent, a connective ("His...", "The book...", "It means...", "Or...").
_REFERRING = re.compile(
    r"^[\"'(‘“]?(?:"
    r"(?:he|she|it|they|him|them|his|her|hers|its|their|theirs|this|these|those|that|such)\b"
    # "also" that needs its antecedent ("Also parties to the Convention ..."), not one that names ("Also
    # tentatively called radium F, polonium was ...")
    r"|also\b(?!,? (?:\w+ly )?(?:known|called|named|spelled|spelt|referred|termed|written|styled)\b)"
    r"|(?:or|and|but|however|therefore|thus|hence|moreover|furthermore|additionally|instead|otherwise|"
    r"nevertheless|nonetheless|besides|consequently|meanwhile|likewise|similarly|still|then|yet|so)\b"
    # a part of what was just named ("Some of those island states ...", "Most of them ...")
    r"|(?:some|many|most|all|none|one|each|either|neither|few|several|much|part|any) of (?:those|these|them|this|that|it)\b"
    # the next of a list's points ("Lastly, ...", "Secondly, ...")
    r"|(?:lastly|finally|secondly|thirdly|next|to that end|in conclusion|in summary)\s*,"
    r"|(?:in addition|as a result|for example|for instance|in fact|in contrast|on the other hand|the latter|"
    r"the former|the other|another|both|the same|the two|the three|the book|the film|the song|the album|the "
    r"novel|the series|the show|the company|the team|the city|the town|the country|the man|the woman|the "
    r"group|the band|the game|the article|the study|the process|the term|the word|the name|the building|the "
    r"couple|the pair|the latter)\b"
    # a time told from the sentence before ("A few months later, she died ...", "Later, ...")
    r"|(?:a few|a|an|one|two|three|four|five|six|seven|eight|nine|ten|several|some|many|\d+) "
    r"(?:days?|weeks?|months?|years?|decades?) (?:later|after(?:wards)?)\b"
    r"|(?:later|afterwards|after that|soon after|shortly after(?:wards)?|the (?:next|following) (?:day|week|month|year))\s*,"
    r")",
    re.I,
)


def opens_with_reference(sentence: str) -> bool:
    """Whether ``sentence`` opens on a reference to something before it ("She won...", "The book tells...",
    "Or..."): it reads as an answer only right after the sentence it refers to."""
    return bool(_REFERRING.match(sentence.strip()))


# A sentence that announces what follows it ("Here are some tips ...", "Try this workout.", "... as follows: 1."):
# without the sentence after it, it tells the reader nothing.
_ANNOUNCING = re.compile(
    r"^[\"'(‘“]?(?:here(?:'s|’s| is| are)\b|(?:try|read|see|avoid|follow|consider|check out) (?:this|these|the "
    r"following)\b)|\b(?:the following|as follows)\b",
    re.I,
)
# What a colon introduces where the sentence ends on it: nothing, or a list's first number.
_OPEN_COLON = re.compile(r":(?:\s+\d{1,2}\s?[.)]?)?\s*$")


def announces_what_follows(sentence: str) -> bool:
    """Whether ``sentence`` announces what the sentences after it say ("Here are some tips that will help ...",
    "Some advice for a first date: 1."), rather than saying it: it reads as an answer only followed by them. A
    sentence that goes on after its colon ("Here are the basics: eat bread ...") says it."""
    text = sentence.strip()
    if _OPEN_COLON.search(text):
        return True
    return ":" not in text and bool(_ANNOUNCING.search(text))
