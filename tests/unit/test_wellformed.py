"""What a reader would not call a sentence, and sentences leaning on what came before, on hand-tagged words (the
tagger itself: tests/integration/test_wellformed_reader.py)."""

from __future__ import annotations

from typing import NamedTuple

from cast.infra.wellformed import refers_back, sentence_fault


class Word(NamedTuple):
    text: str
    tag_: str
    idx: int


def tagged(*pairs: str) -> tuple[list[Word], str]:
    """Words given as ``word/TAG``, joined by spaces, and their text."""
    words, at = [], 0
    for pair in pairs:
        text, tag = pair.rsplit("/", 1)
        words.append(Word(text, tag, at))
        at += len(text) + 1
    return words, " ".join(w.text for w in words)


def test_a_heading_glued_to_a_sentence_is_no_sentence():
    # "Both" capitalised after "superior": the next sentence starts with no stop between
    glued = tagged(
        "camera/NN", "is/VBZ", "superior/JJ", "Both/CC", "the/DT", "phones/NNS", "take/VBP", "photos/NNS"
    )
    assert sentence_fault(*glued) == "heading"
    # a name is no heading: "Will" is followed by a capitalised word, "in" joins "The" to its title
    name = tagged("She/PRP", "met/VBD", "Will/NNP", "Benteen/NNP", "in/IN", "The/DT", "Hague/NNP", "./.")
    assert sentence_fault(*name) is None
    label = tagged("Avoid/VB", "Criticism:/NN", "Try/VB", "and/CC", "avoid/VB", "it/PRP", "./.")
    assert sentence_fault(*label) == "heading"
    said_twice = tagged(
        "Content/NNP", "Marketing/NNP", "Content/NNP", "marketing/NN", "is/VBZ", "great/JJ", "./."
    )
    assert sentence_fault(*said_twice) == "heading"


def test_quotations_verbless_lines_and_page_text_are_no_sentences():
    quoted = tagged(
        '"Running/VBG', 'helps"/VBZ', "Workouts/NNS", "on/IN", "an/DT", "empty/JJ", "stomach/NN", "fail/VBP"
    )
    assert sentence_fault(*quoted) == "quotation"
    opened = tagged("He/PRP", "said/VBD", ",/,", '"I/PRP', "love/VBP", "deadlines/NNS", "./.")
    assert sentence_fault(*opened) == "quotation"
    assert sentence_fault(
        *tagged("One/CD", "of/IN", "the/DT", "largest/JJS", "shops/NNS", "in/IN", "Doha/NNP")
    ) == ("no verb")
    meta = tagged("The/DT", "best/JJS", "courses/NNS", "are/VBP", "discussed/VBN", "./.")
    assert sentence_fault(*meta) == "page text"


def test_what_leans_on_what_came_before():
    assert refers_back(*tagged("The/DT", "hotel/NN", "has/VBZ", "been/VBN", "refurbished/VBN", "./."))
    # a definite noun that says which is no reference
    assert not refers_back(
        *tagged("The/DT", "amount/NN", "of/IN", "solar/JJ", "energy/NN", "decreases/VBZ", "./.")
    )
    assert refers_back(
        *tagged("Unfortunately/RB", "for/IN", "Nixon/NNP", ",/,", "the/DT", "equipment/NN", "was/VBD")
    )
    assert refers_back(
        *tagged("Thanks/NNS", "to/IN", "his/PRP$", "influence/NN", ",/,", "Pynchon/NNP", "became/VBD")
    )
    assert not refers_back(
        *tagged("Most/JJS", "architects/NNS", "design/VBP", "their/PRP$", "buildings/NNS", "./.")
    )
    assert refers_back(
        *tagged("In/IN", "my/PRP$", "mind/NN", ",/,", "though/RB", ",/,", "you/PRP", "lean/VBP")
    )
    assert refers_back(
        *tagged("The/DT", "British/NNPS", "renamed/VBD", "these/DT", "as/IN", "Duke/NNP", "Town/NNP")
    )
    assert not refers_back(
        *tagged("Take/VB", "a/DT", "look/NN", "at/IN", "these/DT", "key/JJ", "things/NNS", "./.")
    )
