"""The question an answer answers: resolved in its conversation, and the kind of answer it asks for.

A rewriter's keyword query suits Lucene (a bag of the conversation's words) but not the judging of a sentence; its
question is the user's utterance, whose pronouns point back into the conversation ("Which elements did she
discover?"). :func:`natural_question` names the conversation's salient entity in place of the first such pronoun
("Which elements did Marie Curie discover?"). :func:`answer_kind` tells what kind of sentence answers the
question (a definition, a cause, a procedure, a yes or no, a quantity, a date, a list) and :func:`fits_kind`
whether a sentence is of that kind.
"""

from __future__ import annotations

import re

# Sentence cues of each kind of answer.
DIGIT = re.compile(r"\d")
YEAR = re.compile(r"\b(?:1[0-9]|20)\d\d\b")
CAUSE = re.compile(
    r"\b(?:because|due to|caused|causes|cause|result of|as a result|leads? to|since|therefore)\b"
)
DEFINITION = re.compile(r"^[^,;]{0,80}?\b(?:is|are|was|were|refers to|means)\s+(?:a|an|the|one)\b", re.I)
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
_YES_NO_SENTENCE = re.compile(r"\b(?:yes|no|not|never|can|cannot|can't|may|is|are|does|do)\b", re.I)

_AUXILIARIES = frozenset(
    """is are was were do does did can could should would will has have had may might must isn't aren't wasn't
    doesn't don't didn't can't""".split()
)
_LEAD_INS = frozenset(("and", "so", "but", "ok", "okay", "then", "also", "now", "well", "oh"))
KINDS = ("definition", "cause", "procedure", "yes_no", "quantity", "date", "list")
# The question's words that say what kind of answer it asks for, first match wins.
_KIND_PATTERNS = (
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
    if kind == "definition":
        return bool(DEFINITION.search(sentence))
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


def natural_question(question: str, entity: str | None) -> str:
    """``question`` with its first third-person pronoun replaced by the name ``entity`` (the conversation's
    salient entity), unless the question names it already.

    Example:
        >>> natural_question("Which elements did she discover?", "Marie Curie")
        'Which elements did Marie Curie discover?'
        >>> natural_question("What was his job?", "Pierre Curie")
        "What was Pierre Curie's job?"
    """
    if not entity or entity.lower() in question.lower():
        return question
    pronoun = _PRONOUN.search(question)
    if pronoun is None:
        return question
    name = f"{entity}'s" if pronoun.group().lower() in _POSSESSIVES else entity
    return question[: pronoun.start()] + name + question[pronoun.end() :]
