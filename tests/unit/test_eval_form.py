"""A reader's form checks on answers: cut sentences, boilerplate, malformed sentences, dangling openers, repeats.
(The tagger's own checks are tested with the tagger in tests/integration/test_wellformed_reader.py.)"""

from __future__ import annotations

from collections.abc import Sequence

from cast.core.records import NO_ANSWER_TEXT, Answer, AnswerSentence
from cast.evaluate.form import FORM_CHECKS, form_checks, repeats
from cast.infra.readable import opens_with_reference
from cast.infra.wellformed import FormReader, SentenceForm


class OpenerReader(FormReader):
    """Reads as the tagger would where only a referring opener or a headline's missing verb is at stake."""

    def __init__(self) -> None:
        pass

    def read(self, sentences: Sequence[str]) -> list[SentenceForm]:
        return [
            SentenceForm("no verb" if s.startswith("Breakfast options") else None, opens_with_reference(s))
            for s in sentences
        ]


READER = OpenerReader()

PASSAGES = {
    "p1": "Marie Curie was a Polish physicist and chemist. She discovered polonium and radium.",
    "p2": "The book tells the story of her life. It was written by her daughter Eve.",
}


def answer(*sentences: tuple[str, str]) -> Answer:
    said = tuple(AnswerSentence(text, pid) for text, pid in sentences)
    return Answer(" ".join(s.text for s in said), tuple(PASSAGES), "test", sentences=said)


def test_a_clean_answer_has_no_fault():
    clean = answer(
        ("Marie Curie was a Polish physicist and chemist.", "p1"),
        ("She discovered polonium and radium.", "p1"),
    )
    assert form_checks(clean, [], PASSAGES, READER) == dict.fromkeys(FORM_CHECKS, 0.0)


def test_each_fault_is_found():
    cut = answer(("Marie Curie was a Polish physicist and…", "p1"))
    assert form_checks(cut, [], PASSAGES, READER)["cut"] == 1.0
    furniture = answer(("Section::::Life. Marie Curie was a Polish physicist and chemist.", "p1"))
    assert form_checks(furniture, [], PASSAGES, READER)["boilerplate"] == 1.0
    headline = answer(("Breakfast options near the Pantheon.", "p1"))
    assert form_checks(headline, [], PASSAGES, READER)["malformed"] == 1.0
    # "She" with the sentence it follows in its passage elsewhere, and "The book" opening the answer
    apart = answer(
        ("The book tells the story of her life.", "p2"), ("She discovered polonium and radium.", "p1")
    )
    assert form_checks(apart, [], PASSAGES, READER)["dangling"] == 1.0
    earlier = answer(("Marie Curie was a Polish physicist and chemist.", "p1"))
    again = answer(
        ("Marie Curie was a Polish physicist and chemist.", "p1"),
        ("It was written by her daughter Eve.", "p2"),
    )
    checks = form_checks(again, [earlier], PASSAGES, READER)
    assert checks["repeat"] == 1.0 and checks["dangling"] == 1.0


def test_repeats_count_shared_word_pairs_against_the_shorter_answer():
    assert repeats(
        "Radium was discovered in 1898 by the Curies.", ["Yes. Radium was discovered in 1898 by them."]
    )
    assert not repeats("Polonium is named after Poland.", ["Radium was discovered in 1898."])


def test_no_answer_has_no_fault_of_form():
    none = Answer(NO_ANSWER_TEXT, (), "test", no_answer_reason="no passages were selected")
    assert form_checks(none, [none], {}, READER) == dict.fromkeys(FORM_CHECKS, 0.0)
