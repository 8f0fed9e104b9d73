"""The one sentence splitter, word pattern and entity label, and the stages that must agree on them."""

from __future__ import annotations

from cast.core.records import AnswerSentence, EntityMention, Passage, ScoredPassage, Selection
from cast.entity.select.selection import filter_sentences
from cast.evaluate.answers import groundedness
from cast.infra.text import (
    WORD_JOINERS,
    count_words,
    entity_label,
    sentences,
    split_sentences,
    word_tokens,
    words,
)
from cast.summarize.entity_extractive import EntityExtractiveSummarizer

CURIE = "Dr. Marie Curie won the Nobel Prize twice. She was born in Warsaw."


def test_sentences_end_at_stops_not_after_titles_or_initials():
    assert sentences(CURIE) == ["Dr. Marie Curie won the Nobel Prize twice.", "She was born in Warsaw."]
    assert sentences("The U.S. Army came. J. R. R. Tolkien wrote. Done") == [
        "The U.S. Army came.",
        "J. R. R. Tolkien wrote.",
        "Done",
    ]
    assert sentences("One. Two! 3 is a number? yes") == ["One.", "Two!", "3 is a number? yes"]
    assert sentences('He said "Go." Then he left.') == ['He said "Go."', "Then he left."]
    for span in split_sentences("  Lead.  Second one here.  "):
        assert "  Lead.  Second one here.  "[span.start : span.end] == span.text


def test_words_and_word_tokens():
    assert words("It's a well-known U.S. fact, isn't it?") == [
        "it's",
        "a",
        "well-known",
        "u",
        "s",
        "fact",
        "isn't",
        "it",
    ]
    assert word_tokens("COVID-19 and Curie's work") == ["COVID-19", "and", "Curie's", "work"]
    assert word_tokens("COVID-19 and Curie's work", split_at="-") == ["COVID", "19", "and", "Curie's", "work"]
    assert word_tokens("COVID-19 and Curie's", split_at=WORD_JOINERS) == ["COVID", "19", "and", "Curie", "s"]
    assert count_words("Dr. Marie  Curie") == 3


def test_entity_label():
    assert entity_label("http://dbpedia.org/resource/River_Clyde") == "River Clyde"
    assert entity_label("http://dbpedia.org/resource/Caf%C3%A9_M%C3%BCller") == "Café Müller"
    assert entity_label("http://dbpedia.org/resource/Glasgow/") == "Glasgow"
    assert entity_label("Glasgow") == "Glasgow"


def test_density_filter_attribution_and_groundedness_agree_on_a_title():
    curie = EntityMention("Marie Curie", 4, 15, "Marie_Curie", 1.0, "test")
    # ED keeps the first sentence whole: "Dr." does not end it.
    kept, _, number_kept, dropped = filter_sentences(CURIE, (curie,), 0.0)
    assert kept == "Dr. Marie Curie won the Nobel Prize twice." and (number_kept, dropped) == (1, 1)
    # Groundedness reads the passage's sentences the same way: the answer sentence is the passage's first.
    assert groundedness(["Dr. Marie Curie won the Nobel Prize twice."], [CURIE]) == (1.0, 1.0)
    # The extractive summarizer attributes whole sentences, never "Dr." alone.
    passage = ScoredPassage(Passage("p1", CURIE, "Marie Curie"), 1.0)
    answer = EntityExtractiveSummarizer(words=50).summarize(
        "Who was Marie Curie?", Selection((passage,), "o")
    )
    assert AnswerSentence("Dr. Marie Curie won the Nobel Prize twice.", "p1") in answer.sentences
