"""What of a passage reads as an answer: real lines of the collections' passages (CAsT 2021-2022 provenance, iKAT
2023 provenance, Wikipedia), their boilerplate dropped and their content sentences kept."""

from __future__ import annotations

import pytest

from cast.infra.readable import (
    announces_what_follows,
    boilerplate_in,
    glued_heading_end,
    is_cut,
    opens_with_reference,
    readable_sentence,
    readable_sentences,
)
from cast.infra.text import SentenceSpan, split_sentences

# (passage text as the collection gives it, the sentences an answer may use)
CLEANED = [
    (
        "The industry suffers from the country's poor electricity, roads, and water quality. "
        "Section::::Attractions. Abuja is home to several parks and green areas.",
        [
            "The industry suffers from the country's poor electricity, roads, and water quality.",
            "Abuja is home to several parks and green areas.",
        ],
    ),
    (
        "Vancouver Weather: What to Expect and How to Pack Canada Vancouver Guide What's the Weather Like in "
        "Vancouver? By Jane McLean Updated on 11/24/19 Share Pin Email Harry Traeger / Getty Images Vancouver "
        "weather is infamously wet, yet mild year-round.",
        ["Vancouver weather is infamously wet, yet mild year-round."],
    ),
    (
        "Email is especially important in business. Email marketing isn’t dead Just as email itself isn’t dead, "
        "neither is email marketing.",
        [
            "Email is especially important in business.",
            "Just as email itself isn’t dead, neither is email marketing.",
        ],
    ),
    (
        "tant thing to do if you are serious. 2. Increase the intensity of your runs. For people with a limited "
        "amount of time, running harder is the way to go. 3. Eat more",
        [
            "Increase the intensity of your runs.",
            "For people with a limited amount of time, running harder is the way to go.",
        ],
    ),
    (
        "What a Wonderful World - Wikipedia What a Wonderful World From Wikipedia, the free encyclopedia Jump to "
        "navigation Jump to search 1967 song recorded by Louis Armstrong.",
        ["1967 song recorded by Louis Armstrong."],
    ),
    (
        "The University of Groningen was founded in 1614, making it one of the oldest universities... Read More "
        "Subject Score 40.2 Global Score 72.3",
        [],
    ),
    (
        "BMI has been suggested as an ideal measure of adiposity since it is easy to measure [ 17 ]. "
        "Irritable bowel syndrome (IBS) - NHS Skip to main content My account Health A-Z Live Well",
        ["BMI has been suggested as an ideal measure of adiposity since it is easy to measure."],
    ),
]

# Content sentences with what looks like boilerplate and is not: names, titles of works, numbers.
CONTENT = [
    "Notable winners include Buster Posey of Florida State University, Kelly Shoppach of Baylor University, "
    "Ryan Garko of Stanford University, and Kurt Suzuki of Cal State Fullerton.",
    "He starred in The Godfather and later in the band The Beatles' film.",
    "Marie Curie was the first woman to win a Nobel Prize, in 1903.",
    "Next, pour the vinegar based dressing over the coleslaw mix and stir.",
    "In 1796, the city was founded around the fort and named Lynchville.",
]


@pytest.mark.parametrize(("text", "expected"), CLEANED)
def test_boilerplate_is_dropped_and_the_sentences_after_it_kept(text, expected):
    kept = readable_sentences(text)
    assert [s.text for s in kept] == expected
    for span in kept:  # the offsets still point into the passage, at the kept sentence
        assert text[span.start : span.end].startswith(span.text[:10])


@pytest.mark.parametrize("sentence", CONTENT)
def test_content_sentences_are_kept_whole(sentence):
    assert [s.text for s in readable_sentences(sentence)] == [sentence]
    assert not boilerplate_in(sentence)


def test_cut_sentences_are_not_whole():
    assert is_cut("The average RAV4 hybrid price comes in just under $27,000 while")
    assert is_cut("The best views are from the water's edge...")
    assert is_cut("Marie Curie won the Nobel Prize in Physics in 1903 with…")
    assert is_cut("of the university is located in the Zuidas.")
    assert not is_cut('He said "Go."')
    assert readable_sentence(SentenceSpan("and the rest of it was lost at sea.", 0, 34)) is None


def test_a_heading_glued_to_a_sentence_ends_where_the_sentence_starts():
    text = (
        "The RAV4 is catching up to the fuel economy of the Prius The new RAV4 hybrid model is rated 40 mpg."
    )
    assert text[glued_heading_end(text) :].startswith("The new RAV4")
    assert glued_heading_end("The museum shows works by the band The Beatles and others.") is None


def test_what_the_wikipedia_dump_left_of_a_removed_template_is_dropped():
    # Real lines of the Wikipedia passages: a pronunciation or a native name removed, its brackets left.
    for line, kept in (
        (
            "Marie Skłodowska-Curie (; ]; 7 November 1867 – 4 July 1934) was a Polish and naturalized-French physicist.",
            "Marie Skłodowska-Curie (7 November 1867 – 4 July 1934) was a Polish and naturalized-French physicist.",
        ),
        ("Abuja () is the capital city of Nigeria.", "Abuja is the capital city of Nigeria."),
        (
            'Oxford philosopher Nick Bostrom in his "New York Times" bestseller, "", attempts to instill the value.',
            'Oxford philosopher Nick Bostrom in his "New York Times" bestseller, attempts to instill the value.',
        ),
        (
            'Polonium was named after Poland (Latin: "Polonia").',
            'Polonium was named after Poland (Latin: "Polonia").',
        ),
    ):
        sentence = readable_sentence(SentenceSpan(line, 0, len(line)))
        assert sentence is not None and sentence.text == kept
        assert boilerplate_in(line) == (line != kept)


def test_boilerplate_in_an_answer():
    assert boilerplate_in("Section::::History. Curie was born in Warsaw.")
    assert boilerplate_in("Doha attractions | Lonely Planet Home > Qatar > Doha.")
    assert boilerplate_in("1. Jollof rice is a West African dish.")
    assert not boilerplate_in("Jollof rice is a West African dish. It is made with rice and tomatoes.")


def test_openers_that_refer_to_what_came_before():
    for sentence in (
        "His wife was a chemist.",
        "The book tells her story.",
        "It means a dozen.",
        "Or a necklace.",
        "A few months later, on 4 July 1934, she died in Passy.",
        "Later, he moved to Paris.",
        "Lastly, because the Galaxy A50 has an in-screen fingerprint scanner, the device looks more seamless.",
        "Some of those island states are likely to face total inundation.",
        "Some of this is caused by cottage cheese having a slightly higher water content.",
    ):
        assert opens_with_reference(sentence), sentence
    for sentence in (
        "Marie Curie was a physicist.",
        "There are three types of IBS.",
        "Thebes is a city.",
        "Later versions of the engine were lighter.",
        "Finally completed in 1889, the tower was the tallest structure in the world.",
        "Some of the island states are likely to face total inundation.",
    ):
        assert not opens_with_reference(sentence), sentence


def test_sentences_that_announce_what_follows():
    # Real lines of the iKAT 2023 and CAsT 2022 passages: an announcement says nothing without what follows it.
    for sentence in (
        "Here are some tips that will help prevent you from feeling overwhelmed.",
        "Here’s a checklist that should help you get started with planning for a home interior project.",
        "Try this jump-rope interval workout to get started.",
        "Avoid these foods and ingredients.",
        "The following fact sheet contains interesting facts and information on the Watergate Scandal.",
        "Some first date advice for combating the wrong kind of butterflies: 1.",
    ):
        assert announces_what_follows(sentence), sentence
    for sentence in (
        "Here are the basics: Eat bread, and extra virgin olive oil.",  # goes on after its colon
        "Here, you will find both souvenirs for tourists and shopping for locals.",
        "The ratio of water to rice is 3:1.",
        "Try to eat more vegetables.",
    ):
        assert not announces_what_follows(sentence), sentence


def test_sentences_are_split_as_the_toolkit_splits_them():
    text = "Curie won twice. Section::::Life. She was born in Warsaw in 1867."
    assert [s.text for s in readable_sentences(text)] == ["She was born in Warsaw in 1867."] or len(
        split_sentences(text)
    ) == 3
