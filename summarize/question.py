"""The question an answer answers: resolved in its conversation, and the kind of answer it asks for.

A rewriter's keyword query suits Lucene (a bag of the conversation's words) but not the judging of a sentence; its
question is the user's utterance, whose pronouns point back into the conversation ("Which elements did she
discover?"). :func:`natural_question` names the pronoun's antecedent in its place ("Which elements did Marie Curie
discover?"): :func:`antecedent` chooses it among the conversation's entities, one whose gender agrees with the pronoun
(:func:`entity_genders`: "he" is not the Marie Curie of the turn before but her husband). :func:`answer_kind` tells what kind of sentence answers the
question (a death, a definition, a cause, a procedure, a yes or no, a quantity, a date, a list) and :func:`fits_kind`
whether a sentence is of that kind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

from cast.infra.text import split_sentences

# Sentence cues of each kind of answer.
DIGIT = re.compile(r"\d")
YEAR = re.compile(r"\b(?:1[0-9]|20)\d\d\b")
CAUSE = re.compile(
    r"\b(?:because|due to|caused|causes|cause|result of|as a result|leads? to|since|therefore)\b"
)
DEFINITION = re.compile(r"^[^,;]{0,80}?\b(?:is|are|was|were|refers to|means)\s+(?:a|an|the|one)\b", re.I)
PARENTHESES = re.compile(r"\s*\([^()]*\)")
APPOSITIVE_NAME = re.compile(
    r",\s*(?:also |commonly |sometimes |often )?(?:known|called|referred to) as [^,]*,"
)
LIST = re.compile(r"(?:,.*){2,}|\b(?:including|such as|include)\b")
_NUMBER_WORDS = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|dozen|hundred|thousand|million|billion|percent|"
    r"half|twice)\b",
    re.I,
)
_DATE = re.compile(
    r"\b(?:1[0-9]|20)\d\d\b|\b(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December)\b|\b\d{1,2}(?:st|nd|rd|th) century\b",
)
_PROCEDURE_SENTENCE = re.compile(
    r"^(?:To\b|First\b|Then\b|Start\b|Begin\b|Try\b|Use\b|Make\b|Add\b|Take\b|Place\b|Put\b|Choose\b|Avoid\b|Keep\b)"
    r"|\b(?:you (?:can|should|need|must|will)|step|steps)\b"
)
# A death's cause and manner: "how did he die" is answered by "he was killed in a road accident".
_DEATH_SENTENCE = re.compile(
    r"\b(?:died|dies|death|dead|killed|accident|murdered|assassinated|executed|suicide|drowned|disease|illness|"
    r"cancer|anemia|anaemia|infection|overdose|heart attack|stroke|crash|buried|funeral)\b",
    re.I,
)
_YES_NO_SENTENCE = re.compile(r"\b(?:yes|no|not|never|can|cannot|can't|may|is|are|does|do)\b", re.I)

_AUXILIARIES = frozenset(
    """is are was were do does did can could should would will has have had may might must isn't aren't wasn't
    doesn't don't didn't can't""".split()
)
_LEAD_INS = frozenset(("and", "so", "but", "ok", "okay", "then", "also", "now", "well", "oh"))
Kind = Literal["death", "definition", "cause", "procedure", "yes_no", "quantity", "date", "list"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# The question's words that say what kind of answer it asks for, first match wins.
_KIND_PATTERNS = (
    ("death", re.compile(r"\b(?:die|died|dies|death|killed|pass(?:ed)? away)\b")),
    ("cause", re.compile(r"\bwhy\b|\bwhat (?:causes|caused|is the reason|are the reasons)\b|\breasons?\b")),
    ("quantity", re.compile(r"\bhow (?:many|much|long|old|far|big|tall|high|large|often|fast|deep)\b")),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:year|date|century|time)\b")),
    ("procedure", re.compile(r"\bhow (?:do|does|can|should|to|would|could)\b|\b(?:steps|ways) to\b")),
    (
        "list",
        re.compile(
            r"\b(?:what|which) (?:are|were) (?:some|the)\b|\b(?:types|kinds|examples|list) of\b|^list\b"
        ),
    ),
    (
        "definition",
        re.compile(
            r"^(?:what|who) (?:is|are|was|were)\b(?! (?:the (?:best|difference)|some))|\bdefine\b|\bmean"
        ),
    ),
)
_PRONOUN = re.compile(r"\b(?:he|she|it|they|him|them|his|her|its|their)\b", re.I)
_POSSESSIVES = frozenset(("his", "its", "their"))
# "her" before one of these is the object ("Who married her in 1895?"), before another word the possessive.
_AFTER_OBJECT_HER = frozenset(
    "to in at for with about from on by and or as when that if so up out off back again now then after before".split()
)
GENDERED = {
    **dict.fromkeys(("he", "him", "his", "himself"), "male"),
    **dict.fromkeys(("she", "her", "hers", "herself"), "female"),
}
_GENDERED_PRONOUN = re.compile(r"\b(?:" + "|".join(GENDERED) + r")\b", re.I)


def _plain(question: str) -> str:
    words = question.strip().lower().split()
    while words and words[0].strip(",.") in _LEAD_INS:
        words.pop(0)
    return " ".join(words)


def answer_kind(question: str) -> str | None:
    """The kind of answer ``question`` asks for (one of :data:`KINDS`), or ``None``.

    Example:
        >>> answer_kind("And why did she name it polonium?"), answer_kind("Is radium still used?")
        ('cause', 'yes_no')
        >>> answer_kind("How many people live there?"), answer_kind("Who was Marie Curie?")
        ('quantity', 'definition')
    """
    plain = _plain(question)
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(plain):
            return kind
    first = plain.split()[0] if plain.split() else ""
    return "yes_no" if first in _AUXILIARIES else None


def fits_kind(kind: str | None, sentence: str) -> bool:
    """Whether ``sentence`` is of the kind of answer ``kind`` asks for (a definition's "X is a ...", a cause's
    "because", a number, a date...)."""
    if kind == "death":
        return bool(_DEATH_SENTENCE.search(sentence))
    if kind == "definition":
        # "Marie Skłodowska-Curie (7 November 1867 – 4 July 1934) was a Polish ...", "Lyme disease, also known as
        # Lyme borreliosis, is an infectious disease ...": the dates and the other names define nothing. A question
        # ("What Is a Vegan Keto Diet?") defines nothing either.
        plain = APPOSITIVE_NAME.sub("", PARENTHESES.sub("", sentence))
        return not sentence.rstrip().endswith("?") and bool(DEFINITION.search(plain))
    if kind == "cause":
        return bool(CAUSE.search(sentence.lower()))
    if kind == "procedure":
        return bool(_PROCEDURE_SENTENCE.search(sentence))
    if kind == "yes_no":
        return bool(_YES_NO_SENTENCE.search(sentence))
    if kind == "quantity":
        return bool(DIGIT.search(sentence) or _NUMBER_WORDS.search(sentence))
    if kind == "date":
        return bool(_DATE.search(sentence))
    if kind == "list":
        return bool(LIST.search(sentence))
    return False


def _possessive(question: str, pronoun: re.Match[str]) -> bool:
    word = pronoun.group().lower()
    if word != "her":
        return word in _POSSESSIVES
    following = re.match(r"\s+([A-Za-z]+)", question[pronoun.end() :])
    return following is not None and following.group(1).lower() not in _AFTER_OBJECT_HER


def natural_question(question: str, entity: str | None) -> str:
    """``question`` with its first third-person pronoun replaced by the name ``entity`` (its antecedent), unless
    the question names it already.

    Example:
        >>> natural_question("Which elements did she discover?", "Marie Curie")
        'Which elements did Marie Curie discover?'
        >>> natural_question("What was his job?", "Pierre Curie"), natural_question("Who was her husband?", "Marie")
        ("What was Pierre Curie's job?", "Who was Marie's husband?")
    """
    if not entity or entity.lower() in question.lower():
        return question
    pronoun = _PRONOUN.search(question)
    if pronoun is None:
        return question
    name = f"{entity}'s" if _possessive(question, pronoun) else entity
    return question[: pronoun.start()] + name + question[pronoun.end() :]


def entity_genders(passages: Sequence[tuple[str, Sequence[tuple[int, str]]]]) -> dict[str, str]:
    """The gender ("male" or "female") the passages' pronouns give each entity they may refer to, where they agree.

    ``passages``: each passage's text and its entity mentions as (character offset, entity). A gendered pronoun
    ("he", "her"...) refers, as a rule of thumb, to an entity named before it in its sentence or to the subject
    of the sentence before (its first entity): it counts once for each. An object pronoun ("him", "with her")
    does not refer to its own clause's subject, so it counts only for the sentence before's. An entity has the
    gender counted more than twice as often as the other (the rule of thumb errs).

    Example:
        >>> text = "Pierre was killed in Paris. He fell under a cart. Marie mourned her husband."
        >>> entity_genders([(text, [(0, "Pierre"), (21, "Paris"), (50, "Marie")])])
        {'Pierre': 'male', 'Marie': 'female'}
    """
    counts: dict[str, dict[str, int]] = {}
    for text, mentions in passages:
        ordered = sorted(mentions)
        previous_first: list[str] = []
        for sentence in split_sentences(text):
            inside = [(at, e) for at, e in ordered if sentence.start <= at < sentence.end]
            for pronoun in _GENDERED_PRONOUN.finditer(text, sentence.start, sentence.end):
                word = pronoun.group().lower()
                is_object = word == "him" or (word == "her" and not _possessive(text, pronoun))
                before = [] if is_object else [e for at, e in inside if at < pronoun.start()]
                for entity in dict.fromkeys([*before, *previous_first]):
                    tally = counts.setdefault(entity, {"male": 0, "female": 0})
                    tally[GENDERED[word]] += 1
            previous_first = [inside[0][1]] if inside else []
    return {
        entity: gender
        for entity, tally in counts.items()
        for gender, other in (("male", "female"), ("female", "male"))
        if tally[gender] > 2 * tally[other]
    }


_OPENING_PRONOUN = re.compile(r"^[\"'(‘“]?(he|she|his|her)\b", re.I)


def opening_gender(sentence: str) -> str | None:
    """The gender of the personal pronoun ``sentence`` opens on ("She named ...": "female"), or ``None``.

    Example:
        >>> opening_gender("She named the element polonium."), opening_gender("His wife survived him.")
        ('female', 'male')
        >>> opening_gender("It was named after Poland.") is None
        True
    """
    opener = _OPENING_PRONOUN.match(sentence.strip())
    return GENDERED[opener.group(1).lower()] if opener else None


def antecedent(
    question: str, queried: Sequence[str], ranked: Sequence[str], genders: Mapping[str, str]
) -> str | None:
    """What the first third-person pronoun of ``question`` refers to, among the entities of the conversation's
    queries (``queried``, best first) and the others of the turn (``ranked``, best first); ``None`` where none
    fits.

    A gendered pronoun refers to an entity of its gender (:func:`entity_genders`) or of unknown gender among the
    queried ones, else to a ranked entity of its gender; never to one of the other gender ("he" after a turn
    about Marie Curie is her husband). "it" refers to a queried entity of no known gender (not a person), "they" to
    the first queried entity.

    Example:
        >>> genders = {"Marie Curie": "female", "Pierre Curie": "male"}
        >>> antecedent("How did he die?", ["Marie Curie"], ["Radium", "Pierre Curie"], genders)
        'Pierre Curie'
        >>> antecedent("What is it used for?", ["Marie Curie", "Radium"], [], genders)
        'Radium'
    """
    pronoun = _PRONOUN.search(question)
    if pronoun is None:
        return None
    word = pronoun.group().lower()
    gender = GENDERED.get(word)
    if gender is None:
        fitting = [e for e in queried if e not in genders] if word in ("it", "its") else list(queried)
        return fitting[0] if fitting else None
    fitting = [e for e in queried if genders.get(e, gender) == gender]
    fitting += [e for e in ranked if genders.get(e) == gender]
    return fitting[0] if fitting else None
